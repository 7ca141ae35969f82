#!/usr/bin/env bash
# How long a new engine container takes from `docker run` to /health answering,
# with the byte code and vLLM's model-class cache the engine image was built
# with (warm) and without them (cold, as in an image built with pip
# --no-compile and nothing else: PYTHONPYCACHEPREFIX and VLLM_CACHE_ROOT point
# at empty directories, so Python compiles every module it imports and vLLM
# inspects the model class in a subprocess). The
# engine runs the container scenario's flags on a tiny random-weight model
# (demo/build_tiny_model.py). ROUNDS rounds of both, alternated; prints one
# line per start and writes them, with the ratio of the medians and where each
# start went (from the engine's log: its three processes' first lines, the
# engine's init, the server's start), as JSON.
#
#   bash tests/bench/bench_engine_start.sh [OUT.json]    (needs make engine-image)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
IMAGE="${ENGINE_IMAGE:-aihost-llm-cluster/engine-vllm-cpu:0.32.0}"
ROUNDS="${ROUNDS:-2}"
OUT="${1:-$ROOT/.cache/timing/bench-engine-start.json}"
PY="${PY:-$ROOT/.venv/bin/python}"
NAME=llmc-startbench
work="$(mktemp -d)"
trap 'docker rm -f "$NAME" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
"$PY" "$ROOT/demo/build_tiny_model.py" "$work/model" >/dev/null

start_once() {
  local mode=$1 env=() begin
  [ "$mode" = cold ] && env=(--env PYTHONPYCACHEPREFIX=/tmp/empty-pycache --env VLLM_CACHE_ROOT=/tmp/empty-vllm-cache)
  docker rm -f "$NAME" >/dev/null 2>&1 || true
  begin=$(date +%s.%N)
  docker run --detach --name "$NAME" --network none --shm-size 1g "${env[@]}" \
    --volume "$work/model:/model:ro" "$IMAGE" \
    vllm serve /model --host 127.0.0.1 --port 18000 --enforce-eager --dtype float32 \
    --max-model-len 256 --kv-cache-memory-bytes 33554432 >/dev/null
  until docker exec "$NAME" python3 -c \
      'import urllib.request; urllib.request.urlopen("http://127.0.0.1:18000/health", timeout=2)' 2>/dev/null; do
    if [ "$(docker inspect -f '{{ .State.Running }}' "$NAME")" != true ]; then
      docker logs "$NAME" 2>&1 | tail -20 >&2
      return 1
    fi
    sleep 0.5
  done
  awk -v a="$(date +%s.%N)" -v b="$begin" 'BEGIN { printf "%.1f", a - b }'
  # The engine's own log with Docker's timestamps, for the phases of the start (below).
  { docker inspect -f '{{ .State.StartedAt }}' "$NAME"; docker logs -t "$NAME" 2>&1; } > "$work/$mode-$round.log"
}

declare -a cold=() warm=()
for round in $(seq 1 "$ROUNDS"); do
  for mode in cold warm; do
    seconds=$(start_once "$mode")
    echo "round $round, $mode start: $seconds s"
    if [ "$mode" = cold ]; then cold+=("$seconds"); else warm+=("$seconds"); fi
  done
done
mkdir -p "$(dirname "$OUT")"
"$PY" - "$OUT" "${cold[*]}" "${warm[*]}" "$work" "$ROUNDS" <<'EOF'
import datetime, json, re, statistics, sys
out, cold, warm = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
work, rounds = sys.argv[4], int(sys.argv[5])
# Where a start goes, from the container's start: the API server's first line (its imports done), the
# engine core's first (a process vLLM starts with spawn: its own imports), the worker's first (spawned by the
# engine core), the engine's init done, the HTTP server started.
MARKS = (("api_server", r"\(APIServer pid=\d+\)"), ("engine_core", r"\(EngineCore(?:_DP\d+)? pid=\d+\)"),
         ("worker", r"\((?:Vllm)?Worker(?:-\d+)? pid=\d+\)"), ("engine_ready", r"init engine .* took"),
         ("serving", r"Starting vLLM server"))


def stamp(text):
    # Docker's RFC 3339 time with nanoseconds: keep microseconds.
    text = re.sub(r"(\.\d{6})\d*", r"\1", text.strip().replace("Z", "+00:00"))
    return datetime.datetime.fromisoformat(text).timestamp()


phases = {"cold": [], "warm": []}
for mode in phases:
    for number in range(1, rounds + 1):
        with open("%s/%s-%d.log" % (work, mode, number), encoding="utf-8", errors="replace") as handle:
            started, *lines = handle.read().splitlines()
        begin, seen = stamp(started), {}
        for line in lines:
            when, _, rest = line.partition(" ")
            for name, pattern in MARKS:
                if name not in seen and re.search(pattern, rest):
                    seen[name] = round(stamp(when) - begin, 1)
        phases[mode].append(seen)
        print("%s start %d, seconds from the container's start: %s" % (mode, number, seen))
doc = {"cold_seconds": cold, "warm_seconds": warm, "phases": phases,
       "warm_over_cold": round(statistics.median(warm) / statistics.median(cold), 2)}
with open(out, "w", encoding="utf-8") as handle:
    json.dump(doc, handle, indent=2)
    handle.write("\n")
print("median cold %.1f s, warm %.1f s, warm/cold %.2f" % (statistics.median(cold), statistics.median(warm), doc["warm_over_cold"]))
EOF
