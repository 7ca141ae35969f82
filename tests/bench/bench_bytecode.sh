#!/usr/bin/env bash
# The cost of running the test stages without Python's byte-code cache.
#
# A build machine may set PYTHONDONTWRITEBYTECODE=1 for every process. The
# controller's venv is installed with --no-compile, so Python compiles each
# module when it is first imported and, allowed to, keeps the byte code; with
# the variable set it compiles every module again in every process
# (ansible-playbook, its task workers, Molecule, pytest). The Makefile unexports
# the variable.
#
# Two fresh clones of HEAD, each with a new venv (as on a new machine; the
# wheelhouse is linked from this checkout), run the same stages: one with the
# variable forced on every process under make (the clone's Makefile without
# its unexport line), one as the Makefile is. Prints each run's stage table
# and the ratio of the two wall times.
#
#   bash tests/bench/bench_bytecode.sh ["stage stage ..."]
#
# Default stages: integration and molecule-binding. Writes
# .cache/timing/bench-bytecode.json.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
STAGES="${1:-integration molecule-binding}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/llm_cluster-bytecode.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

run() {
  local name=$1 clone="$WORK/$1" start end
  git clone --quiet "$ROOT" "$clone"
  mkdir -p "$clone/.cache"
  cp -al "$ROOT/.cache/wheelhouse" "$clone/.cache/wheelhouse"
  # New stamps, newer than the clone's lock file (the linked ones are this checkout's files).
  for stamp in "$clone"/.cache/wheelhouse/.[a-z]*; do
    rm "$stamp" && touch "$stamp"
  done
  if [ "$name" = without-cache ]; then
    grep -qx 'unexport PYTHONDONTWRITEBYTECODE' "$clone/Makefile" \
      || { echo "the Makefile has no 'unexport PYTHONDONTWRITEBYTECODE' line to take out" >&2; return 1; }
    sed -i '/^unexport PYTHONDONTWRITEBYTECODE$/d' "$clone/Makefile"
  fi
  (cd "$clone" && PYTHONDONTWRITEBYTECODE=1 make --no-print-directory venv collection > "$WORK/$name-venv.log" 2>&1)
  start=$(date +%s.%N)
  (cd "$clone" && PYTHONDONTWRITEBYTECODE=1 LLM_CLUSTER_TEST_STAGES="$STAGES" \
    bash tests/bench/make-test-stages.sh > "$WORK/$name.log" 2>&1) || { tail -n 60 "$WORK/$name.log"; return 1; }
  end=$(date +%s.%N)
  echo "== $name"
  grep -E '^\| ' "$WORK/$name.log"
  awk -v a="$end" -v b="$start" 'BEGIN { printf "%.1f\n", a - b }' > "$WORK/$name.seconds"
}

run without-cache
run with-cache
mkdir -p "$ROOT/.cache/timing"
python3 - "$WORK" "$STAGES" "$ROOT/.cache/timing/bench-bytecode.json" <<'PY'
import json, sys
work, stages, out = sys.argv[1:]
without = float(open(work + "/without-cache.seconds").read())
with_cache = float(open(work + "/with-cache.seconds").read())
result = {"stages": stages.split(), "without_cache_s": without, "with_cache_s": with_cache,
          "ratio": round(with_cache / without, 3)}
json.dump(result, open(out, "w"), indent=2)
print("stages %s: without the byte-code cache %.0f s, with it %.0f s (ratio %.2f)"
      % (stages, without, with_cache, result["ratio"]))
PY
