"""What an episode file may ask a reader to allocate, and the sample times it may hold.

An HDF5 dataset says how many rows it has, and reading it allocates them all; rows resized
into existence but never written cost the file nothing. So a file of under a megabyte can
declare 10^11 sample times, 745 GiB of float64 for a reader to allocate. Every dataset an
episode is read from is checked first: its columns the format's (``check_columns``), no more
rows than any recording holds (``MAX_SAMPLES``: days of samples), and no more than the file
holds data for (where its rows are stored as they are, as the recorder writes them; a column
someone compressed, at most ``MAX_PACKED`` times what it stores). A sample time that is not a number, runs
backwards, or lies days from the others would make a step grid of any length: refused too.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

from env.common.errors import DataError
from env.controller import AXES, BUTTONS

MAX_SAMPLES = 10_000_000
"""Samples (or input events) one episode may hold: over 90 hours at 30 Hz, where a fight lasts minutes."""
MAX_SPAN_S = 24 * 3600.0
"""The longest an episode's samples may span."""
MAX_PACKED = 64
"""How many times its stored bytes a compressed column may unpack to: the recorder stores every
column as it is, and a recording's numbers pack a few times at most; a file's columns of zeros
packed a thousandfold would unpack to gigabytes."""
MAX_PICTURE_SIDE = 8192
"""The widest frame a format 1 file may hold (an 8K window)."""


class BoundsError(DataError):
    """An episode file that asks for more than a recording holds; the message names it and the limit."""


def check_rows(path: Path, dataset: h5py.Dataset, limit: int = MAX_SAMPLES) -> int:
    """The rows of ``dataset`` (of the episode file ``path``), or ``BoundsError`` before any is read."""
    rows = int(dataset.shape[0]) if dataset.shape else 0
    name = dataset.name.lstrip("/")
    if rows > limit:
        raise BoundsError(
            f"{path}: its {name} declares {rows} rows, more than any recording holds ({limit} at most): the file "
            "is damaged or no recording; move it out of the folder"
        )
    packed = dataset.id.get_create_plist().get_nfilters() > 0
    try:
        held = dataset.id.get_storage_size()
    except (RuntimeError, OSError):  # its chunk index unreadable (a torn file): what reads it says so
        return rows
    if dataset.nbytes > (MAX_PACKED * held + (1 << 20) if packed else held):
        per_row = max(1, dataset.nbytes // max(1, rows))
        how = f"{MAX_PACKED} times what it stores when compressed" if packed else "what it stores"
        raise BoundsError(
            f"{path}: its {name} declares {rows} rows ({dataset.nbytes:,} bytes) but the file holds data for "
            f"{(MAX_PACKED * held if packed else held) // per_row} at most ({how}): it is damaged (rows added that "
            "were never written); move it out of the folder"
        )
    return rows


def check_columns(path: Path, f: h5py.File, attribute_names: int, key_names: int) -> None:
    """Refuse a dataset of the episode file ``f`` whose shape past its rows is not the format's
    (``capture.episode_format``): the state's ``attribute_names`` columns, the keys' ``key_names``,
    two for the mouse, the controller's buttons and axes, one value a row for times and marks.
    A reader indexes them by those columns: another width is a traceback later, or, wide enough,
    an allocation no machine has."""
    widths = {
        "t": (),
        "frame_t": (),
        "state": (attribute_names,),
        "keys_held": (key_names,),
        "keys_pressed": (key_names,),
        "mouse": (2,),
        "intervention": (),
        "frame_repeated": (),
        "pad_held": (len(BUTTONS),),
        "pad_pressed": (len(BUTTONS),),
        "pad_axes": (len(AXES),),
        "events": (),
    }
    for name, width in widths.items():
        if name in f and tuple(f[name].shape[1:]) != width:
            raise BoundsError(
                f"{path}: its {name} is {tuple(f[name].shape)}, where the format holds (rows, "
                f"{', '.join(map(str, width)) or ''}) for this file's {attribute_names} attributes and {key_names} "
                "keys: the file is damaged or no recording; move it out of the folder"
            )
    if "frames" in f:  # format 1
        shape = tuple(f["frames"].shape[1:])
        if len(shape) != 3 or shape[2] != 3 or not all(1 <= side <= MAX_PICTURE_SIDE for side in shape[:2]):
            raise BoundsError(
                f"{path}: its frames are {tuple(f['frames'].shape)}, not (rows, height, width, 3) of a picture of at "
                f"most {MAX_PICTURE_SIDE} pixels a side: the file is damaged; move it out of the folder"
            )


def check_times(path: Path, t: np.ndarray, what: str = "sample times (t)", ordered: bool = True) -> None:
    """Refuse times that are not finite numbers, run backwards (where ``ordered``: samples are;
    input events from several threads need not be) or span more than ``MAX_SPAN_S``, naming the
    first bad row."""
    if not len(t):
        return
    bad = np.flatnonzero(~np.isfinite(t))
    if len(bad):
        raise BoundsError(
            f"{path}: its {what} hold no number at row {int(bad[0])} ({len(bad)} row(s) in all): a recording's "
            "clock always gives one; the file is damaged: move it out of the folder"
        )
    backwards = np.flatnonzero(np.diff(t) < 0) if ordered else []
    if len(backwards):
        row = int(backwards[0]) + 1
        raise BoundsError(
            f"{path}: its {what} run backwards at row {row} ({t[row - 1]:.6g} s, then {t[row]:.6g} s): one clock "
            "only counts up; the file is damaged: move it out of the folder"
        )
    span = float(t.max() - t.min())
    if span > MAX_SPAN_S:
        raise BoundsError(
            f"{path}: its {what} span {span:.6g} s, more than an episode lasts ({MAX_SPAN_S:g} s at most): the "
            "file is damaged: move it out of the folder"
        )
