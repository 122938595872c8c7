"""The episode file's format: its names, its columns, and the error for a file that is not one.

Written by ``capture.episode_writer``, read by ``capture.episode``, repaired by ``capture.recover``.

The picture is not in the HDF5 file: it is the episode's video, ``<name>.mkv`` beside it
(``capture.video``), at the size it was captured (the master size), one frame per sample, written
as ``<name>.mkv.partial`` while the episode grows and renamed just before the ``.h5`` is; the
``.h5``'s rename is what publishes the pair. The OS lock of the partial ``.h5`` covers both.

Layout of format 3 (N samples, A attributes, K keys, B controller buttons, X controller axes;
all on the recorder's one clock):

========================  ==================  =============================================
``t`` / ``frame_t``       (N,) float64        sample time / when its frame was captured
``state``                 (N, A) float64      attributes, in ``attribute_names`` order
``keys_held``             (N, K) bool         keys down at sample time (``key_names`` order)
``keys_pressed``          (N, K) bool         keys pressed since the previous sample
``mouse``                 (N, 2) float32      mouse movement since the previous sample
``pad_held``              (N, B) bool         controller buttons down (``pad_buttons`` order)
``pad_pressed``           (N, B) bool         controller buttons pressed since the previous sample
``pad_axes``              (N, X) float32      controller sticks and triggers (``pad_axes`` order)
``intervention``          (N,) bool           the person had taken control from a policy
``frame_repeated``        (N,) bool           the video repeats the previous frame here (the
                                              encoder's queue was full: ``capture.video``)
``events``                (M,) compound       the raw input log: t, kind, key, dx, dy
                                              (``capture.inputs``: keys, mouse, controller)
========================  ==================  =============================================

``intervention`` is all False unless a policy played (``python -m elden_il.pilot --policy``);
files written before it existed lack it and read as all False. Format 2 files have no
controller columns: they read as a controller never touched. Format 1 files hold the frames
themselves instead of a video, cropped and resized once when sampled (``frames``, (N, H, W, 3)
uint8, with ``frame_size`` and ``frame_crop`` attributes): they still read, at that size only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from env.common.errors import DataError
from env.controller import AXES, BUTTONS

from capture.video import SUFFIX as VIDEO_SUFFIX

FORMAT_VERSION = 3
PARTIAL = ".h5.partial"
PER_SAMPLE = ("t", "frame_t", "state", "keys_held", "keys_pressed", "mouse")
MARKS = ("intervention", "frame_repeated")
"""Per-sample marks added after format 1's first files: absent from those, read as all False."""
PAD = {"pad_held": (bool, BUTTONS), "pad_pressed": (bool, BUTTONS), "pad_axes": (np.float32, AXES)}
"""The controller's columns (format 3): absent from older files, read as a controller at rest."""


class EpisodeError(DataError):
    """An episode file that cannot be read as one; the message names it and what to do."""


def video_path(episode: Path) -> Path:
    """The video of the finished episode ``episode`` (``x.h5`` -> ``x.mkv``)."""
    return episode.with_suffix(VIDEO_SUFFIX)


def partial_video_path(partial: Path) -> Path:
    """The video being written beside the partial episode ``partial`` (``x.h5.partial`` -> ``x.mkv.partial``)."""
    return partial.with_name(partial.name[: -len(PARTIAL)] + VIDEO_SUFFIX + ".partial")
