#!/usr/bin/env bash
# Captures, on a machine with an NVIDIA GPU, the vendor outputs the collection
# parses (nvidia-smi's query, its topology matrix, its summary) byte-exact into
# $OUT, and runs the collection's own probes (accelerator_facts' inventory and
# the binding's topology reader) on the live machine, writing what they made
# of it. tests/fixtures/vendor keeps the captures; the unit tests read them.
# Needs only nvidia-smi and python3 (no Ansible): run from the repository root.
set -u
out=${OUT:-$(mktemp -d)}
fields=index,uuid,name,pci.bus_id,memory.total,memory.used,temperature.gpu,power.draw,driver_version
capture() {  # name, then the command: stdout byte-exact, the exit status and stderr beside it
  local name=$1; shift
  "$@" > "$out/$name" 2> "$out/$name.stderr"
  echo "$name: rc=$? $*" >> "$out/commands.txt"
}
capture nvidia-smi-query-gpu-ours.csv nvidia-smi "--query-gpu=$fields" --format=csv,noheader,nounits
capture nvidia-smi-query-gpu-header.csv nvidia-smi "--query-gpu=$fields" --format=csv
capture nvidia-smi-topo-m.txt nvidia-smi topo -m
capture nvidia-smi.txt nvidia-smi
{ uname -a; nproc; cat /sys/devices/system/node/online 2>&1; for node in /dev/nvidia*; do echo "${node#/dev/}"; done; } \
  > "$out/machine.txt" 2>&1
# The collection's probes on this machine, as the modules run them.
root=$(mktemp -d)
mkdir -p "$root/ansible_collections/aihost"
ln -s "$PWD" "$root/ansible_collections/aihost/llm_cluster"
PYTHONPATH=$root python3 - "$out/probes.json" <<'PY'
import json, subprocess, sys
from ansible_collections.aihost.llm_cluster.plugins.module_utils import _accelerators, _topology

def run(argv):
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return done.returncode, done.stdout, done.stderr

accelerators = _accelerators.gather_accelerators(run, nvidia_smi_path="nvidia-smi")
topology = _topology.gather_topology(run, accelerators)
with open(sys.argv[1], "w") as handle:
    json.dump({"accelerators": accelerators, "topology": topology}, handle, indent=1, sort_keys=True, default=str)
print(json.dumps(accelerators, indent=1, default=str)[:3000])
PY
echo "probes rc=$?" >> "$out/commands.txt"
# stderr files that are empty are not worth a slot in the files that come back.
find "$out" -name '*.stderr' -empty -delete
cat "$out/commands.txt"; ls -la "$out"
