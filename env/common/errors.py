"""Every error this project raises on purpose, grouped by what the caller does next.

Bad input (a profile with a typo, a malformed params file, a corrupt dataset), a missing server,
a game that does not answer: each raises a subclass of ``EldenILError`` whose message says what
was wrong and how to fix it. Every command line runs its work through ``env.common.cli.run_command``,
which prints that message in one line and exits with status 2 (an interrupted run with the
shell's 128 + signal); anything else escaping a command is a bug, and keeps its traceback.

The groups, and every class under them (``tests/test_cli.py`` holds this list equal to the code):

- ``ConfigError``: fix a setting (a profile or Siphon TOML, params.yaml, a flag, an env config).
  ``env.common.fields.FieldError``, ``elden_il.params.ParamsError``, ``capture.drivers.RecordError``.
- ``GameError``: the game or its server (start it, wait for it, reconnect, get back to the
  fight). ``env.game.Unreadable`` (nothing to read right now: a loading screen, the boss gone,
  no frame yet; both backends raise it, and a recorder waits it out), ``env.game.PausedTap``
  (a tap asked of a paused game), ``env.siphon.client.SiphonError`` (the transport) and its kinds
  ``env.siphon.client.ReadRefused``, ``env.siphon.client.NoFrame``,
  ``env.siphon.client.NotConfigured`` and ``env.siphon.stream.StreamLost``,
  ``env.siphon.arena.BossKilled``, ``env.doctor.GameNotReady``, ``env.sim.launcher.ServerExited``
  (the simulator).
- ``DataError``: a file, recording or dataset that cannot be used as it is (recover it, record
  again, rebuild, fix the file). ``env.common.files.NotPlainFile`` and
  ``env.common.files.UnreadableFile`` (a link, a FIFO, a folder, a file too large, not UTF-8),
  ``capture.episode_format.EpisodeError`` and its kinds ``capture.episode_writer.DiskError`` and
  ``capture.recover.Skipped``, ``capture.bounds.BoundsError`` (an episode asking for more than a
  recording holds), ``capture.video.VideoError``, ``capture.build_dataset.BuildError`` and its kind
  ``capture.build_dataset.DiskFull`` (the disk filled while a dataset was written),
  ``elden_il.data.DatasetError``, ``elden_il.policies.policy_json.PolicyFileError``.
- ``SetupError``: something this machine lacks or cannot reach (install it, start it).
  ``env.sim.display.DisplayError`` (Xvfb), ``elden_il.fanout.FanoutError`` (a Ray cluster),
  ``elden_il.view.viewer.ViewError`` (Rerun's viewer).
- ``Interrupted``: a run stopped by a signal.
"""

from __future__ import annotations


class EldenILError(Exception):
    """Something the user can fix; the message says what and how.

    ``exit_at_once``: the process must end without running Python's exit handlers once the
    message is out (HDF5 retrying a failed write at exit would crash: ``capture.episode_writer.DiskError``)."""

    exit_at_once: bool = False


class ConfigError(EldenILError):
    """A config, profile, params file or flag that cannot be used; the message says where and why."""


class GameError(EldenILError):
    """Anything that went wrong talking to a game, with a message that says what to do about it."""


class DataError(EldenILError):
    """A recording or dataset that cannot be used as it is; the message names it and what to do."""


class SetupError(EldenILError):
    """Something this machine lacks or cannot reach; the message says what to install or start."""


class Interrupted(EldenILError):
    """A run stopped by a signal (Ctrl-C, SIGTERM) before it did all it was asked. What it kept is
    whole, but a caller (a shell script, DVC) must not take the run as done: a command line exits
    with ``exit_code``, the shell's 128 + the signal's number (130 for Ctrl-C)."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum
