"""Reading an episode's video back: training frames derived from the master picture, frame counts
for checks, the first frames of a video cut short, for recovery, and the video as MP4 for viewers
that take no Matroska (Rerun).

Frames are decoded in order (a video decodes no other way cheaply), and only the ones asked for
are converted to RGB and cropped and resized, with the env's own ``FrameSpec``, so a dataset at
any size or crop is made by the very code the live env runs on the frame it captures (a dataset
at 200 ms steps asks for one sample's frame in six at 30 Hz).

A video is read only as the video of its episode (``VideoOf``: what the episode says of it).
The frame count alone let the wrong picture through: two fights of the same length with their
videos swapped, a video cut to another episode's length, one re-encoded smaller and silently
scaled up again. So the recording's id (in the episode and in the video's own metadata) and the
size it was captured at must match before a frame is decoded, and the count once all are; and
the file must be a plain one in the episode's folder (a FIFO would block the reader forever).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
from av.video.reformatter import VideoReformatter

from env.common.files import plain_file_problem
from env.observations import FrameSpec

from capture.video import FORMAT, VIDEO_ID_TAG, VideoError

_READ_ERRORS = (av.error.FFmpegError, OSError, ValueError)


@dataclass(frozen=True)
class VideoOf:
    """What an episode says of its video: the episode's file, the frames it holds (one per
    sample recorded), the size it was captured at, and the recording's id (None for episodes
    recorded before the id was written: they are checked by count and size alone)."""

    episode: Path
    frames: int
    size: tuple[int, int]
    video_id: str | None

    def refuse(self, video: Path, why: str) -> VideoError:
        return VideoError(
            f"{video} is not the video of {self.episode} ({why}): put {self.episode.name}'s own video beside it "
            "under its name, or move both files out of the folder to go on without that episode"
        )

    def check_header(self, video: Path, container: av.container.InputContainer) -> None:
        """Refuse a video whose id or size is not the episode's, before any frame is decoded."""
        found = container.metadata.get(VIDEO_ID_TAG)
        if self.video_id is not None and found != self.video_id:
            said = f"the video's is {found}" if found else "the video carries none"
            raise self.refuse(video, f"the episode's recording id is {self.video_id}, {said}")
        context = container.streams.video[0].codec_context
        if (context.width, context.height) != self.size:
            raise self.refuse(
                video,
                f"it is {context.width}x{context.height}, the episode was captured at {self.size[0]}x{self.size[1]} "
                "(window_size): a picture of another size would be scaled into frames the recording never held",
            )

    def check_count(self, video: Path, frames: int) -> None:
        if frames != self.frames:
            raise self.refuse(
                video, f"it holds {frames} frames, the episode {self.frames} samples, and frame i is sample i"
            )


def decoded(path: Path, of: VideoOf | None = None) -> Iterator[np.ndarray]:
    """Every frame of the video at ``path`` in order, RGB at its master size; ``VideoError`` for
    a file that is missing, is no video, breaks off into garbage, or (``of``) is not the video
    that episode says it has."""
    rgb = RGB()
    for frame in _frames(path, of):
        yield rgb(frame)


class RGB:
    """A decoded frame as an RGB array, by one converter kept for a whole video. PyAV's
    ``frame.to_ndarray(format="rgb24")`` sets a converter up anew for every frame, which costs
    many times the conversion itself (BENCHMARKS.md, the default pipeline's time); kept, it
    gives the same pixels, bit for bit."""

    def __init__(self) -> None:
        self._reformatter = VideoReformatter()

    def __call__(self, frame: av.VideoFrame) -> np.ndarray:
        return self._reformatter.reformat(frame, format="rgb24").to_ndarray()


def _open(path: Path, **options) -> av.container.InputContainer:
    """``path`` opened for reading, after checking it is a plain file of its folder."""
    problem = plain_file_problem(path)
    if problem is not None:
        raise VideoError(f"{path} is {problem}: it is not read; put the episode's own video file there")
    try:
        return av.open(str(path), format=FORMAT, **options)
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


def _frames(path: Path, of: VideoOf | None = None) -> Iterator[av.VideoFrame]:
    """Every frame of ``path`` in order, as decoded (not yet converted to RGB)."""
    container = _open(path, options={"err_detect": "crccheck"})
    with container:
        if of is not None:
            of.check_header(path, container)
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


def check_belongs(path: Path, of: VideoOf) -> None:
    """Refuse the video at ``path`` unless its file, id and size are the episode's (what can be
    told without decoding it)."""
    with _open(path) as container:
        of.check_header(path, container)


def count_frames(path: Path, of: VideoOf | None = None) -> int:
    """How many frames of ``path`` decode, up to where it breaks off (a video cut short by a
    kill ends in a partial cluster); 0 for a file with none. With ``of``, ``VideoError`` unless it
    is that episode's (by id and size)."""
    if of is not None:
        check_belongs(path, of)
    n = 0
    try:
        for _ in decoded(path):
            n += 1
    except VideoError:
        pass
    return n


def frames_at(path: Path, of: VideoOf, indices: np.ndarray, spec: FrameSpec) -> np.ndarray:
    """The frames of samples ``indices`` (ascending, repeats allowed) of the episode ``of``
    describes, cropped and resized by ``spec``. ``VideoError`` unless the video is that
    episode's: its id and size, and exactly its frame count (frame i is sample i)."""
    out = np.empty((len(indices), *spec.shape), np.uint8)
    wanted = np.asarray(indices)
    rgb = RGB()
    k, n = 0, 0
    for n, decoded_frame in enumerate(_frames(path, of), start=1):
        i = n - 1
        if k < len(wanted) and wanted[k] == i:
            frame = spec.process(rgb(decoded_frame))
            while k < len(wanted) and wanted[k] == i:
                out[k] = frame
                k += 1
    of.check_count(path, n)
    return out


def keep_first(source: Path, target: Path, n: int) -> None:
    """Write the first ``n`` frames of ``source`` (a video cut short) to ``target`` as a whole
    file, copying their packets as they are: no frame is encoded again."""
    try:
        with (
            _open(source) as inp,
            av.open(str(target), "w", format=FORMAT, options={"fflags": "+bitexact"}) as out,
        ):
            if VIDEO_ID_TAG in inp.metadata:  # the copy is the same recording's
                out.metadata[VIDEO_ID_TAG] = inp.metadata[VIDEO_ID_TAG]
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


def as_mp4(path: Path, of: VideoOf | None = None) -> bytes:
    """The video at ``path`` remuxed into MP4, in memory: its packets copied as they are (no frame
    is encoded again, so no pixel changes and it takes milliseconds), with their timestamps. Rerun's
    video asset reads MP4 only, and an episode's video is Matroska so that a killed recorder
    leaves it playable (``capture.video``). ``VideoError`` as ``decoded`` for an unreadable one,
    or (``of``) one that is not that episode's."""
    out = io.BytesIO()
    with _open(path) as inp:
        if of is not None:
            of.check_header(path, inp)
        try:
            with av.open(out, "w", format="mp4") as mp4:
                stream = inp.streams.video[0]
                copy = mp4.add_stream_from_template(stream)
                for packet in inp.demux(stream):
                    if packet.dts is None:  # the demuxer's empty packet at the end
                        continue
                    packet.stream = copy
                    mp4.mux(packet)
        except _READ_ERRORS as e:
            raise VideoError(
                f"{path} is not a readable video ({_why(e)}): it may be corrupt; run "
                "`python -m capture.recover` on an unfinished one"
            ) from None
    return out.getvalue()


def _why(e: BaseException) -> str:
    return getattr(e, "strerror", None) or str(e)
