"""Draw a results CSV that grows across sessions (benchmarks/results/*.csv) as a PNG: columns against columns, one
line per run.

    python benchmarks/plot_csv.py benchmarks/results/pointnav_curve.csv --x env_frames minutes \\
        --y success_sampled success_deterministic spl_sampled spl_deterministic \\
        --out benchmarks/results/figures/pointnav_curve.png
    python benchmarks/plot_csv.py benchmarks/results/selfplay_connect_four.csv --x minutes env_steps \\
        --y win_vs_initial win_vs_one_ply --out benchmarks/results/figures/selfplay_connect_four.png

    python benchmarks/plot_csv.py benchmarks/results/selfplay_doom_duel.csv --x minutes env_steps --y frags \
        --by policy --out benchmarks/results/figures/selfplay_doom_duel_frags.png

One panel per ``--x`` column; every ``--y`` column is drawn in it for each run (the ``run`` column; with ``--by
COLUMN``, for each run and value of that column, such as a population's ``policy``), with ``--target VALUE`` as a
dashed line. Needs matplotlib (the ``plot`` extra).
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path


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
    parser.add_argument("csv", type=Path)
    parser.add_argument("--x", nargs="+", required=True, help="one panel per column")
    parser.add_argument("--y", nargs="+", required=True)
    parser.add_argument("--by", help="a line per run and value of this column too (a population's policy)")
    parser.add_argument("--target", type=float, action="append", default=[], help="a dashed horizontal line")
    parser.add_argument("--title")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = read(args.csv, args.by)
    fig, axes = plt.subplots(1, len(args.x), figsize=(5.5 * len(args.x), 4), squeeze=False)
    styles = ["-", "--", ":", "-."]
    for ax, x in zip(axes[0], args.x, strict=True):
        for r, (run, rows) in enumerate(runs.items()):
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
    fig.suptitle(args.title or args.csv.stem)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=100)
    print(f"wrote {args.out}: {', '.join(args.y)} of {len(runs)} run(s)")


if __name__ == "__main__":
    main()
