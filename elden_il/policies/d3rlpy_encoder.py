"""A d3rlpy encoder for ``elden_il.interop``'s tuple observations ``(frames CHW, state)``.

d3rlpy 2.8's default encoders take one array (a picture or a vector), not a tuple. This one runs
d3rlpy's own pixel encoder (the Nature DQN convolutions) over the frames, scaled to [0, 1] here
so no observation scaler is needed, and its vector encoder over the state, and joins the two.
Registered with d3rlpy, so saved learnables load back (``d3rlpy.load_learnable``) once this
module is imported.
"""

from __future__ import annotations

import dataclasses

import torch
from d3rlpy.models.encoders import EncoderFactory, PixelEncoderFactory, VectorEncoderFactory, register_encoder_factory
from d3rlpy.models.torch.encoders import Encoder, compute_output_size
from torch import nn


class FrameAndStateEncoder(Encoder):
    def __init__(self, frame_shape: tuple[int, ...], state_shape: tuple[int, ...], feature_size: int) -> None:
        super().__init__()
        self.frames = PixelEncoderFactory().create(frame_shape)
        self.state = VectorEncoderFactory(hidden_units=[64]).create(state_shape)
        joined = compute_output_size([frame_shape], self.frames) + compute_output_size([state_shape], self.state)
        self.head = nn.Sequential(nn.Linear(joined, feature_size), nn.ReLU())

    def forward(self, x) -> torch.Tensor:
        frames, state = x
        return self.head(torch.cat([self.frames(frames.float() / 255.0), self.state(state.float())], dim=1))


@dataclasses.dataclass()
class FrameAndStateEncoderFactory(EncoderFactory):
    """``encoder_factory=`` for d3rlpy algorithms on ``to_d3rlpy`` data (discrete actions)."""

    feature_size: int = 256

    def create(self, observation_shape) -> FrameAndStateEncoder:
        frame_shape, state_shape = observation_shape
        return FrameAndStateEncoder(tuple(frame_shape), tuple(state_shape), self.feature_size)

    @staticmethod
    def get_type() -> str:
        return "elden_il_frame_and_state"


register_encoder_factory(FrameAndStateEncoderFactory)
