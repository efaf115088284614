"""A learning curve over wall-clock minutes, grown in resumable chunks: ``vecfast train ENV`` for ``--chunk-minutes``
at a time (at most 40), resuming the run in ``--run-dir``, until its training time reaches ``--total-minutes``.

The run's time bound is the whole curve's: the first sitting gets ``--total-minutes`` (a resumed one what is
left), and each is stopped by SIGTERM after its chunk (the run saves a final checkpoint), so a schedule that follows
training time (the learning rate's linear decay, issue 45) spans the curve, not each chunk.

After each chunk, one row per minute of training that the file lacks goes to ``--csv``: the run's env steps and
frames, the mean return of its latest episodes and its latest evaluation (``eval_every_env_steps``), from its
``metrics.jsonl``, with the CPU it ran on. Minutes count the chunks end to end. Issue 37's Pong figure:

    python benchmarks/learning_curve.py ALE/Pong-v5 --algo appo --run-dir runs/pong_appo --chunk-minutes 30 \\
        --total-minutes 60 --set eval_every_env_steps=250000 --set eval_episodes=8

``--env-kwarg KEY=VALUE`` sets the env's keyword arguments (``repeat_action_probability=0.0``: no sticky actions).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import append_row, host, parse_overrides, rows_of  # noqa: E402

from vecfast.command_line import add_env_kwarg_option  # noqa: E402

CSV = Path(__file__).parent / "results" / "learning_curve.csv"
COLUMNS = ["run", "env", "algo", "minutes", "env_steps", "env_frames", "mean_return", "eval_return", "host"]
MAX_CHUNK_MINUTES = 40.0


def sittings(run_dir: Path) -> list[dict]:
    """The run's metrics records, each with ``minutes``: its training time with the sittings before it (a resumed
    sitting's clock restarts at 0)."""
    records, offset, last_time = [], 0.0, 0.0
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["time"] < last_time:  # a new sitting
            offset += last_time
        last_time = record["time"]
        records.append({**record, "minutes": (offset + record["time"]) / 60})
    return records


def minute_rows(run: str, env: str, algo: str, records: list[dict], after: float) -> list[dict]:
    """One row per whole minute past ``after``: the newest record by then, with the newest mean return (a resumed
    sitting has none until its first episodes end) and the newest evaluation."""
    rows, latest_return, latest_eval = [], float("nan"), float("nan")
    next_minute = int(after) + 1
    for record in records:
        if record.get("mean_episode_return") is not None:
            latest_return = record["mean_episode_return"]
        latest_eval = record.get("eval/mean_return", latest_eval)
        while record["minutes"] >= next_minute:
            rows.append({
                "run": run, "env": env, "algo": algo, "minutes": float(next_minute),
                "env_steps": record["env_steps"], "env_frames": record["env_frames"],
                "mean_return": latest_return, "eval_return": latest_eval,
                "host": host(),
            })  # fmt: skip
            next_minute += 1
    return rows


def sit(command: list[str], seconds: float | None) -> None:
    """Run ``command`` (a training run) for ``seconds`` of wall time at most (None: until it ends), then stop it as
    a user would, with SIGTERM: it finishes its iteration and saves a checkpoint that the next sitting resumes."""
    with subprocess.Popen(command) as run:
        try:
            code = run.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            run.send_signal(signal.SIGTERM)
            code = run.wait()
            if code in (-signal.SIGTERM, 128 + signal.SIGTERM):
                code = 0  # stopped where we asked it to
    if code != 0:
        raise subprocess.CalledProcessError(code, command)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("env")
    parser.add_argument("--algo", default="appo")
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--chunk-minutes", type=float, default=MAX_CHUNK_MINUTES)
    parser.add_argument("--total-minutes", type=float, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config key of the run")
    add_env_kwarg_option(parser, "the run's first sitting; a resumed run keeps its own")
    parser.add_argument("--csv", type=Path, default=CSV)
    args = parser.parse_args()
    run = args.run_dir.name
    done = sittings(args.run_dir)[-1]["minutes"] if (args.run_dir / "metrics.jsonl").exists() else 0.0
    remaining = args.total_minutes - done
    chunk = min(args.chunk_minutes, MAX_CHUNK_MINUTES, remaining)
    if chunk > 0:
        command = [sys.executable, "-m", "vecfast", "train"]
        if (args.run_dir / "metrics.jsonl").exists():
            command += ["--resume", str(args.run_dir)]
        else:
            command += [args.env, "--algo", args.algo, "--run-dir", str(args.run_dir), "--seed", str(args.seed)]
            for key, value in parse_overrides(args.set).items():
                command += [f"--{key}", str(value)]
            for item in args.env_kwarg:
                command += ["--env-kwarg", f"{item[0]}={item[1]!r}"]
        command += ["--total-env-steps", str(10**10), "--train_for_seconds", str(remaining * 60), "--no-live"]
        sit(command, None if chunk >= remaining else chunk * 60)  # the last sitting ends at the run's own bound
    measured = [float(row["minutes"]) for row in rows_of(args.csv, run)]
    for row in minute_rows(run, args.env, args.algo, sittings(args.run_dir), max(measured, default=0.0)):
        append_row(args.csv, COLUMNS, row)
        print(row, flush=True)


if __name__ == "__main__":
    main()
