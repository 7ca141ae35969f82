#!/usr/bin/env bash
# Runs the collection's read-only modules as Ansible runs them (a module file
# and its JSON arguments) on a live machine, in check mode where one could
# write: accelerator_facts (devices and CPU topology) and host_tuning (the diff
# a profile's settings would make). Their JSON goes to $OUT.
# Needs python3; ansible-core and resolvelib as wheels in WHEELS (default .whl,
# `pip download --no-deps ansible-core==<the lock's> resolvelib==<the lock's>`)
# where the machine has no index. Run from the repository root.
set -u
out=${OUT:-$(mktemp -d)}
wheels=${WHEELS:-.whl}
site=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$wheels"/*.whl || exit 1
root=$(mktemp -d)
mkdir -p "$root/ansible_collections/aihost"
ln -s "$PWD" "$root/ansible_collections/aihost/llm_cluster"
export PYTHONPATH="$site:$root"
run() {  # name, module, its arguments as JSON
  printf '{"ANSIBLE_MODULE_ARGS": %s}' "$3" > "$root/args.json"
  python3 "plugins/modules/$2.py" "$root/args.json" > "$out/$1.json" 2> "$out/$1.stderr"
  echo "$1 rc=$?"
}
run facts accelerator_facts '{"topology": true}'
run tuning host_tuning '{"state": "present", "_ansible_check_mode": true, "_ansible_diff": true,
  "sysctl": {"vm.swappiness": 0, "net.core.somaxconn": 65535}, "transparent_hugepage": "madvise",
  "cpu_governor": "performance", "optional": ["cpu_governor", "transparent_hugepage"]}'
# Check mode wrote nothing: no state directory.
if [ -e /var/lib/llm_cluster ]; then echo "check mode left /var/lib/llm_cluster"; fi
find "$out" -name '*.stderr' -empty -delete
