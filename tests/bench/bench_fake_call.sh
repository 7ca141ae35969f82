#!/usr/bin/env bash
# What one call of a fake vendor tool costs inside a test node, against the
# floor of any Python program there (`python3 -c pass`). The roles call the
# fakes about 80 times per node and run on an 8-NPU node (the NPU network's
# reads and pings, the preflight's npu-smi), each a Python start.
#
# A container of the base image (a sleeping process, no systemd) gets the fake
# root of an Atlas 800I A2 node as tests/fakes/install_fakes.yml installs it
# (tests/fakes/build_fake_root.py's archive and its install.sh); then CALLS
# calls of each command, ROUNDS rounds alternated, timed inside the container.
# Prints the median per call of each and writes them as JSON.
#
#   bash tests/bench/bench_fake_call.sh [OUT.json]     (needs make image)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
IMAGE="${IMAGE:-aihost-llm-cluster/debian-systemd:bookworm}"
ROUNDS="${ROUNDS:-3}"
CALLS="${CALLS:-50}"
OUT="${1:-$ROOT/.cache/timing/bench-fake-call.json}"
PY="${PY:-$ROOT/.venv/bin/python}"
NAME=llmc-fakebench
work="$(mktemp -d)"
trap 'docker rm -f "$NAME" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

"$PY" "$ROOT/tests/fakes/build_fake_root.py" --profile atlas-800i-a2 --hostname fakebench --arch "$(uname -m)" \
  --out "$work/fake-root.tar"
docker rm -f "$NAME" >/dev/null 2>&1 || true
docker run --detach --name "$NAME" --network none --entrypoint sleep "$IMAGE" infinity >/dev/null
docker cp "$work/fake-root.tar" "$NAME:/tmp/fake-root.tar"
docker exec "$NAME" sh -c 'tar -xOf /tmp/fake-root.tar var/lib/llm-cluster-fakes/install.sh | sh -s -- /tmp/fake-root.tar' \
  >/dev/null

declare -A commands=(
  [floor]="python3 -c pass"
  [npu-smi]="npu-smi info -t board -i 0 -c 0"
  [hccn_tool]="hccn_tool -i 0 -ip -g"
)
order=(floor npu-smi hccn_tool)
declare -A seconds=()
for round in $(seq 1 "$ROUNDS"); do
  for what in "${order[@]}"; do
    # Bash's own clock inside the container: no docker exec in the timed part.
    per_call=$(docker exec "$NAME" bash -c "
      start=\$EPOCHREALTIME
      for i in \$(seq $CALLS); do ${commands[$what]} >/dev/null 2>&1 || true; done
      end=\$EPOCHREALTIME
      python3 -c \"print('%.2f' % ((\$end - \$start) / $CALLS * 1000))\"")
    seconds[$what]="${seconds[$what]:-} $per_call"
    echo "round $round, $what: $per_call ms a call"
  done
done
mkdir -p "$(dirname "$OUT")"
"$PY" - "$OUT" "${seconds[floor]}" "${seconds[npu-smi]}" "${seconds[hccn_tool]}" <<'EOF'
import json, statistics, sys
out, floor, npu_smi, hccn = sys.argv[1], *[[float(x) for x in arg.split()] for arg in sys.argv[2:]]
doc = {"ms_per_call": {"python3 -c pass": floor, "npu-smi info -t board -i 0 -c 0": npu_smi, "hccn_tool -i 0 -ip -g": hccn}}
doc["median_ms"] = {name: statistics.median(values) for name, values in doc["ms_per_call"].items()}
with open(out, "w", encoding="utf-8") as handle:
    json.dump(doc, handle, indent=2)
    handle.write("\n")
print("median ms a call: " + ", ".join("%s %.1f" % item for item in doc["median_ms"].items()))
EOF
