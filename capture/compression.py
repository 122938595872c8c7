"""Lossless frame compression for a Minari dataset that Minari itself writes uncompressed.

Minari 0.5.4's HDF5 writer takes no compression option: every frame lands raw (21 KB a step at
84x84 RGB) although the simulator's frames compress many times over losslessly. HDF5 filters are
transparent to readers, so after Minari has written ``main_data.hdf5`` the file is repacked here
with the frame datasets (4-d ``uint8``) passed through HDF5's built-in gzip (deflate) filter;
every other dataset, and every attribute, is copied as it is. ``minari.load_dataset`` and any
HDF5 reader (no plugin) read the frames back bit for bit (``tests/test_interop.py`` holds it).

The level and chunking are chosen by ``benchmarks/bench_learning.py`` (size, build time and load
time side by side; numbers in BENCHMARKS.md): gzip 6 on chunks of 16 frames.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from env.common import files

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FrameCompression:
    """An HDF5 filter for frames: ``filter`` is ``"gzip"``, ``"lzf"`` or None (stored raw, as
    Minari writes them); ``level`` is gzip's 0-9."""

    filter: str | None = "gzip"
    level: int | None = 6
    chunk_frames: int = 16

    def __str__(self) -> str:
        if self.filter is None:
            return "none"
        return f"{self.filter} {self.level}" if self.level is not None else self.filter

    def dataset_options(self, shape: tuple[int, ...]) -> dict:
        """``h5py.Group.create_dataset`` options for frames of ``shape`` (steps, H, W, C)."""
        chunks = (max(1, min(self.chunk_frames, shape[0])), *shape[1:])
        if self.filter is None:
            return {"chunks": chunks}
        return {"chunks": chunks, "compression": self.filter, "compression_opts": self.level}


DEFAULT = FrameCompression()
NONE = FrameCompression(None, None)


def compress_frames(hdf5_path: Path, compression: FrameCompression = DEFAULT) -> None:
    """Rewrite ``hdf5_path`` (a Minari ``main_data.hdf5``) with its frames compressed. A fresh
    file is written beside it and renamed over it (HDF5 never returns freed space to the disk, so
    compressing in place would not shrink the file)."""
    if compression.filter is None:
        return
    packed = hdf5_path.with_name(hdf5_path.name + ".packing")
    with h5py.File(hdf5_path, "r") as source, h5py.File(packed, "w", track_order=True) as target:
        _copy_group(source, target, compression)
    files.replace(packed, hdf5_path)
    log.debug("frames in %s compressed with %s", hdf5_path, compression)


def _copy_group(source: h5py.Group, target: h5py.Group, compression: FrameCompression) -> None:
    target.attrs.update(source.attrs)
    for name, item in source.items():
        if isinstance(item, h5py.Group):
            # Minari writes with track_order=True; keep episode and key order as written
            _copy_group(item, target.create_group(name, track_order=True), compression)
        elif item.ndim == 4 and item.dtype == np.uint8:
            frames = target.create_dataset(
                name, data=item[()], maxshape=item.maxshape, **compression.dataset_options(item.shape)
            )
            frames.attrs.update(item.attrs)
        else:
            source.copy(item, target, name)
