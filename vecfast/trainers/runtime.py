"""Per-process torch setup: device, threads, seeds."""

from __future__ import annotations

import functools
import random
from pathlib import Path

import numpy as np
import torch

from vecfast.heap import keep_freed_heap_memory
from vecfast.trainers.config import TrainConfig


def resolve_device(cfg: TrainConfig) -> torch.device:
    """``"auto"``: CUDA when torch sees a GPU, else CPU."""
    if cfg.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(cfg.device)


def setup_torch(cfg: TrainConfig) -> torch.device:
    """Limit torch's CPU threads (env workers need the cores), keep freed heap memory for reuse and seed every
    generator."""
    torch.set_num_threads(max(1, cfg.torch_threads))
    keep_freed_heap_memory()
    if cfg.seed is not None:
        random.seed(cfg.seed)
        np.random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
    return resolve_device(cfg)


@functools.cache
def native_bf16(device_type: str) -> bool:
    """Whether ``device_type`` ("cpu", "cuda") computes bfloat16 in hardware rather than emulating it."""
    if device_type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device_type == "cpu":
        try:
            flags = Path("/proc/cpuinfo").read_text().split()
        except OSError:  # not Linux: stay with float32
            return False
        return "avx512_bf16" in flags or "amx_bf16" in flags
    return False
