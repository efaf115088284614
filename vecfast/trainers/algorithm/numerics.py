"""Where floating point goes wrong in training, and what vecfast does about it.

- bfloat16: the conv encoder runs under bf16 autocast where the device computes it natively
  (:func:`native_bf16`). oneDNN's bf16 weight-gradient kernel (torch 2.13 on CPUs with AVX512-BF16/AMX)
  returns uninitialised memory, NaN or values ~1e35, for a strided convolution whose kernel is larger than
  its input on a side, so that some of its taps read only padding: SE-ResNet9's last blocks on a 16x16
  image (4x4 after space-to-depth, then 4, 2, 1, 1) are 3x3 convolutions with stride 2 on a 1x1 map.
  Measured over inputs of 1-8 pixels a side, kernels 1/3/5 and strides 1-3, every such failure had a kernel
  larger than its input, and none otherwise. :func:`conv2d` runs those convolutions in float32; they are
  tiny, so this costs nothing measurable.
- Non-finite numbers: an update whose gradient is not finite is refused before it reaches the weights
  (:func:`check_gradient`, :func:`refusing_non_finite`; the running statistics refuse such values too), and
  action logits that are not finite stop acting (:func:`check_logits`), each with :class:`NonFiniteError`
  rather than a sampling error from inside torch after the weights are lost.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F


class NonFiniteError(FloatingPointError):
    """A loss, gradient or the policy's action logits hold NaN or infinity; training stops before the
    weights take them, so the run's final checkpoint holds the weights from before."""


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


def kernel_exceeds_input(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether the kernel is taller or wider than the (unpadded) input: some of its taps read only padding."""
    return x.shape[-2] < weight.shape[-2] or x.shape[-1] < weight.shape[-1]


def conv2d(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: int | tuple[int, ...],
    padding: int | tuple[int, ...] | str,
) -> torch.Tensor:
    """``F.conv2d``, in float32 where autocast is on and the kernel exceeds the input (see the module's note)."""
    if kernel_exceeds_input(x, weight) and torch.is_autocast_enabled(x.device.type):
        with torch.autocast(x.device.type, enabled=False):
            return F.conv2d(x.float(), weight.float(), None if bias is None else bias.float(), stride, padding)
    return F.conv2d(x, weight, bias, stride, padding)


class Conv2d(nn.Conv2d):
    """``nn.Conv2d`` (zero padding) through :func:`conv2d`."""

    def _conv_forward(self, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        if self.padding_mode != "zeros":
            raise ValueError(f"padding_mode={self.padding_mode!r}: only zero padding is supported")
        return conv2d(input, weight, bias, self.stride, self.padding)


def check_gradient(grad_norm: float, losses: Mapping[str, float]) -> None:
    """Raise :class:`NonFiniteError` unless ``grad_norm`` (the gradient's norm, before clipping) is finite;
    ``losses``, the step's loss terms, are named in the message."""
    if math.isfinite(grad_norm):
        return
    terms = ", ".join(f"{name} {value:.4g}" for name, value in losses.items())
    raise NonFiniteError(f"the gradient is not finite (norm {grad_norm}; {terms})")


@contextlib.contextmanager
def refusing_non_finite(update: Callable[[], int]) -> Iterator[None]:
    """A :class:`NonFiniteError` raised inside, named by the update it stopped (``update()``: 1 for the first)."""
    try:
        yield
    except NonFiniteError as error:
        raise NonFiniteError(
            f"update {update()}: {error}; the update was not applied. Rewards or observations that are not finite, "
            "or a learning rate too high, are the usual causes"
        ) from None


def check_logits(params: torch.Tensor) -> None:
    """Raise :class:`NonFiniteError` if the actor's outputs (logits, or a Gaussian's means) are not all finite."""
    finite = torch.isfinite(params)
    if bool(finite.all()):
        return
    rows = finite.reshape(-1, params.shape[-1]).all(-1)
    raise NonFiniteError(
        f"the policy's action logits are not finite for {int((~rows).sum())} of {rows.numel()} observations: "
        "a non-finite observation, or weights loaded from a checkpoint that holds NaN"
    )
