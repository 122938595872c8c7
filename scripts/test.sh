#!/usr/bin/env bash
# The whole test suite, in two passes. First everything but the `realtime` tests on pytest-xdist's
# workers (pyproject.toml's addopts); then the `realtime` tests, which bound wall-clock timing
# (a step's game time, a sampler's deadlines, a stream's rate), one at a time (-n 0) with the
# machine to themselves: on a 2-core machine the other workers' load stalls an answer by ticks.
# Arguments go to both passes (a file, -k, -x). The second runs whatever the first found; the
# exit status is the first failure's, or pytest's "no tests collected" (5) if neither ran one.
set -uo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest -m "not realtime" "$@"
first=$?
if [ "$#" -eq 0 ]; then  # collect only the files that hold one (importing every test file costs seconds)
  mapfile -t timed < <(grep -l "pytest.mark.realtime" tests/test_*.py)
  .venv/bin/python -m pytest -n 0 -m realtime "${timed[@]}"
else
  .venv/bin/python -m pytest -n 0 -m realtime "$@"
fi
second=$?
if [ "$first" -eq 5 ] && [ "$second" -eq 5 ]; then exit 5; fi
for status in "$first" "$second"; do
  if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then exit "$status"; fi
done
exit 0
