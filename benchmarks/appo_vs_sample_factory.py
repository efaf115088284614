"""APPO on DoomBasic: vecfast against Sample Factory 2.1.1, same settings, interleaved in one run.

    python benchmarks/appo_vs_sample_factory.py --sf-python SF_VENV/bin/python --rounds 3 --seconds 90

Sample Factory 2.1.1 needs gymnasium < 1.0, so it runs from its own venv (``--sf-python``; ``pip install torch==2.13.0
sample-factory==2.1.1 "gymnasium<1.0" vizdoom`` there). Each round trains vecfast's APPO on ``vecfast/DoomBasic-v0``
and Sample Factory's ``sf_examples.vizdoom.train_vizdoom --env=doom_basic`` for ``--seconds`` each, the order
alternating between rounds, with the issue's settings on both (2 workers x 8 envs, rollout 32, batch 512, each side's
default conv + GRU 512 model for Doom, CPU). Both are measured the same way: env frames (frame skip 4 counted) per
second over the last ``--window`` seconds of the run, from each one's own log (vecfast's ``metrics.jsonl``, Sample
Factory's "Total num frames" reports), so neither side's start-up counts. One row per run goes to ``--csv``; the
summary prints the median of each side and the median of the per-round ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import re
import signal
import statistics
import subprocess
import tempfile
import threading
from pathlib import Path

from common import append_row
from train_appo import ENV_ID, SETTINGS

from vecfast.trainers import train
from vecfast.trainers.tools.plot import read_metrics

CSV = Path(__file__).parent / "results" / "appo_vs_sample_factory.csv"
COLUMNS = ["round", "library", "seconds", "window_s", "env_frames", "frames_per_s"]
# "[2026-11-26 12:00:05,123][01234] Fps is (10 sec: ...). Total num frames: 40960. Throughput: ..."
SF_REPORT = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\].*Total num frames: (\d+)\.")


def window_rate(points: list[tuple[float, int]], window: float) -> float:
    """Frames per second between the last point and the last point at least ``window`` seconds before it."""
    end_time, end_frames = points[-1]
    start = [p for p in points if p[0] <= end_time - window]
    if not start:
        raise RuntimeError(f"the run logged less than {window} s of training: lengthen --seconds")
    start_time, start_frames = start[-1]
    return (end_frames - start_frames) / (end_time - start_time)


def vecfast_run(seconds: float, window: float, run_dir: Path) -> tuple[float, int]:
    """vecfast's APPO for ``seconds``: frames/s over the last ``window`` s, and the frames collected."""
    train(
        ENV_ID,
        algo="appo",
        total_env_steps=10**12,
        run_dir=run_dir,
        train_for_seconds=seconds,
        **SETTINGS,
    )
    points = [(m["time"], m["env_frames"]) for m in read_metrics(run_dir)]
    return window_rate(points, window), points[-1][1]


def sample_factory_run(python: str, seconds: float, window: float, train_dir: Path) -> tuple[float, int]:
    """Sample Factory's APPO on doom_basic for ``seconds``, measured as :func:`vecfast_run` is.

    Sample Factory 2.1.1 ignores ``--train_for_seconds`` (its runner never advances ``total_train_seconds``), so the
    run is stopped as a user stops it, with SIGINT to its main process, and its process group is killed after.
    A game that Sample Factory had not closed by then can leave a ``/dev/shm/ViZDoomMQ*`` entry behind (seen: one
    in three runs)."""
    command = [
        python, "-m", "sf_examples.vizdoom.train_vizdoom", "--env=doom_basic", "--experiment=doom_basic",
        f"--train_dir={train_dir}", "--device=cpu", *(f"--{key}={value}" for key, value in SETTINGS.items()),
    ]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    points, tail, interrupted = [], [], False
    kill_group = threading.Timer(60.0, os.killpg, (process.pid, signal.SIGKILL))  # a shutdown that hangs
    try:
        assert process.stdout is not None
        for line in process.stdout:  # a report every 5 s; read on to the end, so that its shutdown never blocks
            tail = [*tail[-40:], line]
            match = SF_REPORT.search(line)
            if interrupted or not match:
                continue
            when = datetime.datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            points.append((when, int(match[2])))
            if points[-1][0] - points[0][0] >= seconds:  # from its first report
                process.send_signal(signal.SIGINT)
                kill_group.start()
                interrupted = True
        process.wait()
    finally:
        kill_group.cancel()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # its VizDoom games, should any outlive it
    if not points:
        raise RuntimeError("no 'Total num frames' report in Sample Factory's output:\n" + "".join(tail))
    return window_rate(points, window), points[-1][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sf-python", required=True, help="the python of a venv with sample-factory 2.1.1")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=90.0, help="training time of each run")
    parser.add_argument("--window", type=float, default=60.0, help="frames/s over the run's last WINDOW seconds")
    parser.add_argument("--csv", type=Path, default=CSV)
    args = parser.parse_args()
    rates: dict[str, list[float]] = {"vecfast": [], "sample_factory": []}
    for round_ in range(args.rounds):
        order = ["vecfast", "sample_factory"] if round_ % 2 == 0 else ["sample_factory", "vecfast"]
        for library in order:
            with tempfile.TemporaryDirectory() as tmp:
                if library == "vecfast":
                    rate, frames = vecfast_run(args.seconds, args.window, Path(tmp) / "run")
                else:
                    rate, frames = sample_factory_run(args.sf_python, args.seconds, args.window, Path(tmp))
            rates[library].append(rate)
            row = {"round": round_, "library": library, "seconds": args.seconds, "window_s": args.window,
                   "env_frames": frames, "frames_per_s": rate}  # fmt: skip
            append_row(args.csv, COLUMNS, row)
            print(f"round {round_} {library:>14}: {rate:,.0f} env frames/s ({frames:,} frames)", flush=True)
    ratios = [v / s for v, s in zip(rates["vecfast"], rates["sample_factory"], strict=True)]
    summary = {name: statistics.median(values) for name, values in rates.items()}
    summary["ratio_median"], summary["ratio_worst"] = statistics.median(ratios), min(ratios)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
