"""Forward + backward time per batch of the image encoders: convnet_simple (the default) against se_resnet9
(Large Batch Simulation's SE-ResNet9 with Fixup), at PointNav's 64x64.

Each is the whole :class:`vecfast.trainers.algorithm.models.ConvEncoder` (input scaling and normalisation,
convolutions, the ``encoder_conv_mlp_layers`` MLP) on a batch of channels-last images: depth
(1 channel, float32 metres, as PointNav's) and RGB (3 channels, uint8). A step is forward, a loss,
backward, as in a gradient step (the default batch, 256, is a DD-PPO minibatch of 8 trajectories
of 32 steps). The encoders run in interleaved rounds (every case once per round, ``--repeats``
steps each), so that load from other jobs on the machine falls on all of them alike; the table
shows the median over all timed steps and each encoder's time over convnet_simple's; se_resnet9 runs
at each ``--base-channels`` (its first stage's width: the paper's 64, and narrower ones for CPUs).

    python benchmarks/encoder_speed.py                          # 5 rounds, batch 256, CPU, 1 thread
    python benchmarks/encoder_speed.py --rounds 3 --json encoders.json
    python benchmarks/encoder_speed.py --device cuda --batch-size 1024
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vecfast.trainers.algorithm.models import ConvEncoder
from vecfast.trainers.algorithm.numerics import native_bf16
from vecfast.trainers.config import TrainConfig

BASELINE = "convnet_simple"
INPUTS = {"depth": (1, np.float32), "rgb": (3, np.uint8)}  # name: (channels, dtype)


def architectures(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The encoders compared, by name: the baseline, then se_resnet9 at each ``--base-channels``."""
    resnets = {
        f"se_resnet9/{b}": {"encoder_conv_architecture": "se_resnet9", "encoder_base_channels": b}
        for b in args.base_channels
    }
    return {BASELINE: {"encoder_conv_architecture": BASELINE}, **resnets}


def make_case(
    arch: dict[str, Any], channels: int, dtype: Any, args: argparse.Namespace
) -> tuple[ConvEncoder, torch.Tensor]:
    cfg = TrainConfig.from_overrides(**arch, encoder_conv_mlp_layers=tuple(args.mlp), encoder_bf16=args.bf16)
    encoder = ConvEncoder((args.size, args.size, channels), cfg, dtype).to(args.device)
    shape = (args.batch_size, args.size, args.size, channels)
    pixels = dtype == np.uint8
    images = torch.randint(0, 256, shape, dtype=torch.uint8) if pixels else torch.rand(shape) * 10.0  # metres
    encoder.update_norm(images[:64].to(args.device))
    return encoder, images.to(args.device)


def step(encoder: ConvEncoder, images: torch.Tensor) -> None:
    encoder.zero_grad(set_to_none=True)
    encoder(images).square().mean().backward()


def timed_steps(encoder: ConvEncoder, images: torch.Tensor, repeats: int, device: str) -> list[float]:
    times = []
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        step(encoder, images)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=256, help="images per step (default 256)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--repeats", type=int, default=2, help="timed steps per case and round (default 2)")
    parser.add_argument("--size", type=int, default=64, help="image height and width (default 64)")
    parser.add_argument("--mlp", type=int, nargs="*", default=[512], help="encoder_conv_mlp_layers (default 512)")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1, as torch_threads)")
    parser.add_argument("--bf16", choices=["auto", "on", "off"], default="auto", help="encoder_bf16 (default auto)")
    parser.add_argument(
        "--base-channels", type=int, nargs="+", default=[64, 32, 16], help="se_resnet9 widths (default 64 32 16)"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    args.bf16 = {"auto": "auto", "on": True, "off": False}[args.bf16]
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device_type = torch.device(args.device).type
    bf16 = native_bf16(device_type) if args.bf16 == "auto" else args.bf16

    archs = architectures(args)
    cases = {
        (name, arch): make_case(settings, channels, dtype, args)
        for name, (channels, dtype) in INPUTS.items()
        for arch, settings in archs.items()
    }
    for encoder, images in cases.values():  # warm-up: allocator, oneDNN / cuDNN choices
        step(encoder, images)
    times: dict[tuple[str, str], list[float]] = {key: [] for key in cases}
    for _ in range(args.rounds):
        for key, (encoder, images) in cases.items():
            times[key] += timed_steps(encoder, images, args.repeats, args.device)

    medians = {key: statistics.median(t) for key, t in times.items()}
    params = {key: sum(p.numel() for p in enc.parameters()) for key, (enc, _) in cases.items()}
    print(
        f"forward + backward per batch of {args.batch_size} {args.size}x{args.size} images on {args.device} "
        f"({args.threads} thread{'s' * (args.threads != 1)}, bf16 {'on' if bf16 else 'off'}), "
        f"median of {args.rounds} rounds x {args.repeats} steps\n"
    )
    print("| input | encoder | ms per step | vs convnet_simple | parameters |")
    print("|---|---|---:|---:|---:|")
    results: dict[str, Any] = {}
    for name in INPUTS:
        base = medians[(name, BASELINE)]
        for arch in archs:
            key = (name, arch)
            print(f"| {name} | {arch} | {medians[key] * 1e3:.1f} | {medians[key] / base:.1f}x | {params[key]:,} |")
            results[f"{name} {arch}"] = {
                "median_seconds": medians[key],
                "seconds": times[key],
                "params": params[key],
                "vs_convnet_simple": medians[key] / base,
            }
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k != "json"}
        report = {"settings": {**settings, "bf16": bf16, "torch": torch.__version__}, "results": results}
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
