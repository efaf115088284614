"""Read learning curves side by side: each run's mean return at frame marks (linearly interpolated between its
per-minute rows) and at minute marks, from the CSVs that ``learning_curve.py`` and ``cleanrl_pong.py`` write.
Runs of different speeds compare per frame; runs on one host also per minute.

    python benchmarks/curve_marks.py benchmarks/results/pong_accumulate.csv --frames 1e6 2e6 3e6 --minutes 10 20
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path


def runs_of(paths: list[Path]) -> dict[str, list[dict[str, float]]]:
    """Each run's rows in minute order (minutes, env_frames, mean_return), from every file."""
    runs: dict[str, list[dict[str, float]]] = {}
    for path in paths:
        with path.open() as f:
            for row in csv.DictReader(f):
                point = {key: float(row[key]) for key in ("minutes", "env_frames", "mean_return")}
                runs.setdefault(row["run"], []).append(point)
    return {run: sorted(rows, key=lambda r: r["minutes"]) for run, rows in runs.items()}


def at(rows: list[dict[str, float]], key: str, mark: float) -> float:
    """The mean return where ``key`` (minutes or env_frames) reaches ``mark``, linear between the rows around it;
    NaN before the first row with a return and past the last row."""
    rows = [r for r in rows if not math.isnan(r["mean_return"])]
    for before, after in zip(rows, rows[1:], strict=False):
        if before[key] <= mark <= after[key]:
            span = after[key] - before[key]
            share = (mark - before[key]) / span if span else 1.0
            return before["mean_return"] + share * (after["mean_return"] - before["mean_return"])
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", type=Path, nargs="+")
    parser.add_argument("--runs", nargs="*", default=None, help="these runs only (default: every run)")
    parser.add_argument("--frames", type=float, nargs="*", default=[])
    parser.add_argument("--minutes", type=float, nargs="*", default=[])
    args = parser.parse_args()
    runs = runs_of(args.csv)
    for run in args.runs or sorted(runs):
        rows = runs[run]
        marks = [f"{m / 1e6:g}M frames {at(rows, 'env_frames', m):+.1f}" for m in args.frames]
        marks += [f"{m:g} min {at(rows, 'minutes', m):+.1f}" for m in args.minutes]
        last = rows[-1]
        print(
            f"{run}: "
            + ", ".join(
                [
                    *marks,
                    f"last {last['minutes']:g} min {last['env_frames'] / 1e6:.2f}M frames {last['mean_return']:+.1f}",
                ]
            )
        )


if __name__ == "__main__":
    main()
