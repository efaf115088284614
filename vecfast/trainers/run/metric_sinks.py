"""Where a run's numbers and videos go besides ``metrics.jsonl``: TensorBoard's event files, and Weights & Biases.

Each sink takes the same records :class:`~vecfast.trainers.run.run_dir.RunDir` appends (their numbers, against
``env_steps``) and the same videos, and opens on the first of them, so that a run that fails before its first
iteration leaves no files of theirs.
"""

from __future__ import annotations

import numbers
import os
import secrets
import time
from pathlib import Path
from typing import Any, Protocol

from tensorboardX import SummaryWriter
from tensorboardX.proto.summary_pb2 import Summary

from vecfast.extras import require

WANDB_ID_FILE = "wandb_run_id"  # a resumed run goes on in the same W&B run


def numbers_of(metrics: dict[str, Any]) -> dict[str, float]:
    """The numbers of a record (its env steps, the x axis, apart)."""
    return {
        key: float(value) for key, value in metrics.items() if key != "env_steps" and isinstance(value, numbers.Real)
    }


class MetricSink(Protocol):
    def log(self, metrics: dict[str, Any]) -> None: ...

    def video(self, path: Path, gif: bytes, size: tuple[int, int], env_steps: int) -> None:
        """``path``: the episode's mp4 in the run dir; ``gif``: the same (fewer frames, maybe), ``size`` (w, h)."""

    def close(self) -> None: ...


class TensorBoardEvents:
    """``RUN_DIR/events.out.tfevents.*``, through tensorboardX's public writer.

    ``resumed_at``: the env steps of the checkpoint a resumed run starts from; TensorBoard then drops what the
    previous session logged after it (purge_step), so the curves go on from it without a doubled stretch.
    """

    def __init__(self, path: Path, resumed_at: int | None) -> None:
        self.path, self.resumed_at = path, resumed_at
        self._writer: SummaryWriter | None = None

    def _open(self) -> SummaryWriter:
        if self._writer is None:
            purge_step = None if self.resumed_at is None else self.resumed_at + 1
            # tensorboardX names the file by the second it opens it: a resumed sitting that starts within the same
            # second would overwrite the last sitting's file. Nanoseconds keep the names apart and in order.
            unique = f".{time.time_ns():020d}.{os.getpid()}"
            self._writer = SummaryWriter(str(self.path), purge_step=purge_step, filename_suffix=unique)
        return self._writer

    def log(self, metrics: dict[str, Any]) -> None:
        writer = self._open()
        # one event for all the numbers: add_scalar per number costs ~100 us each, in the learner's thread
        values = [Summary.Value(tag=key, simple_value=value) for key, value in numbers_of(metrics).items()]
        writer.file_writer.add_summary(Summary(value=values), int(metrics["env_steps"]))
        writer.flush()  # a live `tensorboard --logdir` sees every iteration

    def video(self, path: Path, gif: bytes, size: tuple[int, int], env_steps: int) -> None:
        """As TensorBoard holds videos: an animated gif in an image summary (its Images tab plays it)."""
        width, height = size
        image = Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=gif)
        writer = self._open()
        writer.file_writer.add_summary(Summary(value=[Summary.Value(tag="video", image=image)]), env_steps)
        writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


class WeightsAndBiases:
    """A W&B run under ``RUN_DIR/wandb``: every record's numbers against ``env_steps``, the run's config, and
    its videos (as mp4s). Sample Factory's options: ``with_wandb``, ``wandb_user``, ``wandb_project``,
    ``wandb_group``, ``wandb_tags``. ``WANDB_MODE=offline`` keeps it on disk (``wandb sync`` uploads it later).

    A resumed run goes on in the same W&B run (its id is in ``RUN_DIR/wandb_run_id``); records logged after the
    checkpoint it resumes from appear twice there, as W&B keeps every row it was sent.
    """

    def __init__(self, path: Path, config: dict[str, Any], cfg: Any) -> None:
        self.path, self.config, self.cfg = path, config, cfg
        self.wandb = require("wandb", "with_wandb")
        self._run: Any = None

    def _open(self) -> Any:
        if self._run is None:
            id_file = self.path / WANDB_ID_FILE
            run_id = id_file.read_text().strip() if id_file.exists() else secrets.token_hex(4)
            id_file.write_text(run_id + "\n")
            self._run = self.wandb.init(
                id=run_id,
                resume="allow",
                dir=os.fspath(self.path),
                name=self.path.name,
                entity=self.cfg.wandb_user,
                project=self.cfg.wandb_project,
                group=self.cfg.wandb_group,
                tags=list(self.cfg.wandb_tags),
                config=self.config,
                settings=self.wandb.Settings(console="off", x_disable_stats=True, silent=True),
            )
            self._run.define_metric("env_steps")
            self._run.define_metric("*", step_metric="env_steps")
        return self._run

    def log(self, metrics: dict[str, Any]) -> None:
        self._open().log({"env_steps": int(metrics["env_steps"]), **numbers_of(metrics)})

    def video(self, path: Path, gif: bytes, size: tuple[int, int], env_steps: int) -> None:
        self._open().log({"env_steps": env_steps, "video": self.wandb.Video(os.fspath(path), format="mp4")})

    def close(self) -> None:
        if self._run is not None:
            self._run.finish()
            self._run = None
            self.wandb.teardown()  # its service process ends with the run, not at the interpreter's exit
