"""What the project's command lines share: flags declared once, on the settings dataclass they fill
(``flag``, ``add_flags``, ``from_flags``); the one way a command builds its parser and reads its
settings (``command_parser``, ``parse_settings``); argparse helpers that convert and range-check
every value where it is parsed (a bad flag is one argparse error line, never a traceback); and the
one runner every ``main()`` hands its work to (``run_command``). ``tests/test_cli.py`` holds every
command, benchmarks and studies included, to the parser and the runner."""

from __future__ import annotations

import argparse
import dataclasses
import errno
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from env.common import interrupts
from env.common.errors import EldenILError, Interrupted
from env.common.fields import RULE, Rule

ERROR_EXIT = 2
"""Every command's exit status for an error the user can fix (argparse's own for a bad flag)."""


Settings = TypeVar("Settings")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
"""The logging levels a command's ``--log-level`` takes (in any case)."""


def log_level_flag(default: str = "INFO") -> Any:
    """A settings field for ``--log-level``: how much a command logs."""
    return dataclasses.field(
        default=default,
        metadata=flag(f"logging level: {', '.join(LOG_LEVELS)}", type=str.upper, choices=LOG_LEVELS, metavar="LEVEL"),
    )


def flag(help: str, **argparse_options: Any) -> dict[str, dict[str, Any]]:
    """A settings field's command-line flag, as the field's metadata:
    ``rate: float = field(default=30.0, metadata=flag("samples per second", type=float))``. The
    flag is ``--rate``, its default the field's (one default for the code and the command line);
    a ``False`` field is an on-switch (``store_true``) unless ``action`` says otherwise;
    ``flag_name`` names a flag otherwise than its field (``--loading-s`` for ``loading``), and
    ``positional=True`` makes it an argument without a dash (a folder a command reads)."""
    return {"flag": {"help": help, **argparse_options}}


SettingsFlags = type | tuple[type, tuple[str, ...]]
"""A settings dataclass whose flags a command takes: all of them, or as ``(Settings, ("field", ...))``
those fields' only (``add_flags``' ``names``: a command that takes one knob of a bigger settings)."""


def command_parser(prog: str, doc: str, *settings: SettingsFlags, epilog: str | None = None) -> argparse.ArgumentParser:
    """A command's parser that teaches from its module's docstring ``doc``: its first paragraph
    (less a leading "``python -m x``: ") says what the command does, and the rest, kept as
    written, follows the flags (unless ``epilog`` says something else). It holds the flags of
    each of ``settings``, in order, so that a command names what it takes in one call; a command
    that adds more (a flag group, a field's adjusted default, subcommands) adds them to it."""
    first, _, rest = doc.partition("\n\n")
    description = first.split(": ", 1)[1] if first.startswith("``") else first
    parser = argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog=rest if epilog is None else epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for taken in settings:
        add_flags(parser, *_settings_and_names(taken))
    return parser


def parse_settings(
    prog: str, doc: str, *settings: SettingsFlags, argv: list[str] | None = None, epilog: str | None = None
) -> tuple[Any, ...]:
    """The command line ``argv`` (None: the process's own) read as one instance of each of
    ``settings``, in order: ``args, out = parse_settings(prog, __doc__, MyArgs, JsonOut, argv=argv)``.
    A command's settings dataclasses are its whole command line, so reading them is one call
    rather than a parser built, filled and converted field by field again in every command. A
    command that checks flags against each other (``parser.error``) or adjusts a flag keeps its
    ``command_parser`` and calls ``from_flags`` itself."""
    flags = command_parser(prog, doc, *settings, epilog=epilog).parse_args(argv)
    return tuple(from_flags(_settings_and_names(taken)[0], flags) for taken in settings)


def _settings_and_names(taken: SettingsFlags) -> tuple[type, tuple[str, ...] | None]:
    return taken if isinstance(taken, tuple) else (taken, None)


def add_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    settings: type,
    names: tuple[str, ...] | None = None,
    **adjusted: dict[str, Any],
) -> None:
    """One flag per field of the dataclass ``settings`` that declares one (``flag``), in field
    order; with ``names``, those fields' only. ``adjusted`` gives a field's flag the argparse
    options this command says otherwise (``frame_size={"default": None, "help": ...}`` where a
    command takes the size from its input unless told)."""
    for f in dataclasses.fields(settings):
        options = dict(f.metadata.get("flag", {}))
        if not options or (names is not None and f.name not in names):
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        else:  # a field with no default at all is a flag the command requires (``required=True``)
            default = None if f.default_factory is dataclasses.MISSING else f.default_factory()
        options = {"default": default, **options, **adjusted.get(f.name, {})}
        name = options.pop("flag_name", None)
        positional = options.pop("positional", False)
        if RULE in f.metadata and "type" not in options:  # a ``checked`` field: its own rule, at parse time
            options["type"] = ruled(type(default), f.metadata[RULE])
        if options["default"] is False and "action" not in options:
            options["action"] = "store_true"
            options.pop("type", None)
        elif options["default"] not in (None, [], ()) and "default:" not in options["help"]:
            listed = "nargs" in options and isinstance(options["default"], (tuple, list))
            options["help"] += f" (default: {' '.join(map(str, options['default'])) if listed else '%(default)s'})"
        if options.get("action") == "append" and options["default"] is not None:  # a tuple, appended to as a list
            options["default"] = list(options["default"])
        if positional:
            parser.add_argument(f.name, **options)
            continue
        if name is None:
            name = f.name.replace("_", "-")
        elif "action" not in options:  # a flag named otherwise than its field shows its own name
            options.setdefault("metavar", name.upper().replace("-", "_"))
        parser.add_argument("--" + name, dest=f.name, **options)


def from_flags(settings: type[Settings], args: argparse.Namespace, **others: Any) -> Settings:
    """The dataclass ``settings`` filled from the flags of its fields that ``args`` holds, and
    ``others`` (which win over a flag: a value the command worked out from its flag); a field
    whose flag this command did not add keeps its default."""
    values = {
        f.name: tuple(value) if isinstance(value, list) else value  # nargs gives a list; settings hold tuples
        for f in dataclasses.fields(settings)
        if "flag" in f.metadata and hasattr(args, f.name)
        for value in (getattr(args, f.name),)
    }
    return settings(**{**values, **others})


@dataclasses.dataclass(frozen=True)
class JsonOut:
    """Where a measuring command (a benchmark, a study) also writes what it measured, for a later comparison (the table it
    prints is for reading)."""

    json: Path | None = dataclasses.field(default=None, metadata=flag("also write the results here", type=Path))


def run_command(work: Callable[[], int | None]) -> int:
    """Run a command's ``work`` and return the process's exit status: ``work``'s own (None is
    0); for an ``EldenILError`` its message as one ``error:`` line on stderr and ``ERROR_EXIT``;
    for an interrupted run (Ctrl-C, SIGTERM: ``env.common.interrupts``) one line, and the shell's 128 +
    signal, so that a script or DVC never takes the run as done, even where a library swallowed
    the interrupt; a full disk is one line too. Anything else is a bug and keeps its traceback."""
    with interrupts.watched() as watch:
        try:
            try:
                status = work() or 0
                interrupts.check()  # an interrupt some library caught and printed as "ignored"
                return status
            finally:
                if watch is not None:
                    watch.stopping = True  # a second Ctrl-C lets the line below be said
        except KeyboardInterrupt:
            e = Interrupted(interrupted_line(_signum(watch)), _signum(watch))
            print(f"error: {e}", file=sys.stderr)
            return e.exit_code
        except Interrupted as e:
            print(f"error: {e}", file=sys.stderr)
            return e.exit_code
        except EldenILError as e:
            if watch is not None and watch.received is not None:  # what the interrupt broke, said as the interrupt
                stopped = Interrupted(interrupted_line(watch.received), watch.received)
                print(f"error: {stopped}", file=sys.stderr)
                return stopped.exit_code
            print(f"error: {e}", file=sys.stderr)
            if e.exit_at_once:
                sys.stderr.flush()
                logging.shutdown()
                os._exit(ERROR_EXIT)
            return ERROR_EXIT
        except OSError as e:
            if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            where = f" writing {e.filename}" if e.filename else ""
            print(
                f"error: the disk is full ({e.strerror}{where}): free some space and run it again; every output "
                "is built aside and swapped in whole, so nothing half-written replaced what was there",
                file=sys.stderr,
            )
            return ERROR_EXIT


def _signum(watch: interrupts.Watch | None) -> int:
    """The signal that stopped the command: the first one it received (Ctrl-C where it ran
    without handlers, off the main thread)."""
    return watch.received if watch is not None and watch.received is not None else signal.SIGINT


def interrupted_line(signum: int) -> str:
    """What an interrupted command says: what stopped it, and that nothing half-made was put in
    place (every output is built aside and swapped in whole: ``env.common.staging``)."""
    name = signal.Signals(signum).name
    how = " (Ctrl-C)" if signum == signal.SIGINT else ""
    return (
        f"interrupted by {name}{how} before it finished: nothing half-written replaced what was there "
        "before; run it again to finish"
    )


def size_within(rule: Rule) -> Callable[[str], tuple[int, int]]:
    """An argparse ``type``: ``"1280x720"`` -> ``(1280, 720)`` when ``rule`` accepts it, or an
    argparse error that shows the expected form or what ``rule`` allows."""

    def parse(text: str) -> tuple[int, int]:
        try:
            width, height = (int(v) for v in text.lower().split("x"))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"size must look like 84x84 or 1280x720 (WIDTHxHEIGHT), got {text!r}"
            ) from None
        if not rule.accepts((width, height)):
            raise argparse.ArgumentTypeError(f"{text!r} {rule.allowed}")
        return width, height

    return parse


def ruled(convert: Callable[[str], Any], rule: Rule) -> Callable[[str], Any]:
    """An argparse ``type`` that converts the text and holds it to ``rule`` (``env.common.fields``)."""

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            value = text
        if not rule.accepts(value):
            raise argparse.ArgumentTypeError(f"{text!r} {rule.allowed}")
        return value

    return parse


def output_folder(text: str) -> Path:
    """A folder to write into: it may not exist yet, but it must not be a file."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a folder: name a folder to write into")
    return path
