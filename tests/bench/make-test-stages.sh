#!/usr/bin/env bash
# Runs the stages of `make test` one after another (lint, sanity, unit,
# integration, one per Molecule scenario, the demo from a fresh clone), streams their output, and ends with
# a Markdown table of each stage's wall time and result. Exits non-zero when a
# stage failed; later stages still run, so one run shows every failure.
# `make test` calls it; docs/benchmarks.md records its table.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
stages=(lint sanity unit integration)
for scenario in molecule/*/molecule.yml; do
  name="${scenario#molecule/}"
  stages+=("molecule-${name%/molecule.yml}")
done
stages+=(demo-check)
rows=()
failed=0
passed=0
total=0
for stage in "${stages[@]}"; do
  echo "== stage $stage"
  start=$(date +%s.%N)
  if make --no-print-directory "$stage"; then result=ok; passed=$((passed + 1)); else result=FAILED; failed=$((failed + 1)); fi
  seconds=$(awk -v a="$(date +%s.%N)" -v b="$start" 'BEGIN { printf "%.0f", a - b }')
  total=$((total + seconds))
  rows+=("| $stage | $seconds | $result |")
done
echo
echo "| stage | seconds | result |"
echo "|---|---:|---|"
printf '%s\n' "${rows[@]}"
echo "| **total** | $total | |"
echo
echo "stages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
