"""What a torn episode file still holds: the samples written before the tear.

A file cut short mid-write (a copy interrupted, a disk pulled) is shorter than the end of file
its HDF5 superblock records. HDF5 refuses to open it, and its SWMR reader, asked for metadata
past the end, retries for minutes. But everything before the tear is intact, and the recorder
wrote samples in order. So ``torn_copy`` makes a readable copy: the file padded with zeros to
its recorded length, its "open for writing" flags cleared and the superblock's checksum made
anew. Zeros read as data, though, so ``intact_rows`` counts, from each dataset's chunk index,
only the leading rows whose chunks lie wholly before the tear: what was really written.
"""

from __future__ import annotations

import struct
from pathlib import Path

import h5py

SIGNATURE = b"\x89HDF\r\n\x1a\n"
SUPERBLOCK_BYTES = 48
"""A version 2 or 3 superblock with 8-byte addresses: signature, version, sizes, flags, four
addresses (base, extension, end of file, root group), then its checksum."""
FLAGS_AT, END_OF_FILE_AT, CHECKSUM_AT = 11, 28, 44
MASK = 0xFFFFFFFF


def recorded_length(path: Path) -> int | None:
    """The end of file the superblock records, when the file is shorter than it (torn); None for
    a file that is whole, or is no HDF5 file HDF5 writes this way."""
    with open(path, "rb") as f:
        head = f.read(SUPERBLOCK_BYTES)
        size = f.seek(0, 2)
    if len(head) < SUPERBLOCK_BYTES or head[:8] != SIGNATURE or head[8] not in (2, 3) or head[9] != 8:
        return None
    (end,) = struct.unpack_from("<Q", head, END_OF_FILE_AT)
    return end if end > size else None


def torn_copy(path: Path, copy: Path, end: int) -> int:
    """Write a readable copy of the torn file ``path``, padded to the ``end`` its superblock
    records (``recorded_length``), to ``copy``; returns the tear's offset (its length)."""
    data = bytearray(path.read_bytes())
    tear = len(data)
    data.extend(bytes(end - tear))
    data[FLAGS_AT] = 0  # no writer has it open any more
    struct.pack_into("<I", data, CHECKSUM_AT, lookup3(bytes(data[:CHECKSUM_AT])))
    copy.write_bytes(bytes(data))
    return tear


def intact_rows(dataset: h5py.Dataset, tear: int) -> int:
    """How many leading rows of a chunked ``dataset`` lie in chunks wholly before byte ``tear``
    (none, where the chunk index itself lies past it)."""
    try:
        chunks = sorted(
            (dataset.id.get_chunk_info(i) for i in range(dataset.id.get_num_chunks())),
            key=lambda info: info.chunk_offset[0],
        )
    except (RuntimeError, OSError):  # HDF5: "incorrect metadata checksum": the index is zeros
        return 0
    rows = 0
    for info in chunks:
        if info.chunk_offset[0] != rows or info.byte_offset is None or info.byte_offset + info.size > tear:
            break
        rows = min(rows + dataset.chunks[0], dataset.shape[0])
    return rows


def lookup3(data: bytes, initial: int = 0) -> int:
    """Bob Jenkins' lookup3 ``hashlittle``: the checksum HDF5 writes after its metadata."""
    length = len(data)
    a = b = c = (0xDEADBEEF + length + initial) & MASK
    i = 0
    while length > 12:
        x, y, z = struct.unpack_from("<III", data, i)
        a, b, c = _mix((a + x) & MASK, (b + y) & MASK, (c + z) & MASK)
        length -= 12
        i += 12
    if length == 0:
        return c
    x, y, z = struct.unpack("<III", data[i:] + bytes(12 - length))
    return _final((a + x) & MASK, (b + y) & MASK, (c + z) & MASK)


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & MASK


def _mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    for (p, q, r), k in zip(((0, 2, 1), (1, 0, 2), (2, 1, 0), (0, 2, 1), (1, 0, 2), (2, 1, 0)), (4, 6, 8, 16, 19, 4)):
        v = [a, b, c]
        v[p] = (v[p] - v[q]) & MASK
        v[p] ^= _rot(v[q], k)
        v[q] = (v[q] + v[r]) & MASK
        a, b, c = v
    return a, b, c


def _final(a: int, b: int, c: int) -> int:
    for (p, q), k in zip(((2, 1), (0, 2), (1, 0), (2, 1), (0, 2), (1, 0), (2, 1)), (14, 11, 25, 16, 4, 14, 24)):
        v = [a, b, c]
        v[p] ^= v[q]
        v[p] = (v[p] - _rot(v[q], k)) & MASK
        a, b, c = v
    return c
