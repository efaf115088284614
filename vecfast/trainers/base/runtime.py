"""Per-process torch setup: device, threads, seeds."""

from __future__ import annotations

import random

import numpy as np
import torch

from vecfast.heap import keep_freed_heap_memory
from vecfast.trainers.config import TrainConfig


def resolve_device(cfg: TrainConfig) -> torch.device:
    """``"auto"``: CUDA when torch sees a GPU, else CPU. A device this machine lacks is a ValueError here, before
    a run starts anything (not an assertion deep in torch once its run directory exists)."""
    if cfg.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(cfg.device)
    except RuntimeError as exc:
        raise ValueError(f"device={cfg.device!r} is not a torch device (cpu, cuda, cuda:1, ...): {exc}") from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
            raise ValueError(
                f"device={cfg.device!r} but torch sees no CUDA GPU here (torch {torch.__version__}, {build}): "
                "use device='cpu' or 'auto'"
            )
        if device.index is not None and device.index >= count:
            raise ValueError(f"device={cfg.device!r} but torch sees {count} CUDA GPU(s) (cuda:0 to cuda:{count - 1})")
    return device


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
