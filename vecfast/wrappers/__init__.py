"""Batched vector-env wrappers and adapters for other libraries (Stable-Baselines3)."""

from vecfast.wrappers.base import AsyncVectorWrapper, BatchObservationWrapper, SingleObservationWrapper, has_async_api
from vecfast.wrappers.episode_stats import RecordEpisodeStatistics
from vecfast.wrappers.frame_stack import FrameStackObservation
from vecfast.wrappers.image import (
    ChannelOrderObservation,
    GrayscaleObservation,
    ResizeObservation,
    SingleChannelOrderObservation,
    SingleGrayscaleObservation,
    SingleResizeObservation,
)
from vecfast.wrappers.normalize import NormalizeObservation
from vecfast.wrappers.pettingzoo import pettingzoo_to_vector
from vecfast.wrappers.reward import ClipReward, NormalizeReward, ScaleReward

__all__ = [
    "AsyncVectorWrapper",
    "BatchObservationWrapper",
    "ChannelOrderObservation",
    "ClipReward",
    "FrameStackObservation",
    "GrayscaleObservation",
    "NormalizeObservation",
    "NormalizeReward",
    "RecordEpisodeStatistics",
    "ResizeObservation",
    "ScaleReward",
    "SingleChannelOrderObservation",
    "SingleGrayscaleObservation",
    "SingleObservationWrapper",
    "SingleResizeObservation",
    "has_async_api",
    "pettingzoo_to_vector",
]
