#!/usr/bin/env bash
# Runs the stages of `make test` (lint, sanity, unit, integration, one per
# Molecule scenario, the demo from a fresh clone) in lanes, and ends with a
# Markdown table of each stage's wall time, its budget and result. Exits
# non-zero when a stage failed; later stages still run, so one run shows every
# failure.
#
# tests/bench/stage-budgets.txt gives each stage its budget (seconds on the
# 2-core build machine) and its lane. The lanes run side by side, each stage of
# a lane after the one before: much of a scenario's time is spent waiting (for
# systemd, Ray, an engine, shaped links), so two lanes keep both cores busy.
# Scenarios whose containers share names (master1, duo1, ...) must be in one
# lane. A stage not in the file runs in lane a, without a budget. Each stage's
# output is printed in one piece when it ends. LLM_CLUSTER_TEST_LANES=1 runs
# every stage in one lane, in the file's order; LLM_CLUSTER_TEST_STAGES="a b"
# runs only those stages.
# A stage over its budget is marked in the table (a bug to fix, not a failure
# here: the machines are shared and noisy). `make test` calls this script;
# docs/benchmarks.md records its table.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
all=(lint sanity unit integration)
for scenario in molecule/*/molecule.yml; do
  name="${scenario#molecule/}"
  all+=("molecule-${name%/molecule.yml}")
done
all+=(demo-check)
if [ -n "${LLM_CLUSTER_TEST_STAGES:-}" ]; then
  read -r -a all <<< "$LLM_CLUSTER_TEST_STAGES"
fi
declare -A budget=() lane_of=()
ordered=()
while read -r stage seconds lane; do
  [[ -z "$stage" || "$stage" == \#* ]] && continue
  budget[$stage]=$seconds
  lane_of[$stage]=${lane:-a}
  ordered+=("$stage")
done < tests/bench/stage-budgets.txt
# The stages to run, in the file's order, then any the file does not name.
declare -A wanted=()
for stage in "${all[@]}"; do wanted[$stage]=1; done
stages=()
for stage in "${ordered[@]}"; do
  [ -n "${wanted[$stage]:-}" ] && stages+=("$stage") && unset "wanted[$stage]"
done
for stage in "${all[@]}"; do
  [ -n "${wanted[$stage]:-}" ] && stages+=("$stage")
done

logs="$(mktemp -d "${TMPDIR:-/tmp}/llm_cluster-stages.XXXXXX")"
trap 'rm -rf "$logs"' EXIT

run_stage() {
  local stage=$1 start result seconds
  start=$(date +%s.%N)
  if make --no-print-directory "$stage" > "$logs/$stage.log" 2>&1; then result=ok; else result=FAILED; fi
  seconds=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN { printf "%.0f", a - b }')
  echo "$seconds $result" > "$logs/$stage.result"
  {
    flock 9
    echo "== stage $stage (lane ${lane_of[$stage]:-a}): $result in ${seconds}s"
    cat "$logs/$stage.log"
    echo "== end of stage $stage"
  } 9> "$logs/.print"
}

run_lane() {
  local stage
  for stage in "$@"; do run_stage "$stage"; done
}

t0=$(date +%s)
if [ "${LLM_CLUSTER_TEST_LANES:-2}" = 1 ]; then
  run_lane "${stages[@]}"
else
  declare -A lanes=()
  for stage in "${stages[@]}"; do
    lane=${lane_of[$stage]:-a}
    lanes[$lane]+="$stage "
  done
  for lane in "${!lanes[@]}"; do
    read -r -a members <<< "${lanes[$lane]}"
    echo "== lane $lane: ${members[*]}"
    run_lane "${members[@]}" &
  done
  wait
fi
wall=$(( $(date +%s) - t0 ))

rows=()
failed=0
passed=0
sum=0
total_budget=0
for stage in "${stages[@]}"; do
  read -r seconds result < "$logs/$stage.result" || { seconds=0; result=FAILED; }
  if [ "$result" = ok ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  sum=$((sum + seconds))
  limit="${budget[$stage]:-}"
  note=""
  if [ -z "$limit" ]; then
    limit="-"
    note=" (no budget)"
  else
    total_budget=$((total_budget + limit))
    [ "$seconds" -gt "$limit" ] && note=" (over budget)"
  fi
  rows+=("| $stage | ${lane_of[$stage]:-a} | $seconds | $limit | $result$note |")
done
echo
echo "| stage | lane | seconds | budget | result |"
echo "|---|---|---:|---:|---|"
printf '%s\n' "${rows[@]}"
echo "| **sum of stages** | | $sum | $total_budget | |"
echo "| **wall time** | | $wall | | |"
echo
echo "stages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
