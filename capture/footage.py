"""Reading an episode's video back: training frames derived from the master picture, frame counts
for checks, the first frames of a video cut short, for recovery, and the video as MP4 for viewers
that take no Matroska (Rerun).

Frames are decoded in order (a video decodes no other way cheaply), and only the ones asked for
are converted to RGB and cropped and resized, with the env's own ``FrameSpec``, so a dataset at
any size or crop is made by the very code the live env runs on the frame it captures (a dataset
at 200 ms steps asks for one sample's frame in six at 30 Hz).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import av
import numpy as np

from env.observations import FrameSpec

from capture.video import FORMAT, VideoError

_READ_ERRORS = (av.error.FFmpegError, OSError, ValueError)


def decoded(path: Path) -> Iterator[np.ndarray]:
    """Every frame of the video at ``path`` in order, RGB at its master size; ``VideoError`` for
    a file that is missing, is no video, or breaks off into garbage."""
    for frame in _frames(path):
        yield frame.to_ndarray(format="rgb24")


def _frames(path: Path) -> Iterator[av.VideoFrame]:
    """Every frame of ``path`` in order, as decoded (not yet converted to RGB)."""
    try:
        container = av.open(str(path), format=FORMAT, options={"err_detect": "crccheck"})
    except FileNotFoundError:
        raise VideoError(
            f"{path} is missing: an episode's video lies next to its .h5 with the same name; "
            "put it back, or move the .h5 out of the folder to go on without that episode"
        ) from None
    except _READ_ERRORS as e:
        raise VideoError(
            f"{path} is not a readable video ({_why(e)}): it may be corrupt; run "
            f"`python -m capture.recover` on an unfinished one, or move the episode out of the folder"
        ) from None
    with container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"  # both cores where the machine has them
        # a damaged packet is an error, not a frame FFmpeg patches up from its neighbours in silence
        stream.codec_context.options = {"err_detect": "crccheck+explode"}
        try:
            yield from container.decode(stream)
        except _READ_ERRORS as e:
            raise VideoError(
                f"{path} breaks off into unreadable data ({_why(e)}): it is corrupt; move its episode "
                "(the .h5 and the .mkv) out of the folder to go on without it"
            ) from None


def count_frames(path: Path) -> int:
    """How many frames of ``path`` decode, up to where it breaks off (a video cut short by a
    kill ends in a partial cluster); 0 for a file with none."""
    n = 0
    try:
        for _ in decoded(path):
            n += 1
    except VideoError:
        pass
    return n


def frames_at(path: Path, rows: int, indices: np.ndarray, spec: FrameSpec) -> np.ndarray:
    """The frames of samples ``indices`` (ascending, repeats allowed) of a ``rows``-sample
    episode, cropped and resized by ``spec``. ``VideoError`` unless the video holds exactly
    ``rows`` frames: frame i is sample i, and a video of another length belongs to another
    recording, or was cut."""
    out = np.empty((len(indices), *spec.shape), np.uint8)
    wanted = np.asarray(indices)
    k, n = 0, 0
    for n, decoded_frame in enumerate(_frames(path), start=1):
        i = n - 1
        if k < len(wanted) and wanted[k] == i:
            frame = spec.process(decoded_frame.to_ndarray(format="rgb24"))
            while k < len(wanted) and wanted[k] == i:
                out[k] = frame
                k += 1
    if n != rows:
        raise VideoError(
            f"{path} holds {n} frames but its episode has {rows} samples: frame i is sample i, so this "
            "video is not the episode's (or was cut); put the episode's own video back, or move the "
            "pair out of the folder to go on without it"
        )
    return out


def keep_first(source: Path, target: Path, n: int) -> None:
    """Write the first ``n`` frames of ``source`` (a video cut short) to ``target`` as a whole
    file, copying their packets as they are: no frame is encoded again."""
    try:
        with (
            av.open(str(source), format=FORMAT) as inp,
            av.open(str(target), "w", format=FORMAT, options={"fflags": "+bitexact"}) as out,
        ):
            stream = inp.streams.video[0]
            copy = out.add_stream_from_template(stream)
            kept = 0
            for packet in inp.demux(stream):
                if packet.size == 0 or packet.pts is None:
                    continue
                if kept == n:
                    break
                packet.stream = copy
                out.mux(packet)
                kept += 1
    except _READ_ERRORS as e:
        target.unlink(missing_ok=True)
        raise VideoError(f"{source} cannot be copied ({_why(e)})") from None
    if kept != n:
        target.unlink(missing_ok=True)
        raise VideoError(f"{source} holds {kept} whole packets, fewer than its {n} decodable frames")


def as_mp4(path: Path) -> bytes:
    """The video at ``path`` remuxed into MP4, in memory: its packets copied as they are (no frame
    is encoded again, so no pixel changes and it takes milliseconds), with their timestamps. Rerun's
    video asset reads MP4 only, and an episode's video is Matroska so that a killed recorder
    leaves it playable (``capture.video``). ``VideoError`` as ``decoded`` for an unreadable one."""
    out = io.BytesIO()
    try:
        with av.open(str(path), format=FORMAT) as inp, av.open(out, "w", format="mp4") as mp4:
            stream = inp.streams.video[0]
            copy = mp4.add_stream_from_template(stream)
            for packet in inp.demux(stream):
                if packet.dts is None:  # the demuxer's empty packet at the end
                    continue
                packet.stream = copy
                mp4.mux(packet)
    except FileNotFoundError:
        raise VideoError(
            f"{path} is missing: an episode's video lies next to its .h5 with the same name; put it back"
        ) from None
    except _READ_ERRORS as e:
        raise VideoError(
            f"{path} is not a readable video ({_why(e)}): it may be corrupt; run "
            "`python -m capture.recover` on an unfinished one"
        ) from None
    return out.getvalue()


def _why(e: BaseException) -> str:
    return getattr(e, "strerror", None) or str(e)
