"""CleanRL's PPO on Pong on this machine, for the same wall time as vecfast's curve: the peer of issue 45's Pong figure.

    python benchmarks/cleanrl_pong.py --seed 1 --minutes 60 --total-timesteps 1000000

CleanRL's own script (``ppo_atari_envpool.py`` of the ``cleanrl`` 1.2.0 wheel from PyPI, fetched into
``--cache``, never committed) runs as published but for the lines that move it from gym's API to the gymnasium
API of EnvPool 1.2 (:data:`GYMNASIUM_API`, each applied exactly once or the run stops): the env is made with
``env_type="gymnasium"``, ``reset`` returns ``(obs, info)``, ``step`` returns terminations and truncations, and the
vector spaces the script reads are set on its wrapper, not on EnvPool's env, where they are read-only properties
already (gymnasium 1's wrappers do not forward attributes). Its
hyperparameters are its defaults (8 envs, 128 steps, 4 epochs, lr 2.5e-4 annealed to 0 over ``--total-timesteps``):
give it the steps it reaches in ``--minutes`` here, so that its rate anneals over the same hour as vecfast's.

Each finished game the script prints (``global_step=..., episodic_return=...``, whole games: its env's lives
are episodes) is stamped with the wall time since the script started; after ``--minutes`` it is stopped, and one
row per minute goes to ``--csv``: its env steps and frames by then and the mean return of its last 100 games, as
``benchmarks/learning_curve.py`` writes vecfast's. CleanRL's script keeps no checkpoint, so a curve is one sitting:
start it early in a session.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
import zipfile
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import append_row, host, rows_of  # noqa: E402

CSV = Path(__file__).parent / "results" / "cleanrl_pong.csv"
COLUMNS = ["run", "env", "algo", "minutes", "env_steps", "env_frames", "mean_return", "eval_return", "host"]
WHEEL = "cleanrl==1.2.0"
SCRIPT = "cleanrl/ppo_atari_envpool.py"
FRAMESKIP = 4  # EnvPool's Atari default, which the script keeps
GYMNASIUM_API = [  # (as published, as run here): gym's API to EnvPool 1.2's gymnasium API, nothing else
    ("import gym\n", "import gymnasium as gym\n"),
    ('env_type="gym",', 'env_type="gymnasium",'),
    ("observations = super().reset(**kwargs)", "observations, _ = super().reset(**kwargs)"),
    (
        "observations, rewards, dones, infos = super().step(action)",
        "observations, rewards, terminations, truncations, infos = super().step(action)\n"
        "        dones = terminations | truncations",
    ),
    (  # EnvPool 1.2 has these already, read-only; the wrapper needs its own (gymnasium 1's do not forward)
        "    envs.num_envs = args.num_envs\n"
        "    envs.single_action_space = envs.action_space\n"
        "    envs.single_observation_space = envs.observation_space\n"
        "    envs = RecordEpisodeStatistics(envs)\n",
        "    envs = RecordEpisodeStatistics(envs)\n"
        "    envs.single_action_space, envs.single_observation_space = envs.action_space, envs.observation_space\n",
    ),
]
GAME = re.compile(r"global_step=(\d+), episodic_return=\[?(-?[\d.]+)")


def cleanrl_script(cache: Path) -> Path:
    """CleanRL's script with :data:`GYMNASIUM_API` applied, in ``cache`` (its wheel fetched there once)."""
    patched = cache / "ppo_atari_envpool_gymnasium.py"
    if patched.exists():
        return patched
    cache.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache.glob("cleanrl-*.whl"))
    if not wheels:  # the wheel says it wants Python < 3.11; its scripts run on 3.11
        subprocess.run(
            [sys.executable, "-m", "pip", "download", WHEEL, "--no-deps", "--only-binary=:all:"]
            + ["--python-version", "3.10", "-d", str(cache)],
            check=True,
        )
        wheels = sorted(cache.glob("cleanrl-*.whl"))
    source = zipfile.ZipFile(wheels[-1]).read(SCRIPT).decode()
    for published, here in GYMNASIUM_API:
        if source.count(published) != 1:
            raise SystemExit(f"{SCRIPT} has {source.count(published)} copies of {published!r}: not the script expected")
        source = source.replace(published, here)
    patched.write_text(source)
    return patched


def play(
    script: Path, seed: int, minutes: float, total_timesteps: int, workdir: Path
) -> list[tuple[float, int, float]]:
    """Run the script for ``minutes``: each finished game as (seconds since start, global step, return)."""
    workdir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(script.resolve()), "--seed", str(seed), "--total-timesteps", str(total_timesteps)]
    command += ["--cuda", "False"]
    games: list[tuple[float, int, float]] = []
    start = shown = time.monotonic()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(command, cwd=workdir, stdout=subprocess.PIPE, text=True, env=env) as run:
        assert run.stdout is not None
        try:
            for line in run.stdout:
                elapsed = time.monotonic() - start
                if elapsed > minutes * 60:
                    break
                found = GAME.search(line)
                if found:
                    games.append((elapsed, int(found[1]), float(found[2])))
                elif line.startswith("SPS:") and time.monotonic() - shown > 60:
                    shown = time.monotonic()
                    print(f"{elapsed / 60:5.1f} min  {line.strip()}  games {len(games)}", flush=True)
        finally:
            run.terminate()
    if run.returncode not in (0, -15) or not games and time.monotonic() - start < minutes * 60:
        raise SystemExit(f"CleanRL's script stopped with exit code {run.returncode} after {len(games)} games")
    return games


def minute_rows(run: str, games: list[tuple[float, int, float]], minutes: float) -> list[dict]:
    """One row per whole minute: the steps of the last game by then and the mean return of the last 100 games."""
    rows, last, window, i = [], (0, float("nan")), deque(maxlen=100), 0
    for minute in range(1, int(minutes) + 1):
        while i < len(games) and games[i][0] <= minute * 60:
            last = games[i][1:]
            window.append(games[i][2])
            i += 1
        mean = sum(window) / len(window) if window else float("nan")
        rows.append({
            "run": run, "env": "Pong-v5 (EnvPool)", "algo": "cleanrl_ppo", "minutes": float(minute),
            "env_steps": last[0], "env_frames": last[0] * FRAMESKIP, "mean_return": mean, "eval_return": float("nan"),
            "host": host(),
        })  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--total-timesteps", type=int, required=True, help="its learning rate anneals over these")
    parser.add_argument("--cache", type=Path, default=Path("runs/peers/cleanrl"), help="the wheel and the script")
    parser.add_argument("--run", default=None, help="the rows' run name (default cleanrl_pong_s<seed>)")
    parser.add_argument("--csv", type=Path, default=CSV)
    args = parser.parse_args()
    run = args.run or f"cleanrl_pong_s{args.seed}"
    if rows_of(args.csv, run):
        raise SystemExit(f"{args.csv} has rows of {run} already: name another --run")
    script = cleanrl_script(args.cache)
    games = play(script, args.seed, args.minutes, args.total_timesteps, args.cache / run)
    for row in minute_rows(run, games, args.minutes):
        append_row(args.csv, COLUMNS, row)
        print(row, flush=True)


if __name__ == "__main__":
    main()
