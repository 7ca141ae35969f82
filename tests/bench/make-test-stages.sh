#!/usr/bin/env bash
# Runs the stages of `make test` (lint, sanity, unit, integration, one per
# Molecule scenario, the demo from a fresh clone), two at a time, and ends with
# a Markdown table of each stage's start, wall time, budget and result. Exits
# non-zero when a stage failed; later stages still run, so one run shows every
# failure.
#
# tests/bench/stage-budgets.txt gives each stage its budget (seconds on the
# 2-core build machine) and the container names it creates. Two slots run side
# by side; whenever one is free it takes the first stage of the file's order
# whose names no running stage uses (default and faults both make master1,
# faults and profiles both make duo1). The file lists the longest stages first,
# so that the short ones fill in at the end. A stage not in the file runs last,
# without a budget. Each stage's output is printed in one piece when it ends.
# LLM_CLUSTER_TEST_SLOTS=1 (or LLM_CLUSTER_TEST_LANES=1) runs the stages one
# after another, in the file's order; LLM_CLUSTER_TEST_STAGES="a b" runs only
# those stages.
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
declare -A budget=() names_of=()
ordered=()
while read -r stage seconds names; do
  [[ -z "$stage" || "$stage" == \#* ]] && continue
  budget[$stage]=$seconds
  names_of[$stage]=${names:--}
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
slots=${LLM_CLUSTER_TEST_SLOTS:-2}
[ "${LLM_CLUSTER_TEST_LANES:-}" = 1 ] && slots=1

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
    echo "== stage $stage (started at ${started[$stage]}s): $result in ${seconds}s"
    cat "$logs/$stage.log"
    echo "== end of stage $stage"
  } 9> "$logs/.print"
}

# True when a running stage makes a container name this one makes too.
collides() {
  local stage=$1 other name mine
  [ "${names_of[$stage]:--}" = - ] && return 1
  IFS=, read -r -a mine <<< "${names_of[$stage]}"
  for other in "${!running[@]}"; do
    for name in "${mine[@]}"; do
      [[ ",${names_of[${running[$other]}]:-}," == *",$name,"* ]] && return 0
    done
  done
  return 1
}

t0=$(date +%s)
declare -A running=() started=()
pending=("${stages[@]}")
echo "== stages, $slots at a time: ${pending[*]}"
while [ ${#pending[@]} -gt 0 ] || [ ${#running[@]} -gt 0 ]; do
  # Fill every free slot with the first pending stage that collides with nothing running.
  while [ ${#running[@]} -lt "$slots" ]; do
    pick=""
    for index in "${!pending[@]}"; do
      if ! collides "${pending[$index]}"; then pick=$index; break; fi
    done
    [ -z "$pick" ] && break
    stage=${pending[$pick]}
    unset "pending[$pick]"
    pending=("${pending[@]}")
    started[$stage]=$(( $(date +%s) - t0 ))
    run_stage "$stage" &
    running[$!]=$stage
  done
  [ ${#running[@]} -eq 0 ] && break
  wait -n -p done_pid "${!running[@]}"
  unset "running[$done_pid]"
done
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
  rows+=("| $stage | ${started[$stage]:-} | $seconds | $limit | $result$note |")
done
echo
echo "| stage | started at (s) | seconds | budget | result |"
echo "|---|---|---:|---:|---|"
printf '%s\n' "${rows[@]}"
echo "| **sum of stages** | | $sum | $total_budget | |"
echo "| **wall time** | | $wall | | |"
# Why each failed stage failed, in a few lines at the end, where a reader of only the tail looks: pytest's
# summary and assertion lines, Ansible's failed tasks, Make's errors.
for stage in "${stages[@]}"; do
  read -r seconds result < "$logs/$stage.result" 2>/dev/null && [ "$result" = ok ] && continue
  echo
  echo "why $stage failed (its whole log is above, between its == lines):"
  grep -E '^(FAILED|ERROR) |^E  |fatal: \[|FAILED! =>|^make(\[[0-9]+\])?: \*\*\*|Error: |Traceback' "$logs/$stage.log" 2>/dev/null \
    | cut -c1-300 | head -n 30 | sed 's/^/    /'
done
echo
echo "stages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
