"""Draw a results CSV that grows across sessions (benchmarks/results/*.csv) as a PNG: columns against columns, one
line per run.

    python benchmarks/plot_csv.py benchmarks/results/pointnav_curve.csv --x env_frames minutes \\
        --y success_sampled success_deterministic spl_sampled spl_deterministic \\
        --out benchmarks/results/figures/pointnav_curve.png
    python benchmarks/plot_csv.py benchmarks/results/selfplay_connect_four.csv --x minutes env_steps \\
        --y win_vs_initial win_vs_one_ply --out benchmarks/results/figures/selfplay_connect_four.png

    python benchmarks/plot_csv.py benchmarks/results/selfplay_doom_duel.csv --x minutes env_steps --y frags \
        --by policy --out benchmarks/results/figures/selfplay_doom_duel_frags.png
    python benchmarks/plot_csv.py benchmarks/results/learning_curves_cartpole_ppo.csv \
        benchmarks/results/learning_curves_cartpole_ddppo.csv --x env_steps time --y mean_episode_return --median \
        --target 475 --out benchmarks/results/figures/cartpole_seeds.png

One panel per ``--x`` column; every ``--y`` column is drawn in it for each run (the ``run`` column; with ``--by
COLUMN``, for each run and value of that column, such as a population's ``policy``), with ``--target VALUE`` as a
dashed line. Several files: each file's runs in a colour of its own; ``--median`` draws them thin with their median
bold (the seeds of one configuration, as ``vecfast plot`` draws run directories). Needs matplotlib (the ``plot``
extra).
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path
from typing import Any


def read(path: Path, by: str | None = None) -> dict[str, list[dict[str, float]]]:
    """The file's rows by run (and by column ``by``'s value), numbers as floats (NaN where a cell is empty or not a
    number), in file order."""
    runs: dict[str, list[dict[str, float]]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            line = row.get("run", path.stem) + (f" {by}={row[by]}" if by is not None else "")
            runs.setdefault(line, []).append({k: _number(v) for k, v in row.items()})
    return runs


def _number(text: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", type=Path, nargs="+")
    parser.add_argument("--x", nargs="+", required=True, help="one panel per column")
    parser.add_argument("--y", nargs="+", required=True)
    parser.add_argument("--by", help="a line per run and value of this column too (a population's policy)")
    parser.add_argument("--target", type=float, action="append", default=[], help="a dashed horizontal line")
    parser.add_argument("--median", action="store_true", help="each file's runs thin, their median bold")
    parser.add_argument("--title")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = {path.stem: read(path, args.by) for path in args.csv}
    runs = {
        f"{stem}/{run}" if len(files) > 1 else run: rows for stem, file in files.items() for run, rows in file.items()
    }
    fig, axes = plt.subplots(1, len(args.x), figsize=(5.5 * len(args.x), 4), squeeze=False)
    styles = ["-", "--", ":", "-."]
    for ax, x in zip(axes[0], args.x, strict=True):
        if args.median:
            for f, (stem, file) in enumerate(files.items()):
                _draw_with_median(ax, stem, file, x, args.y, f"C{f}")
        for r, (run, rows) in enumerate(runs.items() if not args.median else ()):
            ordered = sorted(rows, key=lambda row: row[x])
            for y, style in zip(args.y, styles * len(args.y), strict=False):
                ax.plot(
                    [row[x] for row in ordered],
                    [row[y] for row in ordered],
                    style,
                    marker="o",
                    markersize=3,
                    color=f"C{r}",
                    label=f"{run}: {y}" if len(runs) > 1 else y,
                )
        for value in args.target:
            ax.axhline(value, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xlabel(x)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(args.title or ", ".join(files))
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=100)
    print(f"wrote {args.out}: {', '.join(args.y)} of {len(runs)} run(s)")


def _draw_with_median(ax: Any, name: str, runs: dict[str, list[dict[str, float]]], x: str, ys: list[str], colour: str):
    """``runs`` (one file's: the seeds of one configuration) thin, and their median over the x range all of them
    cover bold (:func:`vecfast.trainers.tools.plot.median_curve`), labelled with the file's name and seed count."""
    import numpy as np

    from vecfast.trainers.tools.plot import median_curve

    for y in ys:
        curves = []
        for rows in runs.values():
            kept = sorted((row for row in rows if not (math.isnan(row[x]) or math.isnan(row[y]))), key=lambda r: r[x])
            curve = (np.array([row[x] for row in kept]), np.array([row[y] for row in kept]))
            ax.plot(*curve, color=colour, linewidth=0.6, alpha=0.35)
            curves.append(curve)
        median = median_curve(curves)
        if median is not None:
            label = f"{name} ({len(runs)} seeds)" + (f": {y}" if len(ys) > 1 else "")
            ax.plot(median.x, median.y, color=colour, linewidth=median.width, label=label)


if __name__ == "__main__":
    main()
