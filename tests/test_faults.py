"""The fault matrix: every failure found by trying to break the project, kept as a test.

Each fault is tried the way a hostile or clumsy user meets it, against real components (a real
recorder process, a real tmpfs that fills up, real HDF5 and Minari files, the real command
lines), and must end in a clear one-line error that loses no data:

==============================================  ===============================================
fault                                           expected
==============================================  ===============================================
disk fills while recording (lock-step, live)    one line, exit 2, earlier episodes intact, the
                                                current one recoverable up to its last flush
recover on a full disk                          says the disk is full (not "cannot be read")
``capture.recover`` during a live recording     skips it with one line; the recording finishes
  (its lock files deleted by the user too)
Ctrl-C while recording                          finished fights kept, no fragment under a step,
                                                exit 130
Ctrl-C or SIGTERM in any stage or command      130 / 143 and one line; the last finished run's
  (one a library swallows too)                  outputs as they were; a killed run's staging
                                                folder removed by the next
rebuild of a dataset fails half-way             the old dataset is left as it was
a shared policy or dataset made to run code     nothing runs: one line (policies are data; the
                                                dataset's env spec checked before use)
a video that is not its episode's (swapped,     refused before decoding, one line naming both
  cut, re-encoded, a FIFO or a link out)        files
rows, times, fights, seeds, array lengths a     bounded before anything is allocated, one line
  file, a flag or a client asks for             naming the file or flag and the limit
bad ``params.yaml`` values                      one line naming the key and what is allowed, 2
bad command-line values                         one argparse line, exit 2, no traceback
unrecovered ``.partial`` next to episodes       the builder names it and says how to recover it
a write the simulator cannot simulate           refused with the reason; the server keeps serving
  (inf/NaN/huge game speed, position, angle)
a write outside any attribute's range           refused with the range, nothing written; the
  (a flask count of 2**31 - 1, NaN, negative)   server answers reads and frames at once
a game speed of 1e-30, then 1                   refused; the clock lives on any speed
the fastest game speed                          game time slips; calls and SIGTERM still land
a second ``env.sim`` on a port in use           refuses to start, one line, exit 2
``env.sim --host ::1``; a host not of this      serves on ``[::1]:PORT``; a bind failure names
  machine                                       its one reason
frame streams nobody reads, long or many taps   streams and taps cannot starve each other; the
                                                call over a limit is refused at once
==============================================  ===============================================

New faults go into the table of their kind (``PARAM_FAULTS``, ``CLI_FAULTS``) or get a test of
their own here.
"""

from __future__ import annotations

import json
import logging
import math
import os
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from stat import S_ISFIFO

import grpc
import h5py
import minari
import numpy as np
import pytest
import yaml
from conftest import TINY_NETWORK, main_here, save_untrained, untrained_policy
from pysiphon.generated import siphon_service_pb2 as pb2
from pysiphon.generated import siphon_service_pb2_grpc as pb2_grpc

from env.common.errors import ConfigError
from env.config import EnvConfig
from env.observations import FrameSpec
from env.sim.launcher import SimServer

from capture.build_dataset import CONTACT, BuildError, build_dataset
from capture.episode import Episode, list_episodes, read_episode
from capture.episode_writer import DiskError, EpisodeMeta, EpisodeWriter, Sample
from capture.video import codec

ROOT = Path(__file__).parents[1]


def cli(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """A project command line, run as the user runs it; from another folder (``cwd``) too, with
    this checkout's code (not whichever the environment's editable install points at)."""
    path = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    return subprocess.run(
        [sys.executable, "-m", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": path},
    )


def one_error_line(output: str) -> str:
    """The output's error lines, which must be exactly one (and no traceback)."""
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, output
    return errors[0]


def record_lock_step(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return cli("capture.record", "--backend", "sim", "--autopilot", "--no-status", "--out", str(out), *extra)


# ------------------------------------------------------------------------------- a full disk
class SmallDisk:
    """A tmpfs of a few MiB, mounted for one test: a disk that really fills up."""

    def __init__(self, path: Path, size_mib: int) -> None:
        self.path = path
        path.mkdir()
        result = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(path)], capture_output=True, text=True
        )
        if result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs ({result.stderr.strip()}): the full-disk faults need root on Linux")

    def fill(self) -> Path:
        """Take all but a few KiB of what is free, as another program's file would (an empty
        file where the recorder that stopped on this disk left even less)."""
        filler = self.path / "filler"
        filler.write_bytes(bytes(max(0, shutil.disk_usage(self.path).free - 64 * 1024)))
        return filler

    def grow(self, size_mib: int) -> None:
        """Make the disk bigger, as freeing space elsewhere on it would."""
        subprocess.run(["mount", "-o", f"remount,size={size_mib}m", str(self.path)], check=True)

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], check=True)


@pytest.fixture
def small_disk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SmallDisk]:
    """12 MiB, or as many as the test's indirect parameter says."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root on Linux (CI runs as root)")
    disk = SmallDisk(tmp_path / "disk", size_mib=getattr(request, "param", 12))
    yield disk
    disk.unmount()


def check_stopped_cleanly_and_recoverable(
    disk: SmallDisk,
    out: Path,
    result: subprocess.CompletedProcess,
) -> tuple[Episode | None, list[Path]]:
    """One line, exit 2, earlier episodes whole, no lock left; the partial is refused while the
    disk is full (saying so) and recovered once space is freed: returns it (None where the disk
    filled before the episode's first flush: it held nothing and is gone) and the earlier ones."""
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    line = one_error_line(output)
    assert "is full" in line and "earlier episode(s)" in line, line
    finished = list_episodes(out)
    for path in finished:  # every earlier episode whole
        assert read_episode(path).attrs["finished"]
    assert not list(out.glob("*.lock")), "a stopped recorder leaves no lock behind"
    partials = list(out.glob("*.h5.partial"))
    if not partials:
        assert "had no sample on disk yet and is removed" in line, line
        return None, finished
    (partial,) = partials
    assert "capture.recover" in line, line

    filler = disk.fill()
    full = cli("capture.recover", str(out))  # no room for the recovered copy: say so, touch nothing
    assert full.returncode == 2 and "is full" in one_error_line(full.stderr), full.stderr
    assert "cannot be read" not in full.stderr and partial.exists() and not list(out.glob("*.recovering"))

    filler.unlink()  # the user frees space: the other program's file, and room for the recovered copy
    disk.grow(24)
    recovered = cli("capture.recover", str(out))
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    episode = read_episode(partial.with_name(partial.name.removesuffix(".partial")))
    assert episode.attrs["recovered"]
    frames = episode.frames_at(np.arange(len(episode)), FrameSpec(episode.master_size))
    assert all(frame.any() for frame in frames), "every recovered frame has pixels"
    return episode, finished


@pytest.mark.parametrize("small_disk", [8], indirect=True)
@pytest.mark.parametrize("over", [False, True], ids=["a first build", "over an existing dataset"])
def test_a_disk_filling_up_while_a_dataset_is_built_is_one_line_and_leaves_nothing_behind(
    raw_episodes: Path, small_disk: SmallDisk, over: bool
):
    """The disk full while a dataset was written: a segmentation fault (exit 139), 24 h5py
    tracebacks and no ``error:`` line, and a ``.building-*`` folder left that kept the disk full
    (over an existing dataset the right line, then the same crash; later, with the failed write
    handled, HDF5 still crashed closing the file now and then on a loaded machine). Now one line,
    exit 2, before a byte is written: the dataset's size against the disk's free space."""
    root = small_disk.path / "minari"
    command = ("capture.build_dataset", "--raw", str(raw_episodes), "--id", "test/full-v0", "--root", str(root))
    if over:
        assert cli(*command).returncode == 0
    before = snapshot_files(root) if over else {}
    filler = small_disk.fill()
    filler.write_bytes(bytes(filler.stat().st_size + 64 * 1024 - 300 * 1024))  # 300 KiB free: too little
    result = cli(*command, "--force")
    assert result.returncode == 2, result.stderr[-3000:]
    line = one_error_line(result.stderr)
    assert line.startswith("error: the disk is full") and "test/full-v0" in line, line
    assert "nothing was written" in line and "MiB free" in line, line
    assert "Exception ignored" not in result.stderr, result.stderr[-3000:]
    assert not list(small_disk.path.rglob(".building-*"))
    assert snapshot_files(root) == before


def test_a_disk_full_before_an_episodes_first_flush_leaves_no_empty_partial(small_disk: SmallDisk):
    """A partial that holds no sample has nothing to recover; left behind, ``capture.recover``
    refused it as unreadable and the builder named it as a fight to salvage."""
    out = small_disk.path / "raw"
    writer = EpisodeWriter(
        out,
        EpisodeMeta(
            profile="sim_margit",
            attribute_names=("HeroHp",),
            key_names=("W",),
            sample_rate_hz=30.0,
            codec=codec("h264"),
            window_size=(64, 64),
            source="autopilot",
            sim_seed=0,
            host="in-process",
        ),
    )
    small_disk.fill()
    writer.append(
        Sample(
            t=0.0,
            frame_t=0.0,
            frame=np.zeros((64, 64, 3), np.uint8),
            state=np.zeros(1),
            held=np.zeros(1, bool),
            pressed=np.zeros(1, bool),
            mouse_dx=0.0,
            mouse_dy=0.0,
        )
    )
    with pytest.raises(DiskError, match="is full.*had no sample on disk yet and is removed: free some space"):
        writer.flush()
    assert not list(out.iterdir()), "no partial, no lock"


@pytest.mark.slow
def test_a_disk_filling_up_in_lock_step_stops_the_recorder_with_one_line(small_disk: SmallDisk):
    out = small_disk.path / "raw"
    result = record_lock_step(out, "--max-episodes", "1000", "--max-episode-seconds", "20")
    _, finished = check_stopped_cleanly_and_recoverable(small_disk, out, result)
    assert len(finished) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("small_disk", [2], indirect=True, ids=["2MiB"])  # some 4 episodes of 4 s at 320x180
def test_a_disk_filling_up_in_real_time_is_noticed_within_a_second(small_disk: SmallDisk, tmp_path: Path):
    out = small_disk.path / "raw"
    with SimServer(size=(320, 180), log_path=tmp_path / "server.log") as server, server.player():
        result = cli(
            "capture.record",
            "--host",
            server.host,
            "--autopilot",
            "--no-status",
            "--out",
            str(out),
            "--max-episode-seconds",
            "4",
            timeout=300,
        )
        stopped = time.monotonic()
    episode, finished = check_stopped_cleanly_and_recoverable(small_disk, out, result)
    assert len(finished) >= 1
    # the recorder's clock is the system's monotonic clock: its last flushed sample was taken at
    # most a flush interval (1 s) before it stopped; the rest is process exit and load. When the
    # disk filled at the first flush of a new episode, that episode holds nothing and the last
    # sample is the previous episode's, a fight restart (1 s) earlier still.
    last = episode if episode is not None else read_episode(finished[-1], frames=False)
    allowed = 2.5 if episode is not None else 4.0
    assert stopped - last.t[-1] < allowed, stopped - last.t[-1]


# ----------------------------------------------------------------------- recover vs a live one
def test_a_write_the_disk_refuses_stops_the_recorder_with_one_line(tmp_path: Path):
    """A write that fails for another reason than a full disk (here: a file-size limit, EFBIG,
    as a failing or quota-bound disk refuses writes) used to end in SIGSEGV at exit, after
    HDF5 tracebacks and advice to free space: HDF5 cannot close a file whose write failed.
    (A live partial flushed before the failure is recovered: the killed recorder's test.)"""

    def limit_file_size() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (400_000, 400_000))

    out = tmp_path / "raw"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "capture.record",
            "--backend",
            "sim",
            "--autopilot",
            "--no-status",
            "--out",
            str(out),
            "--max-episodes",
            "3",
            "--max-episode-seconds",
            "20",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit_file_size,
    )
    assert result.returncode == 2, result.stderr
    line = one_error_line(result.stdout + result.stderr)
    assert "File too large" in line and "free some space" not in line, line
    # lock-step, nothing was flushed before the refused write (a rerun records the same bytes):
    # no partial left half written, and the line says so
    assert "had no sample on disk yet and is removed" in line and not list(out.glob("*.partial")), line


@pytest.mark.slow
def test_recover_during_a_live_recording_leaves_it_alone(sim_server: SimServer, player: None, tmp_path: Path):
    out = tmp_path / "raw"
    recorder = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "capture.record",
            "--host",
            sim_server.host,
            "--autopilot",
            "--no-status",
            "--out",
            str(out),
            "--max-episodes",
            "1",
            "--max-episode-seconds",
            "6",
            "--no-restart",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not list(out.glob("*.h5.partial")):
            assert time.monotonic() < deadline and recorder.poll() is None, "no episode started"
            time.sleep(0.05)
        time.sleep(1.5)  # a flush or more on disk
        result = cli("capture.recover", str(out))  # the same folder, as both default to
        assert result.returncode == 0, result.stderr
        assert "being recorded right now" in result.stdout and "recovered" not in result.stdout, result.stdout
        assert list(out.glob("*.h5.partial")) and not list(out.glob("*.bak"))
        assert recorder.wait(timeout=60) == 0, recorder.stdout.read()
    finally:
        if recorder.poll() is None:
            recorder.kill()
    (path,) = list_episodes(out)
    episode = read_episode(path)
    assert not episode.attrs["recovered"] and episode.attrs["outcome"] == "timeout"
    assert 170 <= len(episode) <= 190  # 6 s at 30 Hz, whole
    assert not list(out.glob("*.partial*")) and not list(out.glob("*.lock"))


LIVE_WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from test_recording import meta, sample
    from capture.episode_writer import EpisodeWriter
    out = Path({out!r})
    w = EpisodeWriter(out, meta(), flush_every_s=0.05)
    i = 0
    while not (out / "stop").exists():           # a recording that goes on until told to stop
        w.append(sample(i))
        i += 1
        time.sleep(0.002)
        if i == 100:
            print("flushed", flush=True)
    print(w.finish("stopped", {{}}), i, flush=True)
""")


def test_two_recorders_on_one_folder_each_keep_their_own_episodes(tmp_path: Path):
    """Two recorders started into the same folder at once: each names its episodes by the time
    they start and locks its own partial files, so all four episodes are saved whole."""
    command = [sys.executable, "-m", "capture.record", "--backend", "sim", "--autopilot", "--no-status"]
    command += ["--out", str(tmp_path), "--max-episodes", "2", "--max-episode-seconds", "4"]
    both = [subprocess.Popen([*command, "--seed", str(seed)], stderr=subprocess.PIPE, text=True) for seed in (0, 50)]
    for recorder in both:
        _, err = recorder.communicate(timeout=240)
        assert recorder.returncode == 0, err
    episodes = list_episodes(tmp_path)
    assert len(episodes) == 4
    assert sorted(int(read_episode(path).attrs["sim_seed"]) for path in episodes) == [0, 1, 50, 51]


def test_deleting_lock_files_does_not_expose_a_live_recording_to_recover(tmp_path: Path):
    """A user cleaning up after a crash deletes every ``*.lock``: the recording going on must
    still be left alone by ``capture.recover`` (and by a second one at the same time), and
    finish whole."""
    script = LIVE_WRITER.format(tests=str(Path(__file__).parent), out=str(tmp_path))
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "flushed"
        (partial,) = tmp_path.glob("*.h5.partial")
        for lock in tmp_path.glob("*.lock"):
            lock.unlink()
        result = cli("capture.recover", str(tmp_path))
        assert result.returncode == 0, result.stderr
        assert "being recorded right now" in result.stdout and "recovered" not in result.stdout, result.stdout
        assert partial.exists() and not list(tmp_path.glob("*.bak")) and not list_episodes(tmp_path)
        (tmp_path / "stop").touch()
        path, appended = writer.stdout.readline().split()
        assert writer.wait(timeout=30) == 0
    finally:
        if writer.poll() is None:
            writer.kill()
    episode = read_episode(path)
    assert not episode.attrs["recovered"] and len(episode) == int(appended)  # every sample, in one file
    assert not list(tmp_path.glob("*.partial*"))


# ------------------------------------------------------------------------------ interrupted
STEP_S = 0.2  # the env's default timestep: no demonstration is shorter


def seconds(path: Path) -> float:
    t = read_episode(path, frames=False).t
    return float(t[-1] - t[0])


def wait_then_interrupt(process: subprocess.Popen, ready, timeout: float = 60) -> str:
    """Ctrl-C in the terminal running ``process`` (SIGINT to its process group) once ``ready()``;
    returns what it wrote to stderr."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()[1]
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)
    return process.communicate(timeout=60)[1]


@pytest.mark.parametrize("episode_seconds, kept", [("1", 2), ("0.1", 0)], ids=["fights", "fragments"])
def test_ctrl_c_keeps_whole_fights_only_and_says_it_was_interrupted(tmp_path: Path, episode_seconds: str, kept: int):
    """A person's Ctrl-C keeps the fights recorded (and the one in progress if it is at least a
    step long), but the exit status tells a caller the recording did not finish. Episodes cut
    shorter than one env step are no demonstrations: none is kept."""
    recorder = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "capture.record",
            "--backend",
            "sim",
            "--autopilot",
            "--no-status",
            "--out",
            str(tmp_path),
            "--max-episodes",
            "1000",
            "--max-episode-seconds",
            episode_seconds,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    started = time.monotonic()
    ready = (lambda: len(list_episodes(tmp_path)) >= kept) if kept else (lambda: time.monotonic() - started > 4)
    err = wait_then_interrupt(recorder, ready)
    assert recorder.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err.splitlines()[-1], err
    episodes = list_episodes(tmp_path)
    assert len(episodes) >= kept and all(seconds(p) >= STEP_S for p in episodes), [seconds(p) for p in episodes]
    assert not list(tmp_path.glob("*.partial*"))


class SwallowsAnInterrupt:
    """Sent Ctrl-C while Python runs its ``__del__``: the ``KeyboardInterrupt`` cannot leave it,
    so Python prints "Exception ignored" and goes on. So did a weakref's callback while the
    dataset stage imported Minari: the build finished and exited 0."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:  # the handler runs in here
            pass


def test_an_interrupt_a_library_swallows_still_stops_the_command_and_puts_nothing_in_place(tmp_path: Path, capsys):
    from env.common.cli import run_command
    from env.common.staging import staged_folder

    target = tmp_path / "out"
    target.mkdir()
    (target / "old").write_text("the last finished run's")
    went_on = []

    def work() -> None:
        with staged_folder(target) as folder:
            (folder / "new").write_text("half of this run's")
            SwallowsAnInterrupt()  # made and dropped at once: its __del__ runs here
            went_on.append(True)  # as the build went on

    assert run_command(work) == 130 and went_on
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "error: interrupted by SIGINT (Ctrl-C) before it finished: nothing half-written replaced what was there "
        "before; run it again to finish"
    ], err
    assert snapshot_files(target) == {"old": b"the last finished run's"}
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_sigterm_is_an_interrupt_with_its_own_exit_status(capsys):
    """SIGTERM used to end a command on the spot (no line, its staging left); now it stops it as
    Ctrl-C does, with the shell's 128 + 15, and the handlers found are back afterwards."""
    from env.common.cli import run_command

    found = signal.getsignal(signal.SIGTERM)

    def work() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)

    started = time.monotonic()
    assert run_command(work) == 143 and time.monotonic() - started < 4
    assert capsys.readouterr().err.startswith("error: interrupted by SIGTERM before it finished")
    assert signal.getsignal(signal.SIGTERM) == found


def test_a_command_stopped_inside_code_run_from_a_string_ends_with_its_own_status(tmp_path: Path):
    """Python code that runs a string (``exec``: every ``dataclass`` built, as torch's lazy imports
    do while a policy is made) leaves CPython's "unhandled Ctrl-C" flag set when the interrupt
    lands inside it, and ``python -m`` then ends by killing itself with SIGINT, whatever the
    command handled and returned: a SIGTERM'd stage said its line and ended as if by Ctrl-C."""
    (tmp_path / "stopped_in_exec.py").write_text(
        "import os, signal, sys\n"
        "from env.common.cli import run_command\n"
        "def work():\n"
        "    exec('import os, signal, time\\nos.kill(os.getpid(), signal.SIGTERM)\\ntime.sleep(5)')\n"
        "raise SystemExit(run_command(work))\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "stopped_in_exec"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 143, (done.returncode, done.stderr)
    assert done.stderr.startswith("error: interrupted by SIGTERM before it finished"), done.stderr


def test_a_signal_while_a_staging_folder_is_being_made_leaves_none_behind(tmp_path: Path, monkeypatch, capsys):
    """A signal that lands between the staging folder's making and its lock's (the evaluation
    stopped by SIGTERM as it began its plots) used to strand the folder with an empty marker; the
    folder is made, locked and marked as one step, and removed whatever stops the run."""
    from env.common import staging
    from env.common.cli import run_command

    taking = staging.FileLock.acquire

    def acquire_as_the_signal_lands(self, create: bool = False) -> bool:
        os.kill(os.getpid(), signal.SIGTERM)  # delivered here, at the next bytecode, unless held back
        return taking(self, create)

    monkeypatch.setattr(staging.FileLock, "acquire", acquire_as_the_signal_lands)
    target = tmp_path / "plots"
    target.mkdir()
    (target / "old.png").write_bytes(b"the last finished run's")
    built = []

    def work() -> None:
        with staging.staged_paths(target) as (folder,):
            built.append(folder)

    assert run_command(work) == 143
    assert capsys.readouterr().err.startswith("error: interrupted by SIGTERM before it finished")
    assert [p.name for p in tmp_path.iterdir()] == ["plots"], "no staging folder left"
    assert snapshot_files(target) == {"old.png": b"the last finished run's"}
    assert built == [], "the body never ran: the run stopped before it"


def test_a_signal_during_a_swap_is_delivered_once_the_swap_is_done():
    """The two renames that swap an output in must not be cut apart (the old output would be left
    aside in the staging folder, which is then removed): a signal arriving between them, taken by
    any thread of the process, is held until both are done, then delivered."""
    import threading

    from env.common import interrupts

    done = []
    # Ctrl-C as Python starts a command's process: this test worker ran other tests' libraries
    # before (Ray, SDL, torch), which may have left SIGINT's disposition or mask otherwise
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    found = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with interrupts.deferred():
                other = threading.Thread(
                    target=lambda: signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
                )
                other.start()
                other.join()
                os.kill(os.getpid(), signal.SIGINT)  # to the process: whichever thread takes it
                time.sleep(0.2)  # where the handler would have run
                done.append(True)
    finally:
        if found is not None:
            signal.signal(signal.SIGINT, found)
    assert done == [True]


class SignalOnceAdded:
    """A gRPC channel that takes Ctrl-C right after it adds a call, before the call's caller
    goes on (where gRPC starts the thread that drives its calls)."""

    def __init__(self, channel) -> None:
        self.channel, self.signalled = channel, False

    def __getattr__(self, name: str):
        return getattr(self.channel, name)

    def integrated_call(self, *args, **kwargs):
        call = self.channel.integrated_call(*args, **kwargs)
        if not self.signalled:
            self.signalled = True
            signal.raise_signal(signal.SIGINT)
        return call


@pytest.mark.parametrize("start", ["read", "tap", "capture"])
def test_a_signal_while_grpc_starts_a_call_leaves_a_client_that_closes(start: str):
    """gRPC adds a future's call to its channel and then starts the thread that finishes it: a
    signal landing between the two left a call nobody finishes, and the channel's close() waited
    for it for ever (the live evaluate stage hung in its env's close after Ctrl-C). The signal
    lands exactly there: the client is interrupted, and still closes at once."""
    import threading

    from env.siphon.client import SiphonClient

    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])  # as in the test above
    found = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with SimServer(size=(84, 84)) as server:
            client = SiphonClient(server.host)
            calls = client._channel._call_state  # grpc's own, the one place its calls are added
            calls.channel = SignalOnceAdded(calls.channel)
            with pytest.raises(KeyboardInterrupt):
                if start == "read":
                    client.read(["HeroHp", "BossHp"])
                elif start == "tap":
                    client.check_tap(client.tap_keys(["w"], hold_ms=10))
                else:
                    client.read_and_capture(["HeroHp"])
            assert calls.channel.signalled
            closing = threading.Thread(target=client.close, daemon=True)
            closing.start()
            closing.join(timeout=10)
            assert not closing.is_alive(), "the channel's close() waits for a call nobody finishes"
    finally:
        signal.signal(signal.SIGINT, found)


def snapshot_files(folder: Path, leave_out: tuple[str, ...] = ()) -> dict[str, bytes]:
    """Every file under ``folder`` by its path there, with its bytes (not those under ``leave_out``)."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not any(str(p.relative_to(folder)).startswith(out) for out in leave_out)
    }


# ------------------------------------------------------------------ every stage, interrupted
STAGES = ("demos", "dataset", "bc", "finetune", "evaluate")
GAME_SPEED = ("gameSpeedFlag", "gameSpeedVal")


def interrupted(process: subprocess.Popen, signum: int, timeout: float) -> str:
    """Stop ``process`` as a terminal's Ctrl-C does (SIGINT to its whole process group) or as
    ``kill`` does (SIGTERM to it alone), and return its stderr once it has ended. One that has
    not ended within ``timeout`` fails the test with every thread's stack, as faulthandler dumps
    them on SIGABRT (``stage_process`` turns it on): where it hung, not only that it did."""
    if signum == signal.SIGINT:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    try:
        return process.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        stacks = process.communicate(timeout=60)[1]
        pytest.fail(f"still running {timeout:g} s after {signal.Signals(signum).name}; its threads:\n{stacks}")


def stage_process(project: Path, stage: str, params: str = "params.yaml") -> subprocess.Popen:
    """``python -m elden_il.pipeline STAGE`` in ``project``, as DVC runs it (a process group of its own)."""
    return subprocess.Popen(
        [sys.executable, "-m", "elden_il.pipeline", stage, "--params", params],
        cwd=project,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONFAULTHANDLER": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@pytest.fixture(scope="module")
def reproduced_stages(tmp_path_factory) -> Path:
    """A project folder where every stage of the tiny pipeline has run once, in order."""
    from test_pipeline import TINY as TINY_PIPELINE  # this file's TINY is params.yaml as it is

    project = tmp_path_factory.mktemp("stages")
    (project / "params.yaml").write_text(
        yaml.safe_dump(
            {
                **TINY_PIPELINE,
                "demos": {**TINY_PIPELINE["demos"], "record": {**TINY_PIPELINE["demos"]["record"], "max_episodes": 3}},
            }
        )
    )
    for stage in STAGES:
        process = stage_process(project, stage)
        _, err = process.communicate(timeout=600)
        assert process.returncode == 0, (stage, err)
    return project


LONGER = {
    "demos": {"demos": {"record": {"max_episodes": 40}}},
    "bc": {"bc": {"epochs": 500, "patience": 500}},
    "finetune": {"finetune": {"total_steps": 50_000}},
    "evaluate": {"evaluate": {"fights": 200}},
}
"""Each stage's params made to run long enough to be interrupted mid-way (a rerun with them
would write other outputs: an interrupted one must write none)."""
OUTPUTS = {
    "demos": ("datasets/demos", ()),
    "dataset": ("datasets/minari", ()),
    "bc": (
        "datasets",
        (
            "demos",
            "minari",
            "models/finetuned",
            "reports/live/finetune",
            "reports/eval",
            "reports/gifs",
            "reports/plots",
            "reports/recordings",
        ),
    ),
    "finetune": (
        "datasets",
        (
            "demos",
            "minari",
            "models/bc",
            "reports/live/bc",
            "reports/eval",
            "reports/gifs",
            "reports/plots",
            "reports/recordings",
        ),
    ),
    "evaluate": ("datasets/reports", ("live",)),
}
"""Where each stage writes (and what there is no output of its own): the training stages their
policy, their curves (DVCLive's) and their report."""
MID_WAY = {
    "demos": lambda p: any(p.glob("datasets/demos/.building-sim-*/sim/*.h5")),
    "dataset": lambda p: any(p.glob("datasets/minari/.building-*")),
    "bc": lambda p: any(p.glob("datasets/models/.building-bc-*")),
    "finetune": lambda p: any(p.glob("datasets/models/.building-finetuned-*")),
    "evaluate": lambda p: any(p.glob("datasets/reports/.building-gifs-*")),
}
"""When each stage is part way through writing its output."""


SEVERAL_ENVS = {("finetune", signal.SIGINT): {"finetune": {"num_envs": 2}}}
"""Ctrl-C reaches fine-tuning from two envs at once (an actor each, as a lab's gaming PCs play:
the first on the stage's own thread, where the signal lands, the other beside it); SIGTERM
one env's."""


def longer_params(project: Path, stage: str, signum: int | None = None) -> str:
    params = yaml.safe_load((project / "params.yaml").read_text())
    for changes in (LONGER.get(stage, {}), SEVERAL_ENVS.get((stage, signum), {})):
        for section, values in changes.items():
            params[section].update(values)
    (project / "longer.yaml").write_text(yaml.safe_dump(params))
    return "longer.yaml"


@pytest.mark.slow
@pytest.mark.parametrize(
    "stage, signum",
    [
        *((stage, signal.SIGINT) for stage in STAGES),
        *((stage, signal.SIGTERM) for stage in ("bc", "finetune", "evaluate")),
    ],
    ids=[*(f"{stage}-SIGINT" for stage in STAGES), "bc-SIGTERM", "finetune-SIGTERM", "evaluate-SIGTERM"],
)
def test_every_stage_interrupted_says_so_in_one_line_and_leaves_its_output_as_it_was(
    reproduced_stages: Path, stage: str, signum: int
):
    """Ctrl-C (SIGINT to the stage's process group, as a terminal sends it) or SIGTERM (as a
    scheduler or ``kill`` sends it) part way through each stage: exit 130 or 143, one line, no
    traceback (fine-tuning printed 84 lines with 2 tracebacks; the evaluation exited 1 with one
    and left new GIFs beside the old eval.json, the old recordings deleted), and the output of
    the last finished run byte for byte as it was, its training curves too (they were written in
    place: cut to the epochs run so far, or deleted with the metrics left {}), with no staging
    folder left."""
    project = reproduced_stages
    folder, leave_out = OUTPUTS[stage]
    before = snapshot_files(project / folder, leave_out)
    process = stage_process(project, stage, longer_params(project, stage, signum))
    deadline = time.monotonic() + 300
    while not MID_WAY[stage](project):
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()[1]
        time.sleep(0.01)
    err = interrupted(process, signum, timeout=120)
    assert process.returncode == 128 + signum, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    line = one_error_line(err)
    name = signal.Signals(signum).name
    if stage == "demos":  # how many of how many, so the user knows why DVC recorded nothing as done
        assert line.startswith(f"error: the demos stage was interrupted by {name} with "), line
        assert "of the 40 episodes" in line and "as it was before" in line and "dvc repro" in line, line
    else:
        assert line.startswith(f"error: interrupted by {name}"), line
    assert snapshot_files(project / folder, leave_out) == before
    assert not list((project / "datasets").rglob(".building-*"))


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stage_stopped_while_it_plays_a_live_game_at_3x_hands_the_game_back(reproduced_stages: Path, signum: int):
    """The evaluate stage against a live game at 3x (``evaluate.backend: siphon``), stopped by
    Ctrl-C or SIGTERM while it plays: the game left paused before (gameSpeedVal 0 after every
    such run, even one that ended well); now back at real time, the stage's one line said."""
    project = reproduced_stages
    window = EnvConfig.load(project / "datasets/models/bc").picture_size  # the window the policies were trained on
    with SimServer(seed=0, size=window) as server:
        params = yaml.safe_load((project / "params.yaml").read_text())
        params["evaluate"].update(backend="siphon", host=server.host, game_speed=3, fights=50)
        (project / "live.yaml").write_text(yaml.safe_dump(params))
        process = stage_process(project, "evaluate", "live.yaml")
        with grpc.insecure_channel(server.host) as channel:
            stub = pb2_grpc.SiphonServiceStub(channel)

            def speed() -> tuple[bool, float]:
                read = [stub.GetAttribute(pb2.GetSiphonRequest(attributeName=n), timeout=5) for n in GAME_SPEED]
                return read[0].bool_value, read[1].float_value

            deadline = time.monotonic() + 120
            while speed() != (True, 0.0):  # the env has paused it between steps: it plays
                assert time.monotonic() < deadline and process.poll() is None, process.communicate()[1]
                time.sleep(0.05)
            err = interrupted(process, signum, timeout=60)
            assert process.returncode == 128 + signum, err
            assert one_error_line(err).startswith(f"error: interrupted by {signal.Signals(signum).name}"), err
            flag, value = speed()
        assert not flag or value == 1.0, (flag, value)


@pytest.mark.slow
def test_a_disk_filling_up_while_fine_tuning_saves_is_one_line_and_keeps_the_last_run(reproduced_stages: Path):
    """The models' disk full as fine-tuning saves its policy: one line saying so (a SafetensorError
    traceback before, its curves deleted and its metrics left {}); the last run's policy, curves
    and report as they were."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root on Linux (CI runs as root)")
    project = reproduced_stages
    models = project / "datasets/models"
    kept = project / "models-kept"
    shutil.copytree(models, kept)
    shutil.rmtree(models)
    disk = SmallDisk(models, size_mib=4)
    try:
        shutil.copytree(kept, models, dirs_exist_ok=True)
        before = snapshot_files(project / "datasets", ("demos", "minari"))
        disk.fill()
        process = stage_process(project, "finetune")
        err = process.communicate(timeout=600)[1]
        assert process.returncode == 2, err
        line = one_error_line(err)
        assert line.startswith("error: the disk is full") and "nothing half-written replaced" in line, line
        (models / "filler").unlink()
        assert snapshot_files(project / "datasets", ("demos", "minari")) == before
    finally:
        disk.unmount()
        shutil.rmtree(models, ignore_errors=True)
        shutil.move(kept, models)


@pytest.mark.slow
def test_a_killed_stage_leaves_its_output_and_the_next_run_removes_its_staging_folder(reproduced_stages: Path):
    """SIGKILL lets nothing clean up: the policy folder being built stays behind (8-19 MB a
    build, which no later run removed), the old policy as it was. The next run removes it."""
    project = reproduced_stages
    before = snapshot_files(project / "datasets/models/bc")
    process = stage_process(project, "bc", longer_params(project, "bc"))
    deadline = time.monotonic() + 300
    while not MID_WAY["bc"](project):
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()[1]
        time.sleep(0.01)
    process.kill()
    process.communicate(timeout=60)
    assert list((project / "datasets/models").glob(".building-bc-*")), "SIGKILL leaves the staging folder"
    assert snapshot_files(project / "datasets/models/bc") == before
    rerun = stage_process(project, "bc")
    _, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    assert not list((project / "datasets/models").glob(".building-*"))
    assert snapshot_files(project / "datasets/models/bc") == before  # the same params: the same bytes


@pytest.mark.parametrize(
    "command, signum",
    [
        ("capture.build_dataset", signal.SIGINT),
        ("capture.build_dataset", signal.SIGTERM),
        ("elden_il.duel", signal.SIGINT),
    ],
    ids=["build_dataset-SIGINT", "build_dataset-SIGTERM", "duel-SIGINT"],
)
def test_a_command_interrupted_exits_128_plus_the_signal_with_one_line(
    raw_episodes: Path, tmp_path: Path, command: str, signum: int
):
    """The commands beside the recorder (which keeps its fights: above): the dataset builder part
    way through writing (the old dataset stays: ``test_every_stage_interrupted...``) and a long
    duel, each stopped by a real signal."""
    root = tmp_path / "minari"
    args = {
        "capture.build_dataset": ["--raw", str(raw_episodes), "--id", "test/stopped-v0", "--root", str(root)],
        "elden_il.duel": ["--policy", "random", "--fights", "500", "--quiet"],
    }[command]
    process = subprocess.Popen(
        [sys.executable, "-m", command, *args],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    started = time.monotonic()
    ready = {
        "capture.build_dataset": lambda: any(root.glob(".building-*")),
        "elden_il.duel": lambda: time.monotonic() - started > 3,
    }[command]
    deadline = started + 120
    while not ready():
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()[1]
        time.sleep(0.01)
    err = interrupted(process, signum, timeout=60)
    assert process.returncode == 128 + signum, err
    assert one_error_line(err).startswith(f"error: interrupted by {signal.Signals(signum).name}"), err
    assert not (root / "test/stopped-v0").exists() and not list(root.glob(".building-*"))


def children(pid: int) -> list[int]:
    """The processes ``pid`` started that are still running."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended while we looked
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow
def test_an_interrupted_evaluate_stage_stops_its_worker_processes_and_fails_in_one_line(tmp_path: Path):
    """Ctrl-C while the evaluate stage's fights play in processes of their own: the stage stops
    at once with them, in one line and exit 130 (with a pool that let its workers finish their
    queue, the stage went on playing first)."""
    from test_pipeline import TINY

    for name in ("bc", "finetuned"):
        policy_folder(tmp_path / "datasets/models" / name)
    (tmp_path / "params.yaml").write_text(
        yaml.safe_dump({**TINY, "evaluate": {**TINY["evaluate"], "fights": 400, "workers": 2}})
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    stage = subprocess.Popen(
        [sys.executable, "-m", "elden_il.pipeline", "evaluate"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    started = {}

    def workers_playing() -> bool:
        workers = [p for p in children(stage.pid) if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
        if len(workers) == 2:
            started.setdefault("at", time.monotonic())
            started["workers"] = workers
        return "at" in started and time.monotonic() - started["at"] > 3  # past their start, into the fights

    err = wait_then_interrupt(stage, workers_playing, timeout=120)
    assert stage.returncode == 130, err
    line = err.strip().splitlines()[-1]
    assert "Traceback" not in err and line.startswith("error: interrupted by SIGINT"), err
    assert all_ended(started["workers"], timeout=5)


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def all_ended(pids: list[int], timeout: float) -> bool:
    """Whether every one of ``pids`` has ended (or is a zombie) within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(running(p) for p in pids)


def test_a_simulator_server_ends_with_the_process_that_started_it_however_it_ends():
    """A script that started servers (``SimServer``) and was killed (SIGKILL, or SIGTERM without
    the CLI's handling) left them serving on 127.0.0.1 for ever: one killed evaluation left 48.
    The server watches the pipe its starter holds, which the kernel closes at any death."""
    starter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from env.sim.launcher import SimServer\n"
            "server = SimServer(size=(84, 84)); print(server.process.pid, flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    server = int(starter.stdout.readline())
    try:
        assert running(server)
        starter.kill()
        starter.wait(timeout=10)
        assert all_ended([server], timeout=15), "the server outlived the process that started it"
    finally:
        starter.kill()
        if running(server):
            os.kill(server, signal.SIGKILL)


# ------------------------------------------------------------------------------ atomic rebuild
@pytest.fixture(scope="module")
def raw_episodes(tmp_path_factory) -> Path:
    raw = tmp_path_factory.mktemp("raw")
    result = record_lock_step(raw, "--max-episodes", "2", "--max-episode-seconds", "4")
    assert result.returncode == 0, result.stderr
    return raw


def test_building_a_dataset_warns_of_nothing_a_user_cannot_act_on(raw_episodes: Path, tmp_path: Path):
    """Minari warned three times per build (no author email, no eval env, no env spec) on every
    ``dvc repro``: the dataset names its env spec for collection and evaluation, and a contact,
    now (none filtered out: the warnings are all on)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = build_dataset(raw_episodes, "test/quiet-v0", EnvConfig(), root=tmp_path / "minari", force=True)
    assert [str(w.message) for w in caught] == []
    assert dataset.storage.metadata["eval_env_spec"] == dataset.storage.metadata["env_spec"]
    assert dataset.storage.metadata["author_email"] == {CONTACT}


def dataset_state(root: Path, dataset_id: str) -> tuple[int, str]:
    return minari.MinariDataset(root / dataset_id / "data").total_episodes, (
        root / dataset_id / "build.json"
    ).read_text()


def test_a_failed_rebuild_leaves_the_old_dataset(raw_episodes: Path, tmp_path: Path):
    root = tmp_path / "minari"
    build_dataset(raw_episodes, "test/atomic-v0", root=root)
    before = dataset_state(root, "test/atomic-v0")
    raw = tmp_path / "raw"
    raw.mkdir()
    for path in list_episodes(raw_episodes):
        (raw / path.name).write_bytes(path.read_bytes())
    (raw / "zzz_human.h5").write_bytes(b"not an episode")  # read last: the rebuild fails late
    result = cli("capture.build_dataset", "--raw", str(raw), "--id", "test/atomic-v0", "--root", str(root), "--force")
    assert result.returncode == 2 and "zzz_human.h5 is not a readable episode" in one_error_line(result.stderr)
    assert dataset_state(root, "test/atomic-v0") == before
    assert not [p for p in root.iterdir() if p.name.startswith(".building")]


def test_a_rebuild_failing_while_minari_writes_leaves_the_old_dataset(raw_episodes: Path, tmp_path: Path, monkeypatch):
    from minari.dataset._storages.hdf5_storage import HDF5Storage

    root = tmp_path / "minari"
    build_dataset(raw_episodes, "test/atomic-v0", root=root)
    before = dataset_state(root, "test/atomic-v0")
    original = HDF5Storage.update_episodes

    def disk_full_halfway(self, episodes):
        original(self, episodes[:1])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(HDF5Storage, "update_episodes", disk_full_halfway)
    with pytest.raises(
        BuildError, match="No space left on device.*previous dataset with this id, if any, is unchanged"
    ):
        build_dataset(raw_episodes, "test/atomic-v0", root=root, force=True)
    monkeypatch.undo()
    assert dataset_state(root, "test/atomic-v0") == before
    assert not [p for p in root.iterdir() if p.name.startswith(".building")]
    rebuilt = build_dataset(raw_episodes, "test/atomic-v0", root=root, force=True)  # and a good rebuild replaces it
    assert rebuilt.total_episodes == 2 and dataset_state(root, "test/atomic-v0")[0] == 2


DAMAGES = {
    "metadata cut short": ("metadata.json", lambda text: text[:100]),
    "metadata empty": ("metadata.json", lambda text: "{}"),
    "metadata missing a key": (
        "metadata.json",
        lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "dataset_id"}),
    ),
    "elden_il metadata not JSON": (
        "metadata.json",
        lambda text: json.dumps({**json.loads(text), "elden_il": "{not json"}),
    ),
    "data file cut short": ("main_data.hdf5", lambda data: data[:5000]),
    "data file overwritten": ("main_data.hdf5", lambda data: b"x" * len(data)),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_dataset_is_one_clear_error(raw_episodes: Path, tmp_path: Path, damage: str):
    from elden_il.data import DatasetError, load_demonstrations

    build_dataset(raw_episodes, "test/damaged-v0", root=tmp_path / "minari")
    name, spoil = DAMAGES[damage]
    path = tmp_path / "minari/test/damaged-v0/data" / name
    if name.endswith(".json"):
        path.write_text(spoil(path.read_text()))
    else:
        path.write_bytes(spoil(path.read_bytes()))
    with pytest.raises(
        DatasetError, match="test/damaged-v0.*(Build it with|rebuild it with) `python -m capture.build_dataset"
    ):
        load_demonstrations("test/damaged-v0", tmp_path / "minari")


@pytest.mark.parametrize(
    "member, message",
    [
        ("episode_1", "main_data.hdf5, episode_1 is missing: rebuild it with `python -m capture.build_dataset"),
        (
            "episode_0/actions",
            "main_data.hdf5, episode_0 lacks actions: rebuild it with `python -m capture.build_dataset",
        ),
    ],
)
def test_a_dataset_missing_an_episode_or_part_of_one_is_one_line_naming_it(
    raw_episodes: Path, tmp_path: Path, member: str, message: str
):
    from elden_il.data import DatasetError, load_demonstrations

    build_dataset(raw_episodes, "test/damaged-v0", root=tmp_path / "minari")
    with h5py.File(tmp_path / "minari/test/damaged-v0/data/main_data.hdf5", "r+") as f:
        del f[member]
    with pytest.raises(DatasetError, match=f"test/damaged-v0': in .*{message}.*dvc repro dataset"):
        load_demonstrations("test/damaged-v0", tmp_path / "minari")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"backend": "siphon", "host": "203.0.113.9:50051"}, "passes the env backend, host, which no env config holds"),
        ({"backend": "sim_server"}, "passes the env backend, which no env config holds"),
        ({"profile": "/somewhere/else/a_profile"}, "names the profile '/somewhere/else/a_profile', not one of this"),
        ({"max_steps": -5}, "describes no env config this project makes"),
    ],
    ids=["a host to connect to", "a server to start", "a profile folder elsewhere", "a bad value"],
)
def test_a_dataset_whose_env_spec_chooses_the_game_is_refused(
    raw_episodes: Path, tmp_path: Path, kwargs: dict, message: str
):
    """``check_env_spec`` checked the entry point, not its arguments: a shared dataset whose spec
    passed ``backend: siphon, host: ...`` made ``recover_environment()`` connect to that host and
    configure it, ``sim_server`` spawned a server, and a profile folder loaded whatever it holds.
    A dataset says which env it was built for, never which game to reach: refused in one line."""
    from elden_il.data import DatasetError, check_env_spec, open_dataset

    root = tmp_path / "minari"
    build_dataset(raw_episodes, "test/shared-v0", root=root)
    with_spec_arguments(root, "test/shared-v0", kwargs)
    with pytest.raises(DatasetError) as refused:
        check_env_spec(open_dataset("test/shared-v0", root))
    line = str(refused.value)
    assert "\n" not in line and message in line and "never which game to reach" in line, line


def with_spec_arguments(root: Path, dataset_id: str, kwargs: dict) -> None:
    """The dataset's env spec given ``kwargs`` besides its env config, as a shared copy may be."""
    path = root / dataset_id / "data/metadata.json"
    metadata = json.loads(path.read_text())
    spec = json.loads(metadata["env_spec"])
    spec["kwargs"].update(kwargs)
    metadata["env_spec"] = json.dumps(spec)
    path.write_text(json.dumps(metadata))


@pytest.mark.parametrize("backend", ["siphon", "sim_server"])
def test_recover_environment_on_a_dataset_whose_env_spec_chooses_the_game_connects_nowhere(
    raw_episodes: Path, tmp_path: Path, backend: str
):
    """minari's own ``recover_environment()`` on a shared dataset whose env spec named ``backend:
    siphon`` and a host connected to that host and configured it (``check_env_spec`` refuses it,
    but the description the builder wrote said only "recover_environment() makes that env"). The
    spec's entry point is the project's own: it now makes the env a dataset describes, in-process,
    and refuses a backend, a host or a server's flags in one line, before anything is made; the
    description names ``check_env_spec`` for a dataset from anyone else."""
    from elden_il.data import open_dataset

    root = tmp_path / "minari"
    dataset = build_dataset(raw_episodes, "test/shared-v0", root=root)
    assert "check_env_spec" in dataset.storage.metadata["description"]
    recovered = open_dataset("test/shared-v0", root).recover_environment()  # as built: the env, in-process
    recovered.close()
    with SimServer(size=(84, 84), log_path=tmp_path / "server.log") as server:
        with_spec_arguments(root, "test/shared-v0", {"backend": backend, "host": server.host})
        with pytest.raises(ConfigError) as refused:
            open_dataset("test/shared-v0", root).recover_environment()
        with grpc.insecure_channel(server.host) as channel:
            status = pb2_grpc.SiphonServiceStub(channel).GetServerStatus(pb2.GetServerStatusRequest(), timeout=5)
    line = str(refused.value)
    assert "\n" not in line and f"backend {backend!r}" in line and "never which game to reach" in line, line
    assert not status.config_set  # nobody connected and configured it


@pytest.mark.parametrize("where", ["entry_point", "additional_wrappers"])
def test_a_dataset_whose_env_spec_names_other_code_is_refused_before_anything_is_made(
    raw_episodes: Path, tmp_path: Path, where: str
):
    """The guide's ``dataset.recover_environment()`` on a shared dataset built whatever its env
    spec named: ``os:system`` with a command ran it. ``check_env_spec``, which the recipe calls
    first, refuses any entry point or wrapper but the project's own, in one line."""
    from elden_il.data import DatasetError, check_env_spec, open_dataset

    root = tmp_path / "minari"
    check_env_spec(build_dataset(raw_episodes, "test/shared-v0", root=root))  # the project's own: fine
    marker = tmp_path / "payload-ran"
    path = root / "test/shared-v0/data/metadata.json"
    metadata = json.loads(path.read_text())
    spec = json.loads(metadata["env_spec"])
    command = {"entry_point": "os:system", "kwargs": {"command": f"touch {shlex.quote(str(marker))}"}}
    if where == "entry_point":
        spec.update(command)
    else:
        spec["additional_wrappers"] = [{"name": "x", "entry_point": "os:system", "kwargs": command["kwargs"]}]
    metadata["env_spec"] = json.dumps(spec)
    path.write_text(json.dumps(metadata))
    dataset = open_dataset("test/shared-v0", root)
    with pytest.raises(DatasetError) as refused:
        check_env_spec(dataset)
    line = str(refused.value)
    assert "\n" not in line and "'os:system'" in line and "recover_environment() would import and run that" in line
    assert not marker.exists()
    with pytest.raises(Exception):  # noqa: B017 - what it makes is no env
        dataset.recover_environment()
    assert marker.exists() == (where == "entry_point"), "the spec is live: only the check kept it from running"


def test_a_bug_while_loading_a_dataset_keeps_its_own_error(tmp_path: Path):
    """Only a missing or damaged dataset becomes a DatasetError; a caller's bug (an id that is no
    string) is not dressed up as one."""
    from elden_il.data import open_dataset

    with pytest.raises(TypeError):
        open_dataset(123, tmp_path)


# ------------------------------------------------------------------ bad samples in an episode
def copy_raw(raw_episodes: Path, tmp_path: Path) -> Path:
    raw = tmp_path / "raw"
    raw.mkdir()
    for path in list_episodes(raw_episodes):
        for file in (path, path.with_suffix(".mkv")):
            (raw / file.name).write_bytes(file.read_bytes())
    return raw


def spoil_state(path: Path, rows: slice, attribute: str = "HeroHp", value: float = math.nan) -> None:
    """Write ``value`` into ``attribute`` at ``rows`` of a finished episode, as a failed memory read would."""
    with h5py.File(path, "r+") as f:
        column = json.loads(f.attrs["attribute_names"]).index(attribute)
        state = f["state"][()]
        state[rows, column] = value
        f["state"][...] = state


def damage_video(video: Path, damage: str) -> None:
    """Spoil an episode's video as a disk, a copy or a person can."""
    from capture.footage import count_frames, keep_first

    data = video.read_bytes()
    if damage == "truncated":  # a copy cut short
        video.write_bytes(data[: len(data) // 2])
    elif damage == "corrupt":  # bytes flipped in the middle
        video.write_bytes(
            data[: len(data) // 2]
            + bytes(b ^ 0x5A for b in data[len(data) // 2 : len(data) // 2 + 2000])
            + data[len(data) // 2 + 2000 :]
        )
    elif damage == "another length":  # a whole video, but not of this episode's samples
        shorter = video.with_name("shorter.mkv")
        keep_first(video, shorter, count_frames(video) - 10)
        shorter.replace(video)
    elif damage == "missing":
        video.unlink()
    else:
        video.write_bytes(b"not a video at all")


SHORT = "samples, and frame i is sample i"
VIDEO_DAMAGES = {  # what the line may say: damage the demuxer skips over leaves the video short of frames
    "truncated": (SHORT, "breaks off into unreadable data"),
    "corrupt": (SHORT, "breaks off into unreadable data"),
    "another length": (SHORT,),
    "missing": ("is missing",),
    "junk": ("is not a readable video",),
}


@pytest.mark.parametrize("damage", VIDEO_DAMAGES)
def test_a_damaged_video_is_one_line_naming_it_and_nothing_is_lost(raw_episodes: Path, tmp_path: Path, damage: str):
    raw = copy_raw(raw_episodes, tmp_path)
    video = list_episodes(raw)[-1].with_suffix(".mkv")
    damage_video(video, damage)
    before = {p.name: p.read_bytes() for p in raw.iterdir()}
    result = cli(
        "capture.build_dataset", "--raw", str(raw), "--id", "test/video-v0", "--root", str(tmp_path / "minari")
    )
    line = one_error_line(result.stderr)
    assert result.returncode == 2 and not (tmp_path / "minari/test/video-v0").exists()
    assert video.name in line and any(said in line for said in VIDEO_DAMAGES[damage]), line
    assert "move" in line or "put" in line, line  # what to do
    assert {p.name: p.read_bytes() for p in raw.iterdir()} == before, "nothing recorded is touched"


def swap_videos(first: Path, second: Path) -> None:
    """Swap the videos of two episodes by name, as a person tidying files may."""
    a, b = first.with_suffix(".mkv"), second.with_suffix(".mkv")
    spare = a.with_name("spare.mkv")
    a.rename(spare)
    b.rename(a)
    spare.rename(b)


def reencode(video: Path, size: tuple[int, int]) -> None:
    """The video decoded and encoded again at ``size``, every frame, its metadata kept (as
    ``ffmpeg -i x.mkv -s 64x64 y.mkv`` does)."""
    import av

    from capture.footage import decoded

    frames = list(decoded(video))
    with av.open(str(video)) as old:
        metadata = dict(old.metadata)
    with av.open(str(video), "w", format="matroska") as out:
        out.metadata.update(metadata)
        stream = out.add_stream("libx264", options={"preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = *size, "yuv420p"
        for i, rgb in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(width=size[0], height=size[1])
            frame.pts = i
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)


def not_its_video(raw: Path, case: str, tmp_path: Path) -> tuple[Path, Path]:
    """Spoil the folder ``raw`` of two same-length episodes as ``case`` says; (the episode, the
    video beside it that is not its own)."""
    from capture.footage import count_frames, keep_first

    first, second = list_episodes(raw)
    if case == "swapped names":  # two 4 s timeouts: the same length, each the other's picture
        assert len(read_episode(first, frames=False)) == len(read_episode(second, frames=False))
        swap_videos(first, second)
    elif case == "cut to its length":  # a longer fight's video, cut to this episode's frame count
        longer = tmp_path / "longer"
        assert (
            record_lock_step(longer, "--max-episodes", "1", "--max-episode-seconds", "6", "--seed", "7").returncode == 0
        )
        (longer_video,) = longer.glob("*.mkv")
        n = count_frames(first.with_suffix(".mkv"))
        assert count_frames(longer_video) > n
        keep_first(longer_video, first.with_suffix(".mkv"), n)
    elif case == "re-encoded smaller":  # every frame there, at 64x64 while the episode says 256x256
        reencode(first.with_suffix(".mkv"), (64, 64))
    elif case == "a FIFO":
        first.with_suffix(".mkv").unlink()
        os.mkfifo(first.with_suffix(".mkv"))
    elif case == "a link out of the folder":
        outside = tmp_path / "elsewhere.mkv"
        first.with_suffix(".mkv").rename(outside)
        first.with_suffix(".mkv").symlink_to(outside)
    elif case == "a device":
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        import stat

        first.with_suffix(".mkv").unlink()
        os.mknod(first.with_suffix(".mkv"), stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero's
    return first, first.with_suffix(".mkv")


NOT_ITS_VIDEO = {
    "swapped names": "recording id",
    "cut to its length": "recording id",
    "re-encoded smaller": "it is 64x64, the episode was captured at 256x256",
    "a FIFO": "a FIFO",
    "a link out of the folder": "a symbolic link out of its folder",
    "a device": "a device",
}


@pytest.mark.parametrize("case", NOT_ITS_VIDEO)
def test_a_video_that_is_not_its_episodes_is_refused_by_the_builder_and_the_viewer_naming_both(
    raw_episodes: Path, tmp_path: Path, case: str
):
    """The frame count was the only check: two same-length recordings with their videos swapped
    built (18 of 26 steps the other fight's frames), a video cut to another episode's length too
    (354 of 363), one re-encoded at 64x64 was scaled back up in silence, and a FIFO hung the
    build. Now the recording's id (in the episode and the video's metadata), the capture size
    and the file itself are checked first: one line naming both files, nothing touched."""
    raw = copy_raw(raw_episodes, tmp_path)
    episode, video = not_its_video(raw, case, tmp_path)
    before = {p.name: (p.read_bytes() if p.is_file() and not p.is_symlink() else None) for p in raw.iterdir()}
    built = cli("capture.build_dataset", "--raw", str(raw), "--id", "test/video-v0", "--root", str(tmp_path / "minari"))
    viewed = cli("elden_il.view", str(episode), "--save", str(tmp_path / "fight.rrd"))
    for result in (built, viewed):
        line = one_error_line(result.stderr)
        assert result.returncode == 2, result.stderr
        assert str(video) in line and NOT_ITS_VIDEO[case] in line, line
        assert case in ("a FIFO", "a link out of the folder", "a device") or str(episode) in line, line
    assert not (tmp_path / "minari/test/video-v0").exists() and not (tmp_path / "fight.rrd").exists()
    assert {p.name: (p.read_bytes() if p.is_file() and not p.is_symlink() else None) for p in raw.iterdir()} == before


def test_an_episode_recorded_before_the_recording_id_is_checked_by_what_it_carries(raw_episodes: Path, tmp_path: Path):
    """Episodes from before ``video_id`` (format 2 as first written) still build; their video is
    checked by its frame count and its size, which they carry."""
    raw = copy_raw(raw_episodes, tmp_path)
    for path in list_episodes(raw):
        with h5py.File(path, "r+") as f:
            del f.attrs["video_id"]
    assert build_dataset(raw, "test/older-v0", root=tmp_path / "minari").total_episodes == 2
    reencode(list_episodes(raw)[0].with_suffix(".mkv"), (64, 64))
    with pytest.raises(BuildError, match="it is 64x64, the episode was captured at 256x256"):
        build_dataset(raw, "test/older-v0", root=tmp_path / "minari", force=True)


def test_recover_refuses_a_partial_episodes_video_of_another_recording_naming_both(tmp_path: Path):
    """Two recordings a crash left unfinished, their videos' names swapped: each would have been
    recovered with the other's picture."""
    from test_recording import meta, sample

    out = tmp_path / "raw"
    partials = []
    for name in ("20200101-000000-000000", "20200101-000100-000000"):
        writer = EpisodeWriter(tmp_path / "live", meta(), name=None, lock_step=True)
        for i in range(40):
            writer.append(sample(i))
        writer.flush()
        writer._video.close()  # the video whole, the episode left partial: as a kill after a flush
        out.mkdir(exist_ok=True)
        target = out / f"{name}_human.h5.partial"
        target.write_bytes(writer.path.read_bytes())
        target.with_name(f"{name}_human.mkv.partial").write_bytes(writer.video_path.read_bytes())
        writer.discard()
        partials.append(target)
    first, second = (p.with_name(p.name.replace(".h5.", ".mkv.")) for p in partials)
    spare = first.with_name("spare")
    first.rename(spare)
    second.rename(first)
    spare.rename(second)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    result = cli("capture.recover", str(out))
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 2 and "Traceback" not in result.stderr, result.stderr
    for partial, line in zip(partials, errors):
        video = partial.with_name(partial.name.replace(".h5.", ".mkv."))
        assert str(partial) in line and str(video) in line and "recording id" in line, line
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_codec_the_ffmpeg_build_lacks_is_one_line_before_anything_is_recorded(tmp_path: Path, monkeypatch):
    from capture.record import RecordSettings, record
    from capture.video import CODECS, VideoCodec, VideoError

    monkeypatch.setitem(CODECS, "h266", VideoCodec("h266", "libvvenc", "yuv420p", (), False, "H.266"))
    with pytest.raises(VideoError) as refused:
        record(RecordSettings(backend="sim", autopilot=True, max_episodes=1, out=tmp_path / "raw", video_codec="h266"))
    line = str(refused.value)
    assert "\n" not in line and "video codec 'h266' needs FFmpeg's libvvenc encoder, which the installed PyAV" in line
    assert "--video-codec (h264, lossless)" in line
    assert not list((tmp_path / "raw").iterdir())


def test_a_short_run_of_nan_state_is_held_over_and_named(raw_episodes: Path, tmp_path: Path, caplog):
    raw = copy_raw(raw_episodes, tmp_path)
    spoiled = list_episodes(raw)[0]
    spoil_state(spoiled, slice(40, 50))
    with caplog.at_level(logging.WARNING, logger="capture.build_dataset"):
        dataset = build_dataset(raw, "test/nan-v0", root=tmp_path / "minari")
    for episode in dataset.iterate_episodes():
        assert all(np.isfinite(np.asarray(v)).all() for k, v in episode.observations.items() if k != "frame")
        assert np.isfinite(episode.rewards).all()
    (line,) = [r.getMessage() for r in caplog.records if "finite" in r.getMessage()]
    assert (
        f"{spoiled.name}: HeroHp not a finite number at samples 40-49" in line and "held the last finite value" in line
    )

    floors = cli("capture.floors", str(raw))
    assert floors.returncode == 0, floors.stderr
    recommended = [
        float(line.split("=")[1].split("#")[0]) for line in floors.stdout.splitlines() if "_floor = " in line
    ]
    assert all(0 < floor < 1 for floor in recommended), floors.stdout


def spoil_times(name: str, rows: slice | int, value):
    def spoil(f: h5py.File) -> None:
        data = f[name][()]
        if name == "events":
            data["t"][rows] = value(data["t"])
        else:
            data[rows] = value(data)
        f[name][...] = data

    return spoil


def reshaped(f: h5py.File, name: str, columns: int, **options) -> None:
    """``name`` replaced by a dataset of as many rows and ``columns`` columns, never written."""
    rows, dtype = f[name].shape[0], f[name].dtype
    del f[name]
    f.create_dataset(name, (rows, columns), dtype, chunks=(16, min(columns, 4096)), **options)


EPISODE_SPOILS = {
    # what an 862 KB file could ask for: (how, what the one line says)
    "10^11 sample times": (
        lambda f: f["t"].resize(10**11, axis=0),
        "its t declares 100000000000 rows, more than any recording holds (10000000 at most)",
    ),
    "3x10^8 mouse rows": (lambda f: f["mouse"].resize(3 * 10**8, axis=0), "its mouse declares 300000000 rows"),
    "state rows never written": (
        lambda f: f["state"].resize(f["state"].shape[0] + 5000, axis=0),
        "its state declares",
    ),
    "a NaN sample time": (spoil_times("t", 50, lambda t: math.nan), "its sample times (t) hold no number at row 50"),
    "a sample time in the past": (
        spoil_times("t", 60, lambda t: t[10]),
        "its sample times (t) run backwards at row 60",
    ),
    "a sample time days away": (spoil_times("t", -1, lambda t: t[-1] + 1e7), "its sample times (t) span 1e+07 s"),
    "a NaN input event time": (spoil_times("events", 0, lambda t: math.nan), "its input events' times hold no number"),
    "keys_held with no rows": (lambda f: f["keys_held"].resize(0, axis=0), "its keys_held has 0 rows"),
    "pad_held of 32 columns": (lambda f: reshaped(f, "pad_held", 32), "its pad_held is ("),
    "pad_held of 2 columns": (lambda f: reshaped(f, "pad_held", 2), "its pad_held is ("),
    "a compressed state of 10^7 columns": (
        lambda f: reshaped(f, "state", 10**7, compression="gzip"),
        ", 10000000), where the format holds (rows, ",
    ),
    "a compressed state of 100,000 columns": (
        lambda f: reshaped(f, "state", 100_000, compression="gzip"),
        ", 100000), where the format holds (rows, ",
    ),
}


@pytest.mark.parametrize("spoil", EPISODE_SPOILS)
def test_an_episode_asking_for_impossible_rows_or_times_is_one_line_before_anything_is_allocated(
    raw_episodes: Path, tmp_path: Path, spoil: str
):
    """10^11 rows declared: a 745 GiB allocation traceback; 3x10^8 mouse rows: built, using
    3.5 GB; one NaN or far-off sample time: a traceback; the controller's buttons in 32 columns:
    built, then the viewer's IndexError (2 columns: the builder's); a compressed state of 10^7
    columns (check_rows skipped compressed data): 227 GiB allocation tracebacks, 100,000 columns
    built at 2.8 GB; keys_held of no rows: skipped by the builder, the viewer's ``IndexError``.
    Now the builder and the viewer refuse the file in one line naming it, its dataset and the
    limit, in seconds."""
    raw = copy_raw(raw_episodes, tmp_path)
    episode = list_episodes(raw)[-1]
    how, said = EPISODE_SPOILS[spoil]
    with h5py.File(episode, "r+") as f:
        how(f)
    for command in (
        ("capture.build_dataset", "--raw", str(raw), "--id", "test/bounds-v0", "--root", str(tmp_path / "minari")),
        ("elden_il.view", str(episode), "--save", str(tmp_path / "fight.rrd")),
    ):
        started = time.monotonic()
        result = cli(*command, timeout=60)
        assert result.returncode == 2 and time.monotonic() - started < 30, result.stderr
        line = one_error_line(result.stderr)
        assert str(episode) in line and said in line, line


def test_an_hdf5_file_of_another_program_among_the_recordings_is_one_line_that_says_so(
    raw_episodes: Path, tmp_path: Path
):
    """An HDF5 file another program wrote, named ``*.h5``, in the recordings folder: the builder
    and the viewer called it "unfinished: run `python -m capture.recover`", which then said it
    was "not a partial episode": advice in a circle. Now both say it is no episode of this
    project's and to move it out; the builder builds nothing."""
    raw = copy_raw(raw_episodes, tmp_path)
    foreign = raw / "measurements.h5"
    with h5py.File(foreign, "w") as f:
        f["x"] = np.arange(10)
    for command in (
        ("capture.build_dataset", "--raw", str(raw), "--id", "test/foreign-v0", "--root", str(tmp_path / "minari")),
        ("elden_il.view", str(foreign), "--save", str(tmp_path / "fight.rrd")),
    ):
        result = cli(*command, timeout=60)
        line = one_error_line(result.stderr)
        assert result.returncode == 2 and f"{foreign} is an HDF5 file but no episode" in line, line
        assert "move it out of the recordings folder" in line and "capture.recover" not in line, line
    assert not (tmp_path / "minari/test/foreign-v0").exists() and foreign.exists()


def test_an_unfinished_episode_named_as_a_finished_one_gets_advice_that_works(tmp_path: Path):
    """A partial episode renamed by hand to ``.h5`` (and its video to ``.mkv``): the advice was
    to run ``capture.recover`` on the ``.h5``, which refuses anything but a ``.h5.partial``. Now
    the line says to rename both back and recover; done as it says, the episode is recovered."""
    from test_recording import meta, sample

    writer = EpisodeWriter(tmp_path / "raw", meta(), lock_step=True)
    for i in range(40):
        writer.append(sample(i))
    writer.flush()
    writer._video.close()
    writer._abandon()  # as a kill after a flush leaves it
    renamed = writer.path.with_name(writer.path.name.removesuffix(".partial"))
    writer.path.rename(renamed)
    writer.video_path.rename(renamed.with_suffix(".mkv"))
    result = cli("elden_il.view", str(renamed), "--save", str(tmp_path / "fight.rrd"), timeout=60)
    line = one_error_line(result.stderr)
    assert result.returncode == 2 and f"{renamed} is an unfinished episode named as a finished one" in line, line
    renamed.rename(writer.path)  # as the line says
    renamed.with_suffix(".mkv").rename(writer.video_path)
    assert f"rename it to {writer.path.name} and its video to {writer.video_path.name}" in line, line
    assert f"python -m capture.recover {writer.path}" in line, line
    result = cli("capture.recover", str(writer.path), timeout=60)
    assert result.returncode == 0, result.stderr
    assert len(read_episode(renamed)) == 40


def test_recover_refuses_a_partial_declaring_rows_it_never_held(tmp_path: Path):
    from test_recording import meta, sample

    writer = EpisodeWriter(tmp_path / "raw", meta(), lock_step=True)
    for i in range(40):
        writer.append(sample(i))
    writer.flush()
    writer._abandon()  # as a kill after a flush leaves it
    with h5py.File(writer.path, "r+", locking=False) as f:
        f["t"].resize(10**11, axis=0)
    result = cli("capture.recover", str(tmp_path / "raw"), timeout=60)
    line = one_error_line(result.stderr)
    assert result.returncode == 2 and "cannot be recovered" in line and "declares 100000000000 rows" in line, line
    assert writer.path.exists() and not list_episodes(tmp_path / "raw")


@pytest.mark.parametrize("what", ["a folder holding files", "a FIFO"])
def test_a_recording_saved_over_something_not_a_file_is_one_line_and_leaves_it(
    raw_episodes: Path, tmp_path: Path, what: str
):
    """``elden_il.view EPISODE --save keep.rrd`` where keep.rrd is a folder of other files: exit 0,
    and the folder with its files was gone (replaced whole, as an output is); a FIFO was replaced
    too. Now one line, and what was there stays."""
    pytest.importorskip("rerun")
    episode = list_episodes(raw_episodes)[0]
    target = tmp_path / "keep.rrd"
    if what == "a FIFO":
        os.mkfifo(target)
    else:
        target.mkdir()
        (target / "notes.txt").write_text("mine")
    result = cli("elden_il.view", str(episode), "--save", str(target), timeout=120)
    line = one_error_line(result.stderr)
    assert result.returncode == 2 and "a recording replaces a file" in line, line
    assert (target / "notes.txt").read_text() == "mine" if what != "a FIFO" else S_ISFIFO(target.stat().st_mode)


def test_sb3s_zip_is_written_where_it_says_and_a_folder_takes_it(tmp_path: Path, caplog):
    """``sb3_zip export bc EXISTING_DIR`` wrote ``EXISTING_DIR.zip`` and told the user to call
    ``PPO.load('EXISTING_DIR')``, which fails. A folder now takes the zip inside it, a name
    without ``.zip`` gets it, and the line names the file written."""
    from elden_il.policies.sb3_zip import export_sb3

    folder = policy_folder(tmp_path / "bc")
    (tmp_path / "out").mkdir()
    with caplog.at_level(logging.INFO, logger="elden_il.policies.sb3_zip"):
        export_sb3(folder, tmp_path / "out")
        export_sb3(folder, tmp_path / "plain")
    assert (tmp_path / "out/bc_ppo.zip").is_file() and (tmp_path / "plain.zip").is_file()
    said = " ".join(r.getMessage() for r in caplog.records)
    assert f"PPO.load('{tmp_path / 'out/bc_ppo.zip'}')" in said and f"PPO.load('{tmp_path / 'plain.zip'}')" in said


def test_recover_refuses_a_partial_of_a_compressed_state_gigabytes_wide_and_leaves_nothing_behind(tmp_path: Path):
    """A partial whose state is a compressed (N, 10^7): recover's 227 GiB allocation traceback left
    its ``.recovering`` copy behind. Now one line; the partial untouched, nothing beside it."""
    from test_recording import meta, sample

    writer = EpisodeWriter(tmp_path / "raw", meta(), lock_step=True)
    for i in range(40):
        writer.append(sample(i))
    writer.flush()
    writer._abandon()  # as a kill after a flush leaves it
    with h5py.File(writer.path, "r+", locking=False) as f:
        reshaped(f, "state", 10**7, compression="gzip")
    result = cli("capture.recover", str(tmp_path / "raw"), timeout=60)
    line = one_error_line(result.stderr)
    assert result.returncode == 2 and "cannot be recovered" in line and "10000000), where the format holds" in line, (
        line
    )
    assert sorted(p.name for p in (tmp_path / "raw").iterdir() if p.suffix != ".mkv" and ".mkv." not in p.name) == [
        writer.path.name
    ]


def test_an_episode_whose_controller_columns_hold_no_rows_reads_them_as_a_pad_at_rest(
    raw_episodes: Path, tmp_path: Path
):
    """The controller's columns cut to 0 rows (as a tear past them leaves them, recovered): an
    IndexError in the builder before. They read as absent, a pad at rest, as format 2's files do."""
    raw = copy_raw(raw_episodes, tmp_path)
    episode = list_episodes(raw)[-1]
    with h5py.File(episode, "r+") as f:
        for name in ("pad_held", "pad_pressed", "pad_axes"):
            f[name].resize(0, axis=0)
    read = read_episode(episode, frames=False)
    assert read.pad_held.shape == (len(read), read.pad_held.shape[1]) and not read.pad_held.any()
    built = cli("capture.build_dataset", "--raw", str(raw), "--id", "test/rest-v0", "--root", str(tmp_path / "minari"))
    assert built.returncode == 0, built.stderr


@pytest.mark.parametrize("rows, why", [(slice(0, 3), "from the first sample"), (slice(20, 80), "for 2.0 s")])
def test_nan_state_that_cannot_be_held_over_is_one_line_naming_the_file_and_samples(
    raw_episodes: Path,
    tmp_path: Path,
    rows: slice,
    why: str,
):
    raw = copy_raw(raw_episodes, tmp_path)
    spoiled = list_episodes(raw)[-1]
    spoil_state(spoiled, rows, "NpcHp", math.inf)
    result = cli("capture.build_dataset", "--raw", str(raw), "--id", "test/nan-v0", "--root", str(tmp_path / "minari"))
    line = one_error_line(result.stderr)
    assert result.returncode == 2 and not (tmp_path / "minari/test/nan-v0").exists()
    assert f"{spoiled.name}: NpcHp not a finite number at samples {rows.start}-{rows.stop - 1} ({why}" in line, line
    assert "Record the fight again, or move the file out of the folder" in line


def test_an_episode_with_fewer_state_rows_than_times_keeps_the_samples_it_has(
    raw_episodes: Path, tmp_path: Path, caplog
):
    raw = copy_raw(raw_episodes, tmp_path)
    cut = list_episodes(raw)[0]
    with h5py.File(cut, "r+") as f:
        n = len(f["t"])
        f["state"].resize(n - 30, axis=0)
    with caplog.at_level(logging.WARNING, logger="capture.build_dataset"):
        dataset = build_dataset(raw, "test/cut-v0", root=tmp_path / "minari")
    (line,) = [r.getMessage() for r in caplog.records if "differ in length" in r.getMessage()]
    assert cut.name in line and f"t {n}" in line and f"state {n - 30}" in line, line
    assert dataset.total_episodes == 2


@pytest.mark.parametrize("command", ["capture.build_dataset", "capture.record"])
def test_a_timestep_of_zero_is_one_line(tmp_path: Path, capsys, command: str):
    raw = ["--raw", str(tmp_path)] if command == "capture.build_dataset" else []
    status, _, err = main_here(command, "--timestep-ms", "0", *raw, capsys=capsys)
    assert status == 2
    assert "argument --timestep-ms: '0' must be a number of milliseconds above 0" in one_error_line(err)


# ------------------------------------------------------------------------------ saved policies
POLICY_CONFIG = EnvConfig(profile="sim_margit", action_history=4, max_steps=20)


def policy_folder(folder: Path, config: EnvConfig = POLICY_CONFIG, saved_for: EnvConfig = POLICY_CONFIG) -> Path:
    """An untrained policy for ``saved_for``'s spaces in ``folder``, with ``config`` as its env_config.json."""
    return save_untrained(folder, config, saved_for)


def edit_description(folder: Path, change) -> None:
    path = folder / "policy.json"
    description = json.loads(path.read_text())
    change(description)
    path.write_text(json.dumps(description))


def cartpole_spaces(description: dict) -> None:
    import gymnasium as gym

    from elden_il.policies.policy_json import space_to_json

    cartpole = gym.make("CartPole-v1")
    description["observation_space"] = space_to_json(cartpole.observation_space)
    description["action_space"] = space_to_json(cartpole.action_space)


def other_weights(folder: Path) -> None:
    """The weights of a wider network than the folder's description says."""
    from dataclasses import replace

    from env.profile import load_profile

    from elden_il.policies.policy import make_policy, save_policy

    wider = make_policy(*POLICY_CONFIG.spaces(load_profile("sim_margit")), replace(TINY_NETWORK, cnn_dim=64))
    save_policy(wider, POLICY_CONFIG, folder / "wider")
    (folder / "wider" / "policy.safetensors").replace(folder / "policy.safetensors")
    shutil.rmtree(folder / "wider")


def only_the_config(folder: Path) -> None:
    for name in ("policy.safetensors", "policy.json"):
        (folder / name).unlink()


def sb3_zip(folder: Path) -> None:
    """The folder as policies were saved before they were data: SB3's zip, a pickle."""
    only_the_config(folder)
    untrained_policy(POLICY_CONFIG).save(str(folder / "policy.zip"))


def rewrite_weights(folder: Path, change) -> None:
    """The folder's weights, each tensor passed through ``change``, saved back."""
    from safetensors.torch import load_file, save_file

    path = folder / "policy.safetensors"
    tensors = load_file(str(path))
    save_file({name: change(name, t) for name, t in tensors.items()}, str(path))


def first_made(value: float):
    """A change that puts ``value`` in the first element of the first tensor."""

    def change(name: str, tensor):
        if name == "action_net.bias":
            tensor = tensor.clone()
            tensor[0] = value
        return tensor

    return change


def replaced_by(name: str, what: str):
    """Spoil a folder by making its file ``name`` a FIFO, a link to /dev/zero or a folder."""

    def spoil(folder: Path) -> None:
        path = folder / name
        path.unlink()
        if what == "fifo":
            os.mkfifo(path)
        elif what == "zero":
            path.symlink_to("/dev/zero")
        else:
            path.mkdir()

    return spoil


def latin1_config(folder: Path) -> None:
    path = folder / "env_config.json"
    path.write_bytes(path.read_bytes().replace(b'"sim_margit"', b'"sim_margit", "note": "\xe9t\xe9"'))


def profile_with_a_fifo(folder: Path) -> None:
    """A profile folder beside the policy folder (one for the evaluation's two), its config
    naming it, its siphon config a FIFO."""
    profile = folder.parent / "profile"
    if not profile.exists():
        shutil.copytree(ROOT / "env/profiles/sim_margit", profile)
        (profile / "siphon.toml").unlink()
        os.mkfifo(profile / "siphon.toml")
    POLICY_CONFIG.replace(profile=str(profile)).save(folder)


SIZE_64 = POLICY_CONFIG.replace(frame_size=(64, 64))
BAD_POLICIES = {
    # name: (how to spoil a good policy folder, the one line's expected text)
    "garbage weights": (
        lambda d: (d / "policy.safetensors").write_bytes(os.urandom(4096)),
        "does not hold this policy's weights",
    ),
    "empty weights": (lambda d: (d / "policy.safetensors").write_bytes(b""), "does not hold this policy's weights"),
    "weights of another network": (other_weights, "does not hold this policy's weights"),
    "a description that is not JSON": (
        lambda d: (d / "policy.json").write_text("{not json"),
        "is not a policy's description",
    ),
    "a description naming a class to import": (
        lambda d: edit_description(d, lambda x: x.update(policy_class="os:system")),
        "is not a policy's description (keys",
    ),
    "an ensemble of a billion networks": (
        lambda d: edit_description(d, lambda x: x.update(members=10**9)),
        "an ensemble of 1000000000 networks: an ensemble holds 2 to 64",
    ),
    "an ensemble's description, one network's weights": (
        lambda d: edit_description(d, lambda x: x.update(members=2)),
        "does not hold this policy's weights",
    ),
    "a network a billion wide": (
        lambda d: edit_description(d, lambda x: x["network"].update(cnn_dim=10**9)),
        "network cnn_dim = 1000000000 is no size this network takes",
    ),
    "a CartPole policy's spaces": (
        lambda d: edit_description(d, cartpole_spaces),
        "was saved for other spaces than its env_config.json",
    ),
    "84x84 config, 64x64 policy": (
        lambda d: policy_folder(d, POLICY_CONFIG, SIZE_64),
        "observation frame: Box(0, 255, (3, 64, 64), uint8) vs Box(0, 255, (3, 84, 84), uint8)",
    ),
    "64x64 config, 84x84 policy": (
        lambda d: policy_folder(d, SIZE_64, POLICY_CONFIG),
        "observation frame: Box(0, 255, (3, 84, 84), uint8) vs Box(0, 255, (3, 64, 64), uint8)",
    ),
    "env_config.json without the policy": (only_the_config, "is incomplete"),
    "an env config naming no profile": (lambda d: POLICY_CONFIG.replace(profile=None).save(d), "names no profile"),
    "an SB3 zip (a pickle)": (sb3_zip, "is a policy in SB3's zip format, a pickle"),
    "env_config.json a FIFO": (replaced_by("env_config.json", "fifo"), "env_config.json is a FIFO"),
    "env_config.json a link to /dev/zero": (replaced_by("env_config.json", "zero"), "env_config.json is a device"),
    "env_config.json a folder": (replaced_by("env_config.json", "folder"), "env_config.json is a folder"),
    "env_config.json with a latin-1 byte": (latin1_config, "env_config.json is not UTF-8 text: byte 0xe9 on line"),
    "a profile folder whose siphon config is a FIFO": (profile_with_a_fifo, "siphon.toml is a FIFO"),
    "the weights a FIFO": (replaced_by("policy.safetensors", "fifo"), "policy.safetensors is a FIFO"),
    "the weights a link to /dev/zero": (replaced_by("policy.safetensors", "zero"), "policy.safetensors is a device"),
    "the description a folder": (replaced_by("policy.json", "folder"), "policy.json is a folder"),
    "hidden layers 16384 wide": (
        lambda d: edit_description(d, lambda x: x["network"].update(hidden=[16384, 16384])),
        "weights (1 network), more than any policy of this project",
    ),
    "hidden layers 16384 wide, 64 members": (
        lambda d: edit_description(d, lambda x: (x["network"].update(hidden=[16384, 16384]), x.update(members=64))),
        "weights (64 networks), more than any policy of this project",
    ),
    "1024 channels of 1x1 kernels": (
        lambda d: edit_description(
            d,
            lambda x: x["network"].update(
                cnn_channels=[1024] * 3, cnn_kernels=[1] * 3, cnn_strides=[1] * 3, cnn_dim=16384
            ),
        ),
        "more than any policy of this project",
    ),
    "a description nested 200,000 deep": (
        lambda d: (d / "policy.json").write_text("[" * 200_000 + "]" * 200_000),
        "policy.json is JSON nested deeper than any file of its kind",
    ),
    "a 5,000-digit number": (
        lambda d: (d / "policy.json").write_text('{"format": ' + "9" * 5000 + "}"),
        "policy.json holds a number no file of its kind holds",
    ),
    "NaN weights": (lambda d: rewrite_weights(d, first_made(float("nan"))), "holds weights that are not numbers"),
    "infinite weights": (lambda d: rewrite_weights(d, first_made(float("inf"))), "holds weights that are not numbers"),
    "float64 weights": (lambda d: rewrite_weights(d, lambda _, t: t.double()), "tensors of dtype F64"),
    "int64 weights": (lambda d: rewrite_weights(d, lambda _, t: t.long()), "tensors of dtype I64"),
    "bool weights": (lambda d: rewrite_weights(d, lambda _, t: t.bool()), "tensors of dtype BOOL"),
}


def test_a_policy_is_saved_only_with_the_profile_it_plays_on(tmp_path: Path):
    """``EnvConfig()`` names no profile (the backend picks its own): a policy saved with it could
    not be loaded, since its keys and spaces depend on the profile, so it is refused when saved."""
    from env.common.errors import ConfigError

    from elden_il.policies.policy import save_policy

    with pytest.raises(ConfigError, match="names no profile"):
        save_policy(untrained_policy(POLICY_CONFIG), POLICY_CONFIG.replace(profile=None), tmp_path / "policy")
    assert not (tmp_path / "policy").exists()


@pytest.fixture(scope="module")
def bad_policies(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("policies")
    for i, (spoil, _) in enumerate(BAD_POLICIES.values()):
        spoil(policy_folder(root / str(i)))
    return root


@pytest.mark.parametrize("bad", BAD_POLICIES)
def test_a_bad_policy_is_one_line_when_recording_with_it(bad_policies: Path, tmp_path: Path, capsys, bad: str):
    folder = bad_policies / str(list(BAD_POLICIES).index(bad))
    argv = ["--backend", "sim", "--policy", str(folder), "--scripted-human", "--no-status", "--max-episodes", "1"]
    status, _, err = main_here("elden_il.pilot", *argv, "--out", str(tmp_path / "raw"), capsys=capsys)
    assert status == 2
    assert BAD_POLICIES[bad][1] in one_error_line(err)
    assert not list((tmp_path / "raw").glob("*.h5"))


@pytest.mark.parametrize("bad", BAD_POLICIES)
def test_a_bad_policy_is_one_line_in_the_viewer(
    bad_policies: Path, raw_episodes: Path, tmp_path: Path, capsys, bad: str
):
    folder = bad_policies / str(list(BAD_POLICIES).index(bad))
    episode = str(list_episodes(raw_episodes)[0])
    status, _, err = main_here(
        "elden_il.view", episode, "--policy", str(folder), "--save", str(tmp_path / "x.rrd"), capsys=capsys
    )
    assert status == 2
    assert BAD_POLICIES[bad][1] in one_error_line(err)
    assert not (tmp_path / "x.rrd").exists()


@pytest.mark.parametrize("bad", BAD_POLICIES)
def test_a_bad_policy_is_one_line_in_the_evaluate_stage(tmp_path: Path, monkeypatch, capsys, bad: str):
    for name in ("bc", "finetuned"):  # made in place: a copy would read a FIFO, or /dev/zero without end
        BAD_POLICIES[bad][0](policy_folder(tmp_path / "datasets/models" / name))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(TINY))
    monkeypatch.chdir(tmp_path)
    status, _, err = main_here("elden_il.pipeline", "evaluate", capsys=capsys)
    assert status == 2
    assert BAD_POLICIES[bad][1] in one_error_line(err)


@pytest.mark.parametrize(
    "bad",
    [
        "env_config.json a link to /dev/zero",
        "hidden layers 16384 wide",
        "hidden layers 16384 wide, 64 members",
        "1024 channels of 1x1 kernels",
        "a description nested 200,000 deep",
    ],
)
def test_a_policy_folder_asking_for_gigabytes_is_refused_before_they_are_allocated(tmp_path: Path, bad: str):
    """Refused before anything the file asks for is made: before, 2.56 GB were allocated for the
    wide layers ahead of the refusal, 4.7 GB with 64 members, 2.7 GB read from /dev/zero, and
    473 GB asked for the 1x1 kernels. A process loading each stays at what torch takes itself."""
    BAD_POLICIES[bad][0](policy_folder(tmp_path / "policy"))
    code = (
        "import resource, sys\n"
        "from elden_il.policies.policy import load_policy\n"
        "from env.common.errors import EldenILError\n"
        "try:\n"
        f"    load_policy({str(tmp_path / 'policy')!r})\n"
        "except EldenILError as e:\n"
        "    print(e)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    message, peak_kib = result.stdout.strip().splitlines()
    assert BAD_POLICIES[bad][1] in message, result.stdout + result.stderr
    assert int(peak_kib) < 1_000_000, f"{int(peak_kib) / 1024:.0f} MiB at its peak"


@pytest.mark.slow
def test_a_fine_tuned_policy_records(tmp_path: Path):
    """The pipeline's fine-tuned policy, several runs acting as one, plays in the recorder, loaded
    as the evaluation loads it."""
    from elden_il.params import FinetuneConfig
    from elden_il.training.finetune import finetune

    policy_folder(tmp_path / "bc")
    two_runs = FinetuneConfig(total_steps=32, num_envs=1, n_steps=32, batch_size=32, n_epochs=1, runs=2)
    finetune(tmp_path / "bc", two_runs, POLICY_CONFIG, tmp_path / "finetuned")
    result = cli(
        "elden_il.pilot",
        "--backend",
        "sim",
        "--policy",
        str(tmp_path / "finetuned"),
        "--scripted-human",
        "--no-status",
        "--max-episodes",
        "1",
        "--max-episode-seconds",
        "2",
        "--out",
        str(tmp_path / "raw"),
    )
    assert result.returncode == 0, result.stderr
    (episode,) = list_episodes(tmp_path / "raw")
    assert read_episode(episode, frames=False).attrs["source"] == "policy"


class RunsACommand:
    """Unpickled, it runs a shell command: what a shared pickle can hold."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def pickled_policies(root: Path, marker: Path) -> dict[str, Path]:
    """Policy folders, each with an env_config.json and a ``policy.zip`` made to create
    ``marker`` when read: SB3's algorithm zip (the fine-tuned kind: ``PPO.load`` unpickles its
    ``data`` member's objects with cloudpickle) and SB3's policy-only zip (the BC kind: a
    ``torch.save`` archive, read with ``torch.load(weights_only=False)``)."""
    import base64
    import pickle

    import torch

    payload = RunsACommand(f"touch {shlex.quote(str(marker))}")
    algorithm, policy_only = root / "algorithm", root / "policy_only"
    for folder in (algorithm, policy_only):
        POLICY_CONFIG.save(folder)
    data = {
        "policy_class": {
            ":type:": "<class 'abc.ABCMeta'>",
            ":serialized:": base64.b64encode(pickle.dumps(payload)).decode(),
        }
    }
    with zipfile.ZipFile(algorithm / "policy.zip", "w") as archive:
        archive.writestr("data", json.dumps(data))
        archive.writestr("_stable_baselines3_version", "2.9.2")
    torch.save(payload, policy_only / "policy.zip")
    return {"algorithm": algorithm, "policy-only": policy_only}


@pytest.mark.parametrize("kind", ["algorithm", "policy-only"])
def test_a_policy_made_to_run_a_command_runs_nothing_in_any_command_that_loads_policies(
    raw_episodes: Path, tmp_path: Path, monkeypatch, capsys, kind: str
):
    """A shared policy's pickle ran its maker's command, then handed back the real object, so
    every command ended normally: load_policy, the viewer, the recorder, the evaluate stage (once
    per policy) and the finetune stage (twice). Now a policy folder is read as data only: each
    command says in one line what the zip is and how to convert one you trust, and the command
    is never run. Read by the one function named for trusting it, the same file does run it."""
    from env.common.errors import EldenILError

    from elden_il.policies.policy import load_policy
    from elden_il.policies.sb3_zip import read_sb3_zip_trusting_its_code

    marker = tmp_path / "payload-ran"
    folder = pickled_policies(tmp_path / "policies", marker)[kind]
    with pytest.raises(EldenILError) as refused:
        load_policy(folder)
    assert "a pickle" in str(refused.value) and "--trust-pickle" in str(refused.value)

    project = tmp_path / "project"
    for name in ("bc", "finetuned"):
        shutil.copytree(folder, project / "datasets/models" / name)
    (project / "params.yaml").write_text(yaml.safe_dump(TINY))
    monkeypatch.chdir(project)
    episode = list_episodes(raw_episodes)[0]
    commands = [
        ("elden_il.view", str(episode), "--policy", str(folder), "--save", str(tmp_path / "x.rrd")),
        (
            "elden_il.pilot",
            "--backend",
            "sim",
            "--policy",
            str(folder),
            "--scripted-human",
            "--no-status",
            "--max-episodes",
            "1",
            "--out",
            str(tmp_path / "raw"),
        ),
        ("elden_il.pipeline", "evaluate"),
        ("elden_il.pipeline", "finetune"),
        ("elden_il.policies.sb3_zip", "export", str(folder), str(tmp_path / "exported.zip")),
        ("elden_il.policies.sb3_zip", "convert", str(folder)),  # without --trust-pickle
    ]
    for command in commands:
        status, _, err = main_here(*command, capsys=capsys)
        assert status == 2, (command, err)
        assert "pickle" in one_error_line(err), (command, err)
        assert not marker.exists(), command
    assert not (tmp_path / "raw").exists() or not list((tmp_path / "raw").glob("*.h5"))

    with pytest.raises(Exception):  # noqa: B017 - the payload hands back no policy
        read_sb3_zip_trusting_its_code(folder / "policy.zip")
    assert marker.exists(), "the payload is live: only load_policy's refusal kept it from running"


def test_an_old_policy_folder_converts_once_with_trust_and_then_loads_as_data(tmp_path: Path, capsys):
    """Folders saved before policies were data (SB3's zip and env_config.json) are converted by
    one command, in place, keeping their other files; the converted policy acts as the zip did."""
    import torch

    from elden_il.policies.policy import load_policy

    folder = tmp_path / "bc"
    POLICY_CONFIG.save(folder)
    torch.manual_seed(0)
    old = untrained_policy(POLICY_CONFIG)
    old.save(str(folder / "policy.zip"))
    (folder / "history.json").write_text("[]")
    status, out, err = main_here("elden_il.policies.sb3_zip", "convert", str(folder), "--trust-pickle", capsys=capsys)
    assert status == 0, err
    assert sorted(p.name for p in folder.iterdir()) == [
        "env_config.json",
        "history.json",
        "policy.json",
        "policy.safetensors",
    ]
    loaded = load_policy(folder, device="cpu").policy
    assert all(torch.equal(a, b) for a, b in zip(old.state_dict().values(), loaded.state_dict().values()))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".building")]


def test_behaviour_cloning_stopped_half_way_leaves_the_old_policy_folder_whole(raw_episodes: Path, tmp_path: Path):
    """Ctrl-C during training (here: in the first epoch's callback, before any checkpoint) leaves
    no env_config.json without its policy: the old folder as it was, and no staging left."""
    from elden_il.data import demonstrations
    from elden_il.params import BCConfig
    from elden_il.training.bc import train_bc

    demos = demonstrations(build_dataset(raw_episodes, "test/bc-v0", root=tmp_path / "minari"))
    out = tmp_path / "models/bc"

    def ctrl_c(record: dict) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_bc(demos, BCConfig(epochs=1, batch_size=64), out, on_epoch=ctrl_c, size=TINY_NETWORK)
    assert not out.exists() and list((tmp_path / "models").iterdir()) == []
    train_bc(demos, BCConfig(epochs=1, batch_size=64), out, size=TINY_NETWORK)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(KeyboardInterrupt):
        train_bc(demos, BCConfig(epochs=2, batch_size=64, seed=1), out, on_epoch=ctrl_c, size=TINY_NETWORK)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["bc"]


# ---------------------------------------------------------------------------- profile files
def edited_profile(tmp_path: Path, old: str, new: str, encoding: str = "utf-8", prefix: bytes = b"") -> Path:
    """A copy of the simulator's profile with ``old`` replaced in profile.toml, saved as a text editor would."""
    from env.profile import PROFILES_DIR

    folder = tmp_path / "profile"
    shutil.copytree(PROFILES_DIR / "sim_margit", folder)
    toml = folder / "profile.toml"
    text = toml.read_text()
    assert old in text
    toml.write_bytes(prefix + text.replace(old, new).encode(encoding))
    return folder


@pytest.mark.parametrize(
    "old, new, encoding, message",
    [
        (
            "boss = [1000, 7000",
            'boss = [1000, "slam"',
            "utf-8",
            "profile.toml, line 64: animations.boss holds 'slam', not an animation id: write the game's number (NpcAnimId)",
        ),
        (
            'boss_name = "Margit, the Fell Omen"',
            'boss_name = "Margit, l\'Omen Déchu"',
            "latin-1",
            "profile.toml is not UTF-8 text: byte 0xe9 on line 5 (the file was saved in another encoding, such as "
            'Windows Notepad\'s "ANSI"): save it as UTF-8',
        ),
    ],
    ids=["a text animation id", "latin-1 (Notepad's ANSI)"],
)
def test_a_profile_a_text_editor_spoiled_is_one_line_naming_the_file_and_line(
    tmp_path: Path, old, new, encoding, message
):
    folder = edited_profile(tmp_path, old, new, encoding)
    result = cli(
        "capture.record",
        "--backend",
        "sim",
        "--autopilot",
        "--no-status",
        "--profile",
        str(folder),
        "--max-episodes",
        "1",
        "--out",
        str(tmp_path / "raw"),
    )
    assert result.returncode == 2
    assert f"{folder / message}" in one_error_line(result.stderr)


def test_a_profile_saved_with_a_utf8_bom_loads(tmp_path: Path):
    """Windows Notepad's "UTF-8 with BOM" is UTF-8: read as it was meant."""
    from env.profile import load_profile

    folder = edited_profile(tmp_path, "name =", "name =", prefix=b"\xef\xbb\xbf")
    assert load_profile(folder).keybinds == load_profile("sim_margit").keybinds


# ------------------------------------------------------------------------------- params.yaml
TINY = yaml.safe_load((ROOT / "params.yaml").read_text())

PARAM_FAULTS = [
    # (stage, key, value, the one line's expected text)
    (
        "finetune",
        "finetune.n_steps",
        10**9,
        "params.yaml finetune.n_steps = 1000000000: must be a whole number from 2 to 1000000",
    ),
    ("bc", "bc.batch_size", -1, "params.yaml bc.batch_size = -1: must be a whole number from 1"),
    ("bc", "bc.batch_size", 0, "params.yaml bc.batch_size = 0: must be a whole number from 1"),
    ("bc", "bc.epochs", 0, "params.yaml bc.epochs = 0: must be a whole number from 1"),
    ("bc", "bc", [1, 2], "params.yaml bc must be a mapping of keys (epochs, batch_size"),
    (
        "bc",
        "bc.validation_fraction",
        1.5,
        "params.yaml bc.validation_fraction = 1.5: must be a number at least 0 and below 1",
    ),
    ("bc", "bc.learning_rate", 0, "params.yaml bc.learning_rate = 0: must be a number above 0"),
    ("bc", "bc.learning_rate", "fast", "params.yaml bc.learning_rate = 'fast': must be a number above 0"),
    ("bc", "bc.patience", 2.5, "params.yaml bc.patience = 2.5: must be a whole number"),
    ("bc", "bc.seed", True, "params.yaml bc.seed = True: must be a whole number"),
    (
        "finetune",
        "finetune.total_steps",
        -5,
        "params.yaml finetune.total_steps = -5: must be a whole number at least 1",
    ),
    ("finetune", "finetune.learning_rate", -0.1, "params.yaml finetune.learning_rate = -0.1: must be a number above 0"),
    ("finetune", "finetune.gamma", 0, "params.yaml finetune.gamma = 0: must be a number above 0 and at most 1"),
    ("finetune", "finetune.gamma", 1.01, "params.yaml finetune.gamma = 1.01: must be a number above 0 and at most 1"),
    ("finetune", "finetune.batch_size", 1, "params.yaml finetune.batch_size = 1: must be a whole number at least 2"),
    ("finetune", "finetune.num_envs", 0, "params.yaml finetune.num_envs = 0: must be a whole number from 1"),
    ("finetune", "finetune.hosts", "pc1:50051", "params.yaml finetune.hosts = 'pc1:50051': must be a list of"),
    (
        "finetune",
        "finetune.backend",
        "xbox",
        "params.yaml finetune.backend = 'xbox': must be one of sim, sim_server, siphon",
    ),
    (
        "finetune",
        "finetune.critic_features",
        "detach",
        "params.yaml finetune.critic_features = 'detach': must be one of shared, detached, separate",
    ),
    ("finetune", "finetune.vf_coef", -1, "params.yaml finetune.vf_coef = -1: must be a number at least 0"),
    ("dataset", "env.max_steps", True, "params.yaml env.max_steps = True: must be a whole number of steps"),
    (
        "dataset",
        "env.action_history",
        -2,
        "params.yaml env.action_history = -2: must be null (off) or a whole number from 1 to 64",
    ),
    ("dataset", "env.frame_size", [84], "params.yaml env.frame_size = (84,): must be [width, height]"),
    ("dataset", "env.timestep_ms", -1, "params.yaml env.timestep_ms = -1: must be a number of milliseconds"),
    (
        "dataset",
        "env.timestep_ms",
        0,
        "params.yaml env.timestep_ms = 0: must be a number of milliseconds above 0",
    ),
    (
        "dataset",
        "dataset.id",
        "../../escape",
        "params.yaml dataset.id = '../../escape': must look like namespace/name-vN",
    ),
    (
        "demos",
        "demos.record.max_episodes",
        0,
        "params.yaml demos.record.max_episodes = 0: must be a whole number from 1 to 100000",
    ),
    ("demos", "demos.record.rate", 0, "params.yaml demos.record.rate = 0: must be a number above 0"),
    (
        "demos",
        "demos.rate_hz",
        30,
        "params.yaml demos.rate_hz: the recording's settings are capture.record's own, under demos.record now: write demos.record.rate",
    ),
    ("demos", "demos.source", "disk", "params.yaml demos.source = 'disk': must be one of sim, raw"),
    (
        "demos",
        "demos.record.player",
        "robot",
        "params.yaml demos.record.player = 'robot': must be one of expert, person",
    ),
    ("evaluate", "evaluate.fights", 0, "params.yaml evaluate.fights = 0: must be a whole number from 1 to 100000"),
    ("evaluate", "evaluate.parallel", -1, "params.yaml evaluate.parallel = -1: must be a whole number from 1"),
    ("evaluate", "evaluate.deterministic", "yes", "params.yaml evaluate.deterministic = 'yes': must be true or false"),
    (
        "evaluate",
        "evaluate.fights",
        10**9,
        "params.yaml evaluate.fights = 1000000000: must be a whole number from 1 to 100000",
    ),
    (
        "evaluate",
        "evaluate.first_seed",
        -1,
        "params.yaml evaluate.first_seed = -1: must be a whole number from 0 to 4294967295",
    ),
    (
        "evaluate",
        "evaluate.first_seed",
        2**32 - 1,
        f"params.yaml evaluate.first_seed = 4294967295: must be at most {2**32 - 100}: 100 fights count up from it",
    ),
    (
        "demos",
        "demos.record.max_episodes",
        10**9,
        "params.yaml demos.record.max_episodes = 1000000000: must be a whole number from 0 to 100000",
    ),
]


@pytest.mark.parametrize("stage, key, value, message", PARAM_FAULTS, ids=[f"{k}={v!r}" for _, k, v, _ in PARAM_FAULTS])
def test_a_bad_param_is_one_line_naming_the_key_and_the_allowed_values(
    tmp_path, monkeypatch, capsys, stage, key, value, message
):
    params = yaml.safe_load(yaml.safe_dump(TINY))
    *path, field = key.split(".")
    section = params
    for name in path:
        section = section[name]
    section[field] = value
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)  # nothing a stage might write lands in the repository
    status, _, err = main_here("elden_il.pipeline", stage, capsys=capsys)
    assert status == 2
    assert one_error_line(err).startswith(f"error: {message}")


EVAL_REPORT = {
    "backend": "sim",
    "fights": 3,
    "policies": {
        name: {
            "win_rate": 0.5,
            "win_rate_ci95": [0.1, 0.9],
            "boss_damage_dealt": 0.5,
            "player_damage_taken": 0.5,
            "episode_length": 20.0,
        }
        for name in ("random", "bc", "finetuned")
    },
}
NOT_EVALUATIONS = {
    "truncated": (json.dumps(EVAL_REPORT)[:60], "Unterminated string"),
    "another stage's report": (json.dumps({"episodes": 2, "steps": 50, "id": "x"}), "no backend and fights"),
    "a list": ("[1, 2]", "a list, not a mapping"),
    "a policy without its numbers": (
        json.dumps({**EVAL_REPORT, "policies": {"bc": {"win_rate": 1.0}}}),
        "policy 'bc' lacks boss_damage_dealt",
    ),
    "not text": ("\udcff", "is not an evaluation's eval.json"),
    "a teacher without its rate": (
        json.dumps({**EVAL_REPORT, "teacher": {"who": "you", "fights": 20}}),
        "a teacher without who, fights, win_rate and win_rate_ci95",
    ),
}


@pytest.mark.parametrize("kind", NOT_EVALUATIONS)
def test_summary_given_a_file_that_is_no_evaluation_is_one_line(tmp_path: Path, monkeypatch, capsys, kind: str):
    """``summary --experiment`` with a dataset.json or a truncated copy: KeyError or
    JSONDecodeError tracebacks."""
    reports = tmp_path / "datasets/reports"
    reports.mkdir(parents=True)
    (reports / "eval.json").write_text(json.dumps(EVAL_REPORT))
    text, said = NOT_EVALUATIONS[kind]
    other = tmp_path / "other.json"
    other.write_bytes(text.encode("utf-8", "surrogateescape"))
    monkeypatch.chdir(tmp_path)
    status, _, err = main_here("elden_il.pipeline", "summary", "--experiment", f"other={other}", capsys=capsys)
    line = one_error_line(err)
    assert status == 2 and f"{other} is not an evaluation's eval.json" in line and said in line, line
    assert main_here("elden_il.pipeline", "summary", "--markdown", capsys=capsys)[0] == 0


@pytest.mark.parametrize("flag", ["--experiment", "--live"])
def test_summary_given_a_fifo_is_one_line_not_a_wait_for_ever(tmp_path: Path, flag: str):
    """``summary --experiment x=FIFO`` (or ``--live FIFO``) waited for a writer for ever. Now the
    file is checked before it is opened, as every small file the project reads is."""
    reports = tmp_path / "datasets/reports"
    reports.mkdir(parents=True)
    (reports / "eval.json").write_text(json.dumps(EVAL_REPORT))
    fifo = tmp_path / "eval.json.fifo"
    os.mkfifo(fifo)
    given = f"x={fifo}" if flag == "--experiment" else str(fifo)
    try:
        result = cli("elden_il.pipeline", "summary", flag, given, cwd=tmp_path, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"summary {flag} FIFO still waiting after 60 s")
    line = one_error_line(result.stderr)
    assert result.returncode == 2 and f"{fifo} is not an evaluation's eval.json" in line and "FIFO" in line, line


def test_a_symlinked_output_folder_is_one_line_and_what_it_points_to_is_left_alone(tmp_path: Path, monkeypatch, capsys):
    """A symlinked ``datasets/demos/sim``: an ``rmtree`` traceback (it refuses links), after which
    the stage would have replaced the link. Outputs are replaced whole, the link with them."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine")
    (tmp_path / "datasets/demos").mkdir(parents=True)
    (tmp_path / "datasets/demos/sim").symlink_to(elsewhere)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(TINY))
    monkeypatch.chdir(tmp_path)
    status, _, err = main_here("elden_il.pipeline", "demos", capsys=capsys)
    line = one_error_line(err)
    assert status == 2 and "datasets/demos/sim is a symbolic link" in line and str(elsewhere) in line, line
    assert (tmp_path / "datasets/demos/sim").is_symlink() and [p.name for p in elsewhere.iterdir()] == ["keep.txt"]


@pytest.mark.parametrize("raw_dir", ["datasets/raw", "datasets/demos/sim"])
def test_demos_source_raw_records_nothing_and_touches_no_folder(
    tmp_path: Path, monkeypatch, capsys, caplog, raw_dir: str
):
    """``demos.source: raw``, the guide's own switch, emptied ``datasets/demos/sim`` (all 80 files
    of the expert's recordings) and exited 0; with ``raw_dir`` naming that folder (a person who
    kept their fights beside the demos), their recordings went too, and the next line said the
    dataset would be built from the folder just emptied. Now the stage, which records nothing
    then, leaves every folder as it was."""
    demos = tmp_path / "datasets/demos/sim"
    demos.mkdir(parents=True)
    (demos / "20260101-000000-000000_autopilot.h5").write_bytes(b"the expert's fight")
    (demos / "20260101-000000-000000_autopilot.mkv").write_bytes(b"its video")
    mine = tmp_path / raw_dir
    mine.mkdir(parents=True, exist_ok=True)
    (mine / "20260102-000000-000000_human.h5").write_bytes(b"my fight")
    before = snapshot_files(tmp_path / "datasets")
    params = {**TINY, "demos": {**TINY["demos"], "source": "raw", "raw_dir": raw_dir}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.INFO, logger="elden_il.pipeline"):
        status, _, err = main_here("elden_il.pipeline", "demos", capsys=capsys)
    assert status == 0, err
    assert snapshot_files(tmp_path / "datasets") == before
    assert f"the dataset is built from your recordings in {raw_dir}" in caplog.text
    shutil.rmtree(tmp_path / "datasets/demos")  # a fresh clone: the stage's output, for DVC, is still made
    assert main_here("elden_il.pipeline", "demos", capsys=capsys)[0] == 0 and demos.is_dir()


def test_the_demos_stage_never_replaces_a_folder_holding_a_persons_recordings(tmp_path: Path, monkeypatch, capsys):
    """The demos stage replaces ``datasets/demos/sim`` whole with the expert's new recordings: a
    person's fights kept there would go with it. Now it replaces only a folder of the expert's
    own files (what it will write again), and says which file stops it in one line."""
    demos = tmp_path / "datasets/demos/sim"
    demos.mkdir(parents=True)
    (demos / "20260101-000000-000000_autopilot.h5").write_bytes(b"the expert's fight")
    (demos / "20260102-000000-000000_human.h5").write_bytes(b"my fight")
    before = snapshot_files(demos)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(TINY))
    monkeypatch.chdir(tmp_path)
    status, _, err = main_here("elden_il.pipeline", "demos", capsys=capsys)
    line = one_error_line(err)
    assert status == 2 and "20260102-000000-000000_human.h5" in line and "datasets/raw" in line, line
    assert snapshot_files(demos) == before


# ---------------------------------------------------------------------------- command lines
CLI_FAULTS = [
    # (command line, the one line's expected text)
    (
        ["capture.record", "--backend", "sim", "--player", "person"],
        "--player person is who the autopilot is: add --autopilot",
    ),
    (["capture.record", "--master-size", "99999x99999"], "must be [width, height] in pixels, each from 16 to 7680"),
    (["capture.record", "--master-size", "84"], "size must look like 84x84"),
    (
        ["capture.record", "--backend", "sim", "--autopilot", "--master-size", "8x8"],
        "argument --master-size: '8x8' must be [width, height] in pixels, each from 16 to 7680",
    ),
    (
        ["capture.record", "--master-size", "640x480"],
        "--master-size 640x480: a live game's picture is kept at its window's size; resize the game's window instead",
    ),
    (["capture.record", "--video-codec", "mpeg2"], "argument --video-codec: 'mpeg2' must be one of h264, lossless"),
    (["capture.record", "--rate", "0"], "argument --rate: '0' must be a number above 0"),
    (["capture.record", "--rate", "-30"], "argument --rate: '-30' must be a number above 0"),
    (["capture.record", "--rate", "nan"], "argument --rate: 'nan' must be a number above 0"),
    (["capture.record", "--hotkeys", "F5"], "argument --hotkeys: 'F5' must be 3 different keys"),
    (["capture.record", "--hotkeys", "F5,F5,F8"], "must be 3 different keys"),
    (["capture.record", "--hotkeys", "F5,F6,F13"], "unknown Siphon key name 'F13'"),
    (["capture.record", "--hotkeys", "F5,P,F8"], "P (attack) also bound in profile 'sim_margit'"),
    (["capture.record", "--out", str(ROOT / "params.yaml")], "is a file, not a folder"),
    (
        ["capture.record", "--max-episodes", "-1"],
        "argument --max-episodes: '-1' must be a whole number from 0 to 100000",
    ),
    (["capture.record", "--max-episode-seconds", "0"], "argument --max-episode-seconds: '0' must be a number above 0"),
    (["capture.record", "--seed", "x"], "argument --seed: 'x' must be a whole number"),
    (
        ["capture.build_dataset", "--id", "../../escape"],
        "dataset id = '../../escape': must look like namespace/name-vN",
    ),
    (["capture.build_dataset", "--id", "/etc/x-v0"], "must look like namespace/name-vN"),
    (["capture.build_dataset", "--frame-size", "8"], "size must look like 84x84"),
    (["capture.build_dataset", "--root", str(ROOT / "params.yaml")], "is a file, not a folder"),
    (["capture.build_dataset", "--max-steps", "0"], "'0' must be a whole number of steps, at least 1"),
    (["env.sim", "--port", "70000"], "argument --port: '70000' must be a whole number from 0 to 65535"),
    (["env.sim", "--speed", "inf"], "argument --speed: 'inf' must be 0 or from 0.001 to 100 times real time"),
    (["env.sim", "--speed", "1e-30"], "argument --speed: '1e-30' must be 0 or from 0.001 to 100 times real time"),
    (
        ["elden_il.duel", "--fights", "1000000000"],
        "argument --fights: '1000000000' must be a whole number from 1 to 100000",
    ),
    (["elden_il.duel", "--fights", "0"], "argument --fights: '0' must be a whole number from 1 to 100000"),
    (
        ["elden_il.duel", "--first-seed", "-1"],
        "argument --first-seed: '-1' must be a whole number from 0 to 4294967295",
    ),
    (
        ["elden_il.duel", "--first-seed", "4294967295", "--fights", "2"],
        "--first-seed 4294967295 with --fights 2: the last seed would pass 4294967295",
    ),
    (
        ["elden_il.duel", "--policy", "random", "--clock", "sample"],
        "--clock sample plays the simulator's players as the recorder's autopilot does; random is none",
    ),
    (["capture.build_dataset", "--id", "a/margit-v0"], "must look like namespace/name-vN"),
]


@pytest.mark.parametrize("args, message", CLI_FAULTS, ids=[" ".join(a) for a, _ in CLI_FAULTS])
def test_a_bad_command_line_value_is_one_line(tmp_path: Path, monkeypatch, capsys, args: list[str], message: str):
    if args[0] == "capture.build_dataset" and "--raw" not in args:
        args = [*args, "--raw", str(tmp_path)]
    monkeypatch.chdir(tmp_path)
    status, out, err = main_here(*args, capsys=capsys)
    assert status == 2 and out == "", out
    assert message in one_error_line(err)


def test_the_smallest_master_size_records_and_gives_frames_down_to_8x8(tmp_path: Path):
    result = record_lock_step(tmp_path, "--max-episodes", "1", "--max-episode-seconds", "1", "--master-size", "16x16")
    assert result.returncode == 0, result.stderr
    (path,) = list_episodes(tmp_path)
    episode = read_episode(path)
    assert episode.master_size == (16, 16) and episode.frames_at(np.array([0, 1]), FrameSpec((8, 8))).shape == (
        2,
        8,
        8,
        3,
    )


# ------------------------------------------------------------------------ unrecovered partials
def test_the_builder_names_each_partial_it_leaves_out(raw_episodes: Path, tmp_path: Path, caplog):
    from test_recording import meta, sample

    raw = tmp_path / "raw"
    raw.mkdir()
    for path in list_episodes(raw_episodes):
        for file in (path, path.with_suffix(".mkv")):
            (raw / file.name).write_bytes(file.read_bytes())
    live = EpisodeWriter(raw, meta())  # being recorded right now
    live.append(sample(0))
    live.flush()
    crashed = raw / "20200101-000000-000000_human.h5.partial"  # as a killed recorder leaves one
    crashed.write_bytes(live.path.read_bytes())
    try:
        with caplog.at_level(logging.WARNING, logger="capture.build_dataset"):
            build_dataset(raw, "test/partials-v0", root=tmp_path / "minari")
    finally:
        live.discard()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(crashed.name in w and f"python -m capture.recover {raw}" in w for w in warnings), warnings
    assert any(live.path.name in w and "being recorded right now" in w for w in warnings), warnings
    assert json.loads((tmp_path / "minari/test/partials-v0/build.json").read_text())["source_episodes"] == [
        p.name for p in list_episodes(raw_episodes)
    ]


def torn_recording(tmp_path: Path, flush_every: int, kept: float, samples: int = 60) -> tuple[Path, bytes, Path]:
    """A partial of ``samples`` samples cut short after ``kept`` of its bytes (as a copy cut short
    leaves it), flushed every ``flush_every`` samples while it was written, its video whole;
    (torn file, whole bytes, folder)."""
    from test_recording import meta, sample

    live = EpisodeWriter(tmp_path / "live", meta(), lock_step=True)
    for i in range(samples):
        live.append(sample(i))
        if (i + 1) % flush_every == 0:
            live.flush()
    live.flush()
    whole = live.path.read_bytes()
    (tmp_path / "whole.h5").write_bytes(whole)
    live._video.close()  # the video whole: only the HDF5 file is torn
    torn = tmp_path / "raw" / "20200101-000000-000000_autopilot.h5.partial"
    torn.parent.mkdir()
    (torn.parent / "20200101-000000-000000_autopilot.mkv.partial").write_bytes(live.video_path.read_bytes())
    live.discard()
    torn.write_bytes(whole[: int(len(whole) * kept)])
    return torn, whole, tmp_path / "whole.h5"


def test_a_torn_partial_gives_back_the_samples_written_before_the_tear(tmp_path: Path):
    """The last tenth of a recording lost (a copy cut short): HDF5 will not open it, but the
    samples before the tear are recovered, exactly as written, and the torn file is kept."""
    torn, whole, intact = torn_recording(tmp_path, flush_every=100, kept=0.9, samples=600)
    result = cli("capture.recover", str(torn.parent), timeout=60)
    assert result.returncode == 0, result.stderr
    (recovered,) = list_episodes(torn.parent)
    got = read_episode(recovered)
    assert 256 <= len(got) < 600 and got.attrs["recovered"]  # whole chunks of 256 state rows
    with h5py.File(intact, "r", libver="latest", swmr=True) as original:  # as a live partial is read
        for name in ("t", "state", "keys_held"):
            assert np.array_equal(getattr(got, name), original[name][: len(got)]), name
    assert (torn.parent / (torn.name + ".bak")).read_bytes() == whole[: int(len(whole) * 0.9)]


def test_a_tear_that_takes_only_the_marks_and_the_controller_keeps_every_sample_and_says_so(tmp_path: Path):
    """Cut short at 54 %, the samples' own columns are whole but the intervention marks and the
    controller's columns, written last, are gone: every sample comes back, exactly, with those
    columns read as absent (no intervention, a pad at rest), and the line names what was lost."""
    torn, _, intact = torn_recording(tmp_path, flush_every=1000, kept=400 / 738)
    result = cli("capture.recover", str(torn.parent), timeout=60)
    assert result.returncode == 0, result.stderr
    assert "pad_axes lost past the tear: kept as far as they reach, read as absent after" in result.stderr
    (recovered,) = list_episodes(torn.parent)
    got = read_episode(recovered)
    with h5py.File(intact, "r", libver="latest", swmr=True) as original:
        for name in ("t", "state", "keys_held", "keys_pressed"):
            assert np.array_equal(getattr(got, name), original[name][: len(got)]), name
    assert len(got) == 60 and not got.pad_axes.any() and not got.intervention.any()


def test_a_partial_torn_before_its_samples_were_indexed_is_one_line_and_left_untouched(tmp_path: Path):
    """Cut short at 40 % of a file never flushed before its end, the index of its samples lies
    past the tear: nothing can be trusted, so one line, and the file left as it is."""
    torn, whole, _ = torn_recording(tmp_path, flush_every=1000, kept=0.4)
    result = cli("capture.recover", str(torn.parent), timeout=60)
    assert result.returncode == 2
    assert f"{torn} cannot be recovered" in one_error_line(result.stderr) and "left untouched" in result.stderr
    assert sorted(p.name for p in torn.parent.iterdir()) == [torn.name, torn.name.replace(".h5.", ".mkv.")]
    assert torn.read_bytes() == whole[: int(len(whole) * 0.4)]


# ------------------------------------------------------------------------ the simulator server
def answers(stub, timeout: float = 2.0) -> bool:
    """The server still serves: a read and a frame, each within ``timeout`` (the tick: at high
    speed the fight may be on its loading screen, where the game has no HP to read)."""
    read = stub.GetAttribute(pb2.GetSiphonRequest(attributeName="SimTick"), timeout=timeout)
    frame = stub.CaptureFrame(pb2.CaptureFrameRequest(), timeout=timeout)
    return read.success and frame.success


UNSIMULABLE_WRITES = [
    ("gameSpeedVal", math.inf, "it must be 0 or from 0.001 to 100 times real time"),
    ("gameSpeedVal", math.nan, "it must be 0 or from 0.001 to 100 times real time"),
    ("gameSpeedVal", 1e9, "it must be 0 or from 0.001 to 100 times real time"),
    ("gameSpeedVal", -1.0, "it must be 0 or from 0.001 to 100 times real time"),
    ("HeroLocalPosX", math.nan, "no place in the game lies farther"),
    ("HeroGlobalPosY", -math.inf, "no place in the game lies farther"),
    ("HeroLocalPosZ", 1e30, "no place in the game lies farther"),
    ("HeroAngle", math.nan, "radians (a turn either way)"),
]


@pytest.mark.parametrize("name, value, message", UNSIMULABLE_WRITES, ids=[f"{n}={v}" for n, v, _ in UNSIMULABLE_WRITES])
def test_a_value_the_simulator_cannot_simulate_is_refused_and_it_keeps_serving(
    stub, name: str, value: float, message: str
):
    """An infinite game speed used to spin the clock with the world lock held (every call then
    timed out, SIGTERM too); a NaN or huge position broke every frame until the fight restarted."""
    assert stub.SetAttribute(pb2.SetSiphonRequest(attributeName="gameSpeedFlag", bool_value=True), timeout=2).success
    response = stub.SetAttribute(pb2.SetSiphonRequest(attributeName=name, float_value=value), timeout=2)
    assert not response.success and message in response.message, response.message
    assert answers(stub)
    assert stub.SetAttribute(pb2.SetSiphonRequest(attributeName="gameSpeedVal", float_value=1.0), timeout=2).success


def absurd_values(allowed, kind: str) -> list[float]:
    """Values no world holds for an attribute that takes ``allowed``: just outside each end,
    the 32-bit extremes (where outside), and, where it is a float, NaN, infinities and a speck
    above 0."""
    int32 = (-(2**31), 2**31 - 1)
    values = [allowed.low - 1, allowed.high + 1, *(int32 if kind == "int" else (-1e30, 1e30, math.nan, math.inf))]
    if allowed.or_zero:
        values.append(allowed.low / 2 if kind == "float" else -1)
    return [v for v in values if not allowed.holds(v) and (kind == "float" or int32[0] <= v <= int32[1])]


def every_absurd_write() -> list[tuple[str, str, float]]:
    """(attribute, type, value) for every writable attribute the server has that is not a bool
    (a bool holds whatever is written), each with every value of ``absurd_values``."""
    from env.sim import memory
    from env.sim.frame_capture import WINDOW_CONTROLS

    ranges = {n: (a.type, a.range) for n, a in memory.ATTRIBUTES.items() if a.write is not None and a.type != "bool"}
    ranges |= {n: (WINDOW_CONTROLS[n], r) for n, r in memory.WINDOW_RANGES.items()}
    assert all(r is not None for _, r in ranges.values()), "a writable attribute without a Range"
    return [(n, kind, v) for n, (kind, r) in ranges.items() for v in absurd_values(r, kind)]


def snapshot(stub) -> dict:
    """Every attribute the simulator's own config has, and the window controls, read now."""
    from env.sim import memory
    from env.sim.frame_capture import WINDOW_CONTROLS

    names = [*(n for n in memory.ATTRIBUTES if n not in ("SimRestoreSave",)), *WINDOW_CONTROLS]
    values = {}
    for name in names:
        response = stub.GetAttribute(pb2.GetSiphonRequest(attributeName=name), timeout=2)
        values[name] = response.WhichOneof("value") and getattr(response, response.WhichOneof("value"))
    return values


def test_a_write_the_world_cannot_hold_is_refused_with_the_range_for_every_attribute(stub, player):
    """``HeroFlaskCharges = 2147483647`` made the HUD draw two billion flask icons with the world
    lock held: every call timed out for minutes. Every writable attribute now has its range, a
    write outside it is refused with that range and writes nothing, and the server answers."""
    assert stub.GetAttribute(pb2.GetSiphonRequest(attributeName="NpcId"), timeout=20).success  # (the hook is in)
    assert stub.SetAttribute(pb2.SetSiphonRequest(attributeName="gameSpeedFlag", bool_value=True), timeout=2).success
    assert stub.SetAttribute(pb2.SetSiphonRequest(attributeName="gameSpeedVal", float_value=0.0), timeout=2).success
    before = snapshot(stub)
    for name, kind, value in every_absurd_write():
        request = pb2.SetSiphonRequest(attributeName=name, **{f"{kind}_value": value})
        response = stub.SetAttribute(request, timeout=2)
        assert not response.success and "is refused, nothing was written: it must be " in response.message, (
            name,
            value,
            response.message,
        )
        assert answers(stub)
    assert snapshot(stub) == before


def test_a_tiny_game_speed_leaves_the_clock_running(stub):
    """``gameSpeedVal 1e-30`` put the clock's next tick beyond what a timeout can hold: its thread
    died, and from then on game time moved only when a client called. Now such a speed is
    refused, and game time runs on its own again at speed 1: a frame stream, which nothing else
    drives, gets a new frame every tick."""
    assert stub.SetAttribute(pb2.SetSiphonRequest(attributeName="gameSpeedFlag", bool_value=True), timeout=2).success
    tiny = stub.SetAttribute(pb2.SetSiphonRequest(attributeName="gameSpeedVal", float_value=1e-30), timeout=2)
    assert not tiny.success and "it must be 0 or from 0.001 to 100" in tiny.message, tiny.message
    time.sleep(0.3)
    assert stub.SetAttribute(pb2.SetSiphonRequest(attributeName="gameSpeedVal", float_value=1.0), timeout=2).success
    stream = stub.StreamFrames(pb2.StreamFramesRequest(format="raw"), timeout=5)
    ticks = [next(stream).frame_number for _ in range(30)]
    stream.cancel()
    assert ticks[-1] - ticks[0] >= 29


def test_the_clock_survives_any_speed_the_world_is_given():
    """Whatever speed reaches the world (the server refuses the meaningless ones, a direct
    write does not), the clock's thread sleeps a bounded time and lives: at speed 1 afterwards
    the world ticks on its own, with nobody settling the clock."""
    import threading

    from env.sim.buttons import InputLatch
    from env.sim.clock import RealtimeClock
    from env.sim.world import World

    for tiny in (1e-30, 5e-324):
        world, lock = World(0), threading.Lock()
        world.game_speed_flag, world.game_speed_val = True, tiny
        clock = RealtimeClock(world, InputLatch({}), lock)
        clock.start()
        try:
            time.sleep(0.3)
            with lock:
                world.game_speed_val = 1.0
                clock.reschedule()
                start = world.tick_count
            time.sleep(1.0)
            with lock:
                assert world.tick_count - start >= 40, (tiny, world.tick_count - start)
        finally:
            clock.stop()


def test_the_fastest_game_speed_keeps_the_server_serving_and_stoppable(stub, sim_server: SimServer):
    """At the highest speed it accepts the clock cannot keep up on this machine: it lets game
    time slip in bursts instead of holding the world lock, so calls and SIGTERM still land."""
    from env.sim.memory import MAX_GAME_SPEED

    assert stub.SetAttribute(pb2.SetSiphonRequest(attributeName="gameSpeedFlag", bool_value=True), timeout=2).success
    assert stub.SetAttribute(
        pb2.SetSiphonRequest(attributeName="gameSpeedVal", float_value=MAX_GAME_SPEED), timeout=2
    ).success
    started = time.monotonic()
    for _ in range(20):
        assert answers(stub)
    assert time.monotonic() - started < 10
    began = time.monotonic()
    sim_server.process.terminate()
    assert sim_server.process.wait(timeout=10) == 0
    assert time.monotonic() - began < 5


def test_a_second_simulator_on_a_port_in_use_refuses_to_start(sim_server: SimServer):
    """gRPC shares ports by default (SO_REUSEPORT): a second server used to start and take part
    of the connections, so a client could reconnect to a different world without a word."""
    port = sim_server.host.rsplit(":", 1)[1]
    result = cli("env.sim", "--port", port, "--size", "84x84", timeout=60)
    assert result.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "Traceback" not in result.stderr


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not has_ipv6_loopback(), reason="this machine has no IPv6 loopback (::1)")
def test_the_simulator_serves_on_an_ipv6_host_and_a_client_reaches_it_in_brackets(tmp_path: Path):
    """``--host ::1`` made gRPC read "::1:PORT" as a misformatted domain name, and the error
    blamed the port. An IPv6 literal is bracketed when the address is formed."""
    from env.sim.launcher import free_port
    from env.siphon.client import SiphonClient, SiphonError

    port = free_port()
    log = open(tmp_path / "server.log", "wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "env.sim", "--host", "::1", "--port", str(port), "--size", "84x84"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()
            try:
                client = SiphonClient(f"[::1]:{port}", connect_timeout=1)
                break
            except SiphonError:
                assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.2)
        assert client.status().success
        client.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()
    assert f"on [::1]:{port}" in (tmp_path / "server.log").read_text()


def test_a_simulator_that_cannot_bind_names_the_reason():
    """A host that is no address of this machine was blamed on the port ("another server is
    using that port, or ... is not an address of this machine"): the one reason is named."""
    result = cli("env.sim", "--host", "192.0.2.1", "--port", "0", "--size", "84x84", timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("error: cannot listen on 192.0.2.1:0: 192.0.2.1 is not an address of this machine"), line
    assert "port" not in line.split(": ", 2)[2].split(";")[0], line


def test_streams_nobody_reads_cannot_starve_taps(stub):
    """Frame streams nobody reads used to hold all 16 waiting threads, and every tap (so every
    attack and roll) then timed out. Now streams have threads of their own, the one over the
    limit is refused at once, and taps go on."""
    from env.sim.server import MAX_STREAMS

    streams = [stub.StreamFrames(pb2.StreamFramesRequest(format="raw"), timeout=60) for _ in range(MAX_STREAMS)]
    try:
        time.sleep(0.5)  # every stream has started and blocks in flow control, unread
        extra = stub.StreamFrames(pb2.StreamFramesRequest(format="raw"), timeout=5)
        with pytest.raises(grpc.RpcError) as refused:
            next(extra)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "frame streams are already in flight" in refused.value.details()
        for _ in range(10):
            assert stub.InputKeyTap(pb2.InputKeyTapRequest(keys=["W"], hold_ms=20), timeout=2).success
        assert answers(stub)
    finally:
        for stream in streams:
            stream.cancel()
    time.sleep(0.5)  # the cancelled streams give their slots back
    stream = stub.StreamFrames(pb2.StreamFramesRequest(format="raw"), timeout=10)
    assert next(stream).data
    stream.cancel()


def many_attributes(arrays: int, scalars: int, array_length: int = 4) -> pb2.SetProcessConfigRequest:
    """A config of ``scalars`` int attributes side by side in one object and ``arrays`` arrays
    over them, each ``array_length`` bytes from the next attribute on."""

    def attribute(name: str, kind: str, offset: int, length: int) -> pb2.ProcessAttributeProto:
        return pb2.ProcessAttributeProto(
            name=name, type=kind, pattern="AA BB CC", offsets=[0x10, offset], length=length, method="aobscan"
        )

    attributes = [attribute(f"S{i}", "int", 4 * i, 4) for i in range(scalars)]
    attributes += [attribute(f"A{j}", "array", 4 * j, array_length) for j in range(arrays)]
    return pb2.SetProcessConfigRequest(process_name="eldenring.exe", process_window_name="w", attributes=attributes)


def test_a_config_of_thousands_of_arrays_is_answered_at_once_and_others_are_served_meanwhile(
    stub, sim_server: SimServer
):
    """Arrays were matched against scalars one pair at a time: 4,000 of each took 38.9 s, and two
    such requests held both worker threads, so GetServerStatus from anyone else missed its
    30-second deadline. Matching is by object and offset now, and what a config can ask for is
    bounded (attributes, array lengths, the attributes all arrays hold, the request's bytes)."""
    from concurrent.futures import ThreadPoolExecutor

    from env.sim.server import MAX_ARRAY_BYTES, MAX_ARRAY_FIELDS, MAX_REQUEST

    requests = [many_attributes(4000, 4000), many_attributes(4000, 4000, array_length=MAX_ARRAY_BYTES)]
    with grpc.insecure_channel(sim_server.host) as channel, ThreadPoolExecutor(2) as pool:
        other = pb2_grpc.SiphonServiceStub(channel)  # a second client
        started = time.monotonic()
        heavy = [pool.submit(stub.SetProcessConfig, request, timeout=30) for request in requests]
        status = other.GetServerStatus(pb2.GetServerStatusRequest(), timeout=2)
        one, many = (future.result() for future in heavy)
        took = time.monotonic() - started
    assert status.success and took < 5, took
    assert not one.success and "S0: no such attribute" in one.message  # matched, and refused for its names
    assert not many.success and f"the simulator serves at most {MAX_ARRAY_FIELDS}" in many.message, many.message[:300]

    huge = stub.SetProcessConfig(many_attributes(1, 1, array_length=400_000_000), timeout=5)
    assert (
        not huge.success
        and f"an array of length 400000000: the simulator serves arrays of 1 to {MAX_ARRAY_BYTES}" in huge.message
    )
    with pytest.raises(grpc.RpcError) as too_big:
        stub.SetProcessConfig(
            pb2.SetProcessConfigRequest(process_name="x" * (MAX_REQUEST + 1), process_window_name="w"), timeout=5
        )
    assert too_big.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert answers(stub)  # the config the fixture set still serves


def test_taps_are_bounded_and_refused_beyond_the_limit(stub):
    """A tap waits its hold plus a delay between each pair of keys, twice: 3 keys at the old
    10 s limits waited 50 s. The whole tap is now bounded, and taps beyond the limit in flight
    are refused at once instead of queueing."""
    from env.sim.server import MAX_TAPS, MAX_WAIT_MS

    long = stub.InputKeyTap(
        pb2.InputKeyTapRequest(keys=["W", "A", "S"], hold_ms=0, delay_ms=MAX_WAIT_MS // 4 + 1), timeout=2
    )
    assert not long.success and "hold + 2 x (keys - 1) x delay" in long.message
    calls = [
        stub.InputKeyTap.future(pb2.InputKeyTapRequest(keys=["W"], hold_ms=1500), timeout=10)
        for _ in range(MAX_TAPS + 4)
    ]
    results = [call.result() for call in calls]
    refused = [r for r in results if not r.success]
    assert len(results) - len(refused) >= MAX_TAPS - 2  # (a tap may finish before the last is sent)
    assert refused and all("taps are already in flight" in r.message for r in refused)
    assert stub.InputKeyTap(pb2.InputKeyTapRequest(keys=["W"], hold_ms=20), timeout=2).success
