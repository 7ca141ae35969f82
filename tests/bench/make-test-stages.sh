#!/usr/bin/env bash
# Runs the stages of `make test` one after another (lint, sanity, unit,
# integration, one per Molecule scenario, the demo from a fresh clone), streams their output, and ends with
# a Markdown table of each stage's wall time, its budget and result. Exits non-zero when a
# stage failed; later stages still run, so one run shows every failure.
# Budgets (seconds, on the 2-core build machine) are in tests/bench/stage-budgets.txt and
# docs/testing.md; a stage over its budget is marked in the table (a bug to fix, not a failure here:
# the machines are shared and noisy). A stage without a budget is marked too.
# `make test` calls it; docs/benchmarks.md records its table.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
stages=(lint sanity unit integration)
for scenario in molecule/*/molecule.yml; do
  name="${scenario#molecule/}"
  stages+=("molecule-${name%/molecule.yml}")
done
stages+=(demo-check)
declare -A budget=()
while read -r stage seconds; do
  [[ -z "$stage" || "$stage" == \#* ]] && continue
  budget[$stage]=$seconds
done < tests/bench/stage-budgets.txt
rows=()
failed=0
passed=0
total=0
total_budget=0
for stage in "${stages[@]}"; do
  echo "== stage $stage"
  start=$(date +%s.%N)
  if make --no-print-directory "$stage"; then result=ok; passed=$((passed + 1)); else result=FAILED; failed=$((failed + 1)); fi
  seconds=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN { printf "%.0f", a - b }')
  total=$((total + seconds))
  limit="${budget[$stage]:-}"
  note=""
  if [ -z "$limit" ]; then
    limit="-"
    note=" (no budget)"
  else
    total_budget=$((total_budget + limit))
    [ "$seconds" -gt "$limit" ] && note=" (over budget)"
  fi
  rows+=("| $stage | $seconds | $limit | $result$note |")
done
echo
echo "| stage | seconds | budget | result |"
echo "|---|---:|---:|---|"
printf '%s\n' "${rows[@]}"
echo "| **total** | $total | $total_budget | |"
echo
echo "stages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
