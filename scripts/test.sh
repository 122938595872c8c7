#!/usr/bin/env bash
# The test suite, in two passes. First the tests that do not bound wall-clock time, on
# pytest-xdist's workers (pyproject.toml's addopts); then the `realtime` tests, which bound it (a
# step's game time, a sampler's deadlines, a stream's rate), one at a time (-n 0) with the machine
# to themselves: on a 2-core machine the other workers' load stalls an answer by ticks.
#
#   bash scripts/test.sh           every test but the `slow` ones: the README's command, minutes
#   bash scripts/test.sh --slow    the `slow` ones: end-to-end runs of tens of seconds each (a
#                                  pipeline reproduced, a hundred fights, a person's fight in real
#                                  time), which CI runs after the others (.ci/run)
#   bash scripts/test.sh --all     both
#   bash scripts/test.sh --quick   the `quick` files' tests that are not `slow`: the simulator's
#                                  world and picture, the env, params, policies' files; under a
#                                  minute, a contributor's first check
#
# Further arguments go to both passes (a file, -k, -x). The second runs whatever the first found;
# the exit status is the first failure's, or pytest's "no tests collected" (5) if neither ran one.
set -uo pipefail
cd "$(dirname "$0")/.."
lane="not slow"
case "${1:-}" in
  --slow) lane="slow"; shift ;;
  --all) lane=""; shift ;;
  --quick) shift; .venv/bin/python -m pytest -m "quick and not slow" "$@"; exit ;;  # none of them is realtime
esac
with() { if [ -n "$lane" ]; then echo "($lane) and $1"; else echo "$1"; fi; }
.venv/bin/python -m pytest -m "$(with "not realtime")" "$@"
first=$?
if [ "$#" -eq 0 ]; then  # collect only the files that hold one (importing every test file costs seconds)
  mapfile -t timed < <(grep -l "pytest.mark.realtime" tests/test_*.py)
  .venv/bin/python -m pytest -n 0 -m "$(with realtime)" "${timed[@]}"
else
  .venv/bin/python -m pytest -n 0 -m "$(with realtime)" "$@"
fi
second=$?
if [ "$first" -eq 5 ] && [ "$second" -eq 5 ]; then exit 5; fi
for status in "$first" "$second"; do
  if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then exit "$status"; fi
done
exit 0
