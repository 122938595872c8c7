#!/usr/bin/env bash
# The gaming PC's install, checked from Linux: every dependency of `pip install -e .` (the
# recorder, the doctor, the env; README "Recording") and of its viewer (`.[view]`, the guide's
# first evening) must resolve to a binary wheel for 64-bit Windows on the supported Python, so
# that the README's one command installs without a compiler. uv resolves for another platform as pip cannot (pip judges environment markers by the
# machine it runs on); --only-binary refuses any package that would be built from source there.
# Prints what the gaming PC would install; fails naming the package that has no such wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
uv=".venv/bin/uv"
[ -x "$uv" ] || uv="uv"
for extra in "" view; do
  echo "pip install --only-binary=:all: -e .${extra:+[$extra]} on Windows (win_amd64), Python 3.11:"
  "$uv" pip compile pyproject.toml ${extra:+--extra "$extra"} \
    --python-platform x86_64-pc-windows-msvc --python-version 3.11 --only-binary :all: \
    --no-header --no-annotate
done
