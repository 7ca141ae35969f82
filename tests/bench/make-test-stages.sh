#!/usr/bin/env bash
# Times each stage of `make test` on this machine and prints a Markdown table
# (stage | seconds | result). Run from the repository root: make bench
# The stages run one after another, like `make test`; a failing stage is
# reported and the next one still runs.
set -uo pipefail
cd "$(dirname "$0")/../.."
stages=(lint sanity unit integration)
for scenario in molecule/*/molecule.yml; do
  name="${scenario#molecule/}"
  stages+=("molecule-${name%/molecule.yml}")
done
printf '| stage | seconds | result |\n|---|---:|---|\n'
total=0
for stage in "${stages[@]}"; do
  start=$(date +%s.%N)
  if make --no-print-directory "$stage" > ".cache/bench-$stage.log" 2>&1; then result=ok; else result="FAILED (see .cache/bench-$stage.log)"; fi
  seconds=$(awk -v a="$(date +%s.%N)" -v b="$start" "BEGIN{print a-b}")
  total=$(awk -v a="$total" -v b="$seconds" "BEGIN{print a+b}")
  printf '| %s | %.0f | %s |\n' "$stage" "$seconds" "$result"
done
printf '| **total** | %.0f | |\n' "$total"
