"""How often an exported policy (ONNX through onnxruntime, TorchScript through ``torch.jit.load``) chooses the
trained policy's own deterministic action, on real observations of the run's env (issue 37's figure: >= 99% of
512, for CartPole trained by PPO and DoomBasic by APPO). One row per run and format goes to ``--csv`` at once.

    python benchmarks/export_agreement.py runs/cartpole_ppo runs/doombasic_calm --observations 512
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import append_row, host  # noqa: E402

from vecfast.trainers.run.evaluation import run_env  # noqa: E402
from vecfast.trainers.tools.export import agreement, export_run  # noqa: E402

CSV = Path(__file__).parent / "results" / "export_agreement.csv"
COLUMNS = ["run", "algo", "scheme", "env", "env_steps", "format", "equal", "observations", "fraction", "host"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--observations", type=int, default=512)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--csv", type=Path, default=CSV)
    args = parser.parse_args()
    for run_dir in args.run_dirs:
        config = json.loads((run_dir / "config.json").read_text())
        for fmt, suffix in (("onnx", ".onnx"), ("torchscript", ".pt")):
            with tempfile.TemporaryDirectory() as tmp:
                model = export_run(run_dir, Path(tmp) / f"policy{suffix}", fmt)
                env = run_env(run_dir).build(args.num_envs)
                try:
                    result = agreement(model, Path(tmp) / f"policy{suffix}", env, args.observations)
                finally:
                    env.close()
            steps = max(int(p.stem.removeprefix("last_")) for p in (run_dir / "checkpoints").glob("last_*.pt"))
            row = {
                "run": run_dir.name, "algo": config["algo"], "scheme": config["scheme"], "env": config["env"],
                "env_steps": steps,
                "format": fmt, "equal": result.equal, "observations": result.observations,
                "fraction": result.fraction, "host": host(),
            }  # fmt: skip
            append_row(args.csv, COLUMNS, row)
            print(row, flush=True)


if __name__ == "__main__":
    main()
