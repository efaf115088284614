"""The optimisers: Adam (the default) and LAMB (Large Batch Simulation's), built by :func:`make_optimizer`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from vecfast.trainers.config import TrainConfig

MIN_TRUST = 0.01  # the trust ratio's floor (bps-nav's lamb_min_trust); its ceiling is 1 / MIN_TRUST


class Lamb(torch.optim.Optimizer):
    """LAMB (You et al. 2020) as Large Batch Simulation (bps-nav) trains with it.

    Per tensor ``w``: Adam's update ``u = m_hat / (sqrt(v_hat) + eps)`` (bias-corrected moments)
    plus decoupled L2 weight decay ``weight_decay * w``, scaled by the trust ratio
    ``min(||w||, max_weight_norm) / ||u||`` clipped to [min_trust, 1 / min_trust] (1 where either
    norm is 0): ``w -= lr * ratio * u``. A parameter group with ``trust_ratio=False`` takes ratio 1,
    which is AdamW (Adam with ``weight_decay=0``).
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        trust_ratio: bool = True,
        min_trust: float = MIN_TRUST,
        max_weight_norm: float = 10.0,
    ) -> None:
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError(f"lr, eps and weight_decay must be >= 0, got {lr}, {eps} and {weight_decay}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"betas must be in [0, 1), got {betas}")
        if not 0.0 < min_trust <= 1.0:
            raise ValueError(f"min_trust must be in (0, 1], got {min_trust}")
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "trust_ratio": trust_ratio,
            "min_trust": min_trust,
            "max_weight_norm": max_weight_norm,
        }
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                t = state["step"]
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(p.grad, 1.0 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1.0 - beta2)
                denom = (exp_avg_sq / (1.0 - beta2**t)).sqrt_().add_(group["eps"])
                update = (exp_avg / (1.0 - beta1**t)).div_(denom)
                if group["weight_decay"]:
                    update.add_(p, alpha=group["weight_decay"])
                if group["trust_ratio"]:
                    # tensors, not floats: no device synchronisation per parameter
                    weight_norm, update_norm = torch.linalg.vector_norm(p), torch.linalg.vector_norm(update)
                    ratio = (weight_norm.clamp(max=group["max_weight_norm"]) / update_norm).clamp(
                        group["min_trust"], 1.0 / group["min_trust"]
                    )
                    update.mul_(torch.where((weight_norm > 0) & (update_norm > 0), ratio, torch.ones_like(ratio)))
                p.add_(update, alpha=-group["lr"])
        return loss


def no_trust_ratio(param: torch.Tensor) -> bool:
    """Whether LAMB updates a parameter as AdamW without weight decay rather than with the trust ratio.

    Biases, Fixup scalars and normalisation layers' parameters (every parameter of at most one
    dimension), as bps-nav's LAMB exempts them; and a tensor that starts too small for the trust
    ratio: ``||w|| < MIN_TRUST * sqrt(numel)``, where sqrt(numel) is the norm of Adam's first update
    (every element +-1), so its ratio would sit at the floor. That is every Fixup block's last
    convolution (zeroed) and the actor's output layer (orthogonal, gain 0.01). LAMB as bps-nav, apex
    and timm write it gives ratio 1 only while ``||w|| == 0``; after that such a tensor moves by
    ``lr * max(||w||, MIN_TRUST * ||u||)`` per step. In a small SE-ResNet9 trained 100 steps at lr
    5e-4 on a consistent objective (tests/test_lbs_recipe.py) the blocks' last convolutions grew
    1.7-2.4x after their first step, against Adam's 41-67x (91-160x exempt); on PointNav the actor
    had not moved after 58 updates. Decided on the freshly initialised model (the optimiser is built
    before a checkpoint loads), so a tensor stays exempt as it grows.
    """
    return param.ndim <= 1 or float(torch.linalg.vector_norm(param.detach())) < MIN_TRUST * param.numel() ** 0.5


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    """``cfg.optimizer``'s optimiser of ``model``'s parameters (``model`` may be a DistributedDataParallel wrapper).

    "adam": Adam of every parameter. "lamb": :class:`Lamb` in two groups: the parameters of
    :func:`no_trust_ratio` with neither the trust ratio nor weight decay; the others (weight
    matrices and convolution kernels) with both (``cfg.weight_decay``). Both take
    ``learning_rate``, ``adam_beta1/2`` and ``adam_eps``.
    """
    betas = (cfg.adam_beta1, cfg.adam_beta2)
    if cfg.optimizer == "adam":  # foreach: the same numbers as torch's per-tensor loop, ~2.6x faster on CPU
        return torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, betas=betas, eps=cfg.adam_eps, foreach=True)
    if cfg.optimizer != "lamb":
        raise ValueError(f"optimizer must be 'adam' or 'lamb', got {cfg.optimizer!r}")
    params = [p for p in model.parameters() if p.requires_grad]
    plain = [p for p in params if no_trust_ratio(p)]
    trusted = [p for p in params if not no_trust_ratio(p)]
    groups = [
        {"params": trusted, "trust_ratio": True, "weight_decay": cfg.weight_decay},
        {"params": plain, "trust_ratio": False, "weight_decay": 0.0},
    ]
    return Lamb([g for g in groups if g["params"]], lr=cfg.learning_rate, betas=betas, eps=cfg.adam_eps)
