"""SE-ResNet9 with Fixup: the visual encoder of Large Batch Simulation (Shacklett et al. 2021).

ResNet18 with every other BasicBlock removed, as bps-nav's ``se_resnet9_fixup`` with the
``resnet_baseplanes: 64`` of its PointNav config:

- stem: space-to-depth (every 4x4 pixel block becomes 16 channels: C x H x W -> 16C x H/4 x W/4),
  then a 1x1 convolution to 64 channels and a ReLU;
- 4 stages of one block each, widths 64, 128, 256, 512 (:data:`WIDTHS`); the first keeps the
  resolution, the others halve it (stride 2 in the block's first 3x3 convolution; the shortcut
  then averages 3x3 with stride 2 and projects with a 1x1 convolution);
- squeeze-and-excitation (reduction 16) on every block's residual branch;
- no normalisation layers: Fixup (Zhang et al. 2019) instead, see :class:`FixupBasicBlock`.

A 64x64 image becomes 16x16 after the stem, then 16, 8, 4 and 2: a 512 x 2 x 2 map (2048
features). bps-nav compresses it with one more 3x3 convolution to 1024 features before its fully
connected layer; here :class:`vecfast.trainers.algorithm.models.ConvEncoder` flattens the map into its MLP
(``encoder_conv_mlp_layers``). The blocks use ReLU whatever ``nonlinearity`` says: Fixup's
scaling assumes it.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from vecfast.trainers.algorithm.numerics import Conv2d

WIDTHS = (64, 128, 256, 512)  # channels of the 4 stages (bps-nav's base planes 64, doubled per stage)
SPACE_TO_DEPTH = 4  # side of the pixel blocks that the stem turns into channels
SE_REDUCTION = 16


class SpaceToDepth(nn.Module):
    """C x H x W -> (C * b * b) x H/b x W/b: each b x b pixel block becomes channels (channel c's
    pixels go to channels c * b * b ... (c + 1) * b * b - 1, ``pixel_unshuffle``'s order)."""

    def __init__(self, block: int = SPACE_TO_DEPTH) -> None:
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        if h % self.block or w % self.block:
            raise ValueError(
                f"space-to-depth needs the image's height and width divisible by {self.block}, got {h}x{w}"
            )
        return F.pixel_unshuffle(x, self.block)


class SqueezeExcitation(nn.Module):
    """Channel weights in (0, 1) from the channels' spatial means: C -> C / r -> C (Hu et al. 2018)."""

    def __init__(self, channels: int, reduction: int = SE_REDUCTION) -> None:
        super().__init__()
        hidden = max(channels // reduction, 1)
        self.squeeze = nn.Linear(channels, hidden)
        self.excite = nn.Linear(hidden, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The weights, shaped (N, C, 1, 1) to multiply ``x`` with."""
        weights = torch.sigmoid(self.excite(torch.relu(self.squeeze(x.mean((2, 3))))))
        return weights[:, :, None, None]


class FixupBasicBlock(nn.Module):
    """ResNet's BasicBlock without normalisation: Fixup's scalar biases and multiplier, and SE.

    ``relu(se(branch) * branch + shortcut)`` with ``branch = conv2(relu(conv1(x + b1a) + b1b) + b2a)
    * scale + b2b``, and the shortcut ``x`` or, where the block changes the size, a 1x1 convolution
    of ``x + b1a`` (average-pooled first when the block strides). :meth:`fixup_init` zeroes conv2, so
    a fresh block is ``relu(shortcut(x))``: identity on a ReLU's output where the size is kept.
    """

    def __init__(self, in_channels: int, channels: int, stride: int = 1, reduction: int = SE_REDUCTION) -> None:
        super().__init__()
        self.fixup_bias1a = nn.Parameter(torch.zeros(1))
        self.fixup_bias1b = nn.Parameter(torch.zeros(1))
        self.fixup_bias2a = nn.Parameter(torch.zeros(1))
        self.fixup_scale = nn.Parameter(torch.ones(1))
        self.fixup_bias2b = nn.Parameter(torch.zeros(1))
        self.conv1 = Conv2d(in_channels, channels, 3, stride, padding=1, bias=False)
        self.conv2 = Conv2d(channels, channels, 3, padding=1, bias=False)
        self.se = SqueezeExcitation(channels, reduction)
        self.shortcut: nn.Sequential | None = None
        if stride != 1 or in_channels != channels:
            pool = [nn.AvgPool2d(3, stride, padding=1)] if stride != 1 else []
            self.shortcut = nn.Sequential(*pool, Conv2d(in_channels, channels, 1, bias=False))

    @torch.no_grad()
    def fixup_init(self, num_blocks: int) -> None:
        """Fixup for a network of ``num_blocks`` residual branches of m = 2 layers: He initialisation
        scaled by num_blocks ** (-1 / (2m - 2)) = num_blocks ** -0.5 for conv1, zero for conv2 (the
        branch's last layer), plain He for the shortcut's projection."""
        nn.init.kaiming_normal_(self.conv1.weight, mode="fan_out", nonlinearity="relu")
        self.conv1.weight.mul_(num_blocks**-0.5)
        nn.init.zeros_(self.conv2.weight)
        if self.shortcut is not None:
            nn.init.kaiming_normal_(self.shortcut[-1].weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.conv1(x + self.fixup_bias1a) + self.fixup_bias1b)
        out = self.conv2(out + self.fixup_bias2a) * self.fixup_scale + self.fixup_bias2b
        shortcut = x if self.shortcut is None else self.shortcut(x + self.fixup_bias1a)
        return torch.relu(out * self.se(out) + shortcut)


def se_resnet9(
    in_channels: int, widths: tuple[int, ...] = WIDTHS, reduction: int = SE_REDUCTION
) -> tuple[SpaceToDepth, nn.Conv2d, list[nn.Module]]:
    """The network in the three parts :class:`~vecfast.trainers.algorithm.models.ConvEncoder` composes:
    (space-to-depth, the stem's 1x1 convolution, the layers after it: ReLU and the blocks).

    The encoder folds the input's scale and normalisation into the stem's convolution (it has no
    padding, so that is exact); the stem is He-initialised for its inputs (fan in), the blocks by Fixup.
    """
    stem = Conv2d(in_channels * SPACE_TO_DEPTH**2, widths[0], 1, bias=False)
    nn.init.kaiming_normal_(stem.weight, mode="fan_in", nonlinearity="relu")
    blocks = []
    c = widths[0]
    for i, width in enumerate(widths):
        blocks.append(FixupBasicBlock(c, width, stride=1 if i == 0 else 2, reduction=reduction))
        c = width
    for block in blocks:
        block.fixup_init(len(blocks))
    return SpaceToDepth(), stem, [nn.ReLU(), *blocks]
