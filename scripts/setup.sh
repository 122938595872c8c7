#!/usr/bin/env bash
# One command from a fresh Linux machine with Python 3.11 to a working elden-il:
# system packages, a virtual environment with everything installed, then the main job.
#   bash scripts/setup.sh            set up, then run the main job (dvc repro) on the simulator
#   bash scripts/setup.sh --no-run   set up only (what CI does before the tests)
set -euo pipefail
cd "$(dirname "$0")/.."

run_main_job=1
[ "${1:-}" = "--no-run" ] && run_main_job=0

# System packages: Xvfb and xdotool drive the play window and the recorder's tests headless;
# the Rerun viewer (python -m capture.view) decodes the episodes' H.264 video with FFmpeg's CLI.
need_apt=()
command -v Xvfb >/dev/null || need_apt+=(xvfb)
command -v xdotool >/dev/null || need_apt+=(xdotool)
command -v ffmpeg >/dev/null || need_apt+=(ffmpeg)
if [ ${#need_apt[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo -n"
  echo "installing system packages: ${need_apt[*]}"
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need_apt[@]}" >/dev/null \
    || echo "warning: could not install ${need_apt[*]} (needs root); the window and recorder tests will be skipped, and the Rerun viewer will show no video" >&2
fi

python=python3.11
command -v $python >/dev/null || python=python3
if [ ! -x .venv/bin/python ]; then
  $python -m venv .venv
fi
# torch first, pinned: the CPU build is on disk here, while an unpinned torch pulls GBs of CUDA.
# pip installs it, as the machine's pip config says (its wheel folders and constraints), and uv at
# the test extra's pin.
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q torch==2.13.0 uv==0.13.9
# pipeline: dvc; video: RecordVideo; the offline-RL extras too: tests/test_interop.py trains
# d3rlpy and fills a TorchRL buffer; ray: fan-out over a cluster (tests/test_fanout.py starts one);
# view: the Rerun viewer and the evaluation's recordings (tests/test_view.py reads them back).
# uv installs them, downloaded and unpacked side by side: minutes sooner than pip on a fresh machine
# (torch, already there, stays; two packages resolve otherwise than pip's: BENCHMARKS.md, the
# default pipeline's time)
.venv/bin/uv pip install -q --python .venv/bin/python -e ".[test,pipeline,video,d3rlpy,torchrl,ray,view]"
# Rerun's viewer sends usage analytics unless told not to: its documented switch, per user
.venv/bin/python -m rerun_cli analytics disable >/dev/null
# PyAV (in the dependencies above) writes each episode's video: a wheel without libx264 cannot record
.venv/bin/python -c "import av; av.codec.Codec('libx264', 'w'); av.codec.Codec('libx264rgb', 'w')"
# d3rlpy pulls in the retired gym 0.26, whose gym_notices prints a deprecation notice on every
# import, and stable-baselines3 imports gym whenever it is installed: every command would print
# it. gym_notices carries nothing but that notice (gym runs without it).
.venv/bin/python -m pip uninstall -q -y gym_notices

export DVC_NO_ANALYTICS=1 PATH="$PWD/.venv/bin:$PATH"
if [ $run_main_job -eq 1 ]; then
  # The main job: demonstrations -> dataset -> behaviour cloning -> RL fine-tuning -> evaluation,
  # all on the simulator (its time on 2 cores: BENCHMARKS.md, the default pipeline's time), then the metrics.
  dvc repro
  python -m elden_il.pipeline summary   # every metric: dvc metrics show
  # Whether this run reproduced the committed one. On another CPU behaviour cloning's floats differ
  # (its kernels sum in another order), so dvc.lock and the reports show as modified: this says
  # whether that is all (exit 0) or a result moved (exit 1, said in its line, the setup still done).
  python -m elden_il.pipeline compare || [ $? -eq 1 ]
fi
