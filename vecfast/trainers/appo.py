"""APPO in Sample Factory's design: asynchronous sampling, central batched inference, a V-trace + PPO learner.

Three activities overlap: the vector env's worker processes step envs (two groups each,
double-buffered), the policy-worker thread acts for whichever half of the envs is ready
(:mod:`vecfast.trainers.sampler`), and the learner (the caller's thread) takes
``batch_size`` samples of finished trajectories, which a batcher thread gathers in the
background while the learner works on the previous batch. Data acted on by an older
policy is corrected with V-trace (rho_bar = c_bar = 1) and the PPO clipped objective;
how old it was (the policy lag, in learner steps) is measured on every batch.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import torch
from gymnasium.vector import VectorEnv

from vecfast.trainers.config import TrainConfig
from vecfast.trainers.learner import Learner
from vecfast.trainers.models import ActorCritic
from vecfast.trainers.ppo import check_next_step_autoreset
from vecfast.trainers.registry import register_algo
from vecfast.trainers.runtime import setup_torch
from vecfast.trainers.sampler import POLL_SECONDS, PolicyWorker
from vecfast.trainers.storage import Trajectories


class Batcher(threading.Thread):
    """Copies ``trajectories`` finished slots into one contiguous batch and frees the slots."""

    def __init__(self, worker: PolicyWorker, trajectories: int) -> None:
        super().__init__(name="vecfast-batcher", daemon=True)
        self.worker = worker
        self.trajectories = trajectories
        self.batches: queue.Queue[Trajectories] = queue.Queue(maxsize=1)
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                taken: list[int] = []
                while len(taken) < self.trajectories:
                    try:
                        taken.append(self.worker.full.get(timeout=POLL_SECONDS))
                    except queue.Empty:
                        if self.stop_event.is_set():
                            return
                index = torch.tensor(taken, device=self.worker.device)
                batch = self.worker.slots.select(index)
                for i in taken:
                    self.worker.free.put(i)
                while not self.stop_event.is_set():
                    try:
                        self.batches.put(batch, timeout=POLL_SECONDS)
                        break
                    except queue.Full:
                        continue
        except BaseException as e:  # handed to the learner, which raises it
            self.error = e


class APPOTrainer:
    """Asynchronous PPO over a vector env with ``send``/``recv`` (any VectorEnv works, without overlap)."""

    def __init__(self, env: VectorEnv, cfg: TrainConfig, total_env_steps: int) -> None:
        check_next_step_autoreset(env)
        self.cfg, self.total_env_steps = cfg, total_env_steps
        self.device = setup_torch(cfg)
        self.model = ActorCritic(env.single_observation_space, env.single_action_space, cfg).to(self.device)
        self.learner = Learner(self.model, cfg)
        batch = self.learner.minibatch * cfg.num_batches_per_epoch
        # each env fills one slot; one batch is being gathered while the next fills up
        num_slots = env.num_envs + 2 * batch
        self.worker = PolicyWorker(env, self.model, cfg.rollout, num_slots, cfg.seed, cfg.stats_avg)
        self.batcher = Batcher(self.worker, batch)
        self._started = False

    def iterations(self) -> Iterator[dict[str, float]]:
        worker = self.worker
        worker.publish(self.model, self.learner.version)
        if not self._started:
            self._started = True
            worker.start()
            self.batcher.start()
        start = time.perf_counter()
        steps_at_start = worker.env_steps
        while True:
            wait_start = time.perf_counter()
            batch = self._next_batch()
            learn_start = time.perf_counter()
            lag = (self.learner.version - batch.policy_version[batch.valid]).float()
            learned = self.learner.learn(
                batch,
                worker.env_steps / self.total_env_steps,
                after_step=lambda: worker.publish(self.model, self.learner.version),
            )
            now = time.perf_counter()
            yield {
                "env_steps": worker.env_steps,
                "fps": (worker.env_steps - steps_at_start) / (now - start),
                **learned,
                "policy_lag_min": lag.min().item() if len(lag) else 0.0,
                "policy_lag_avg": lag.mean().item() if len(lag) else 0.0,
                "policy_lag_max": lag.max().item() if len(lag) else 0.0,
                "time_learner_waiting": learn_start - wait_start,
                "time_learning": now - learn_start,
                "time_envs": worker.time_waiting_envs,
                "time_inference": worker.time_inference,
                "time_sampler_waiting_slots": worker.time_waiting_slots,
                "full_trajectories": worker.full.qsize(),
                **worker.episodes.summary(),
            }

    def _next_batch(self) -> Trajectories:
        while True:
            for thread in (self.worker, self.batcher):
                if thread.error is not None:  # its own type, so that callers can catch what the env raised
                    error, thread.error = thread.error, None
                    error.add_note(f"raised in APPO's {thread.name} thread")
                    raise error
            try:
                return self.batcher.batches.get(timeout=POLL_SECONDS)
            except queue.Empty:
                continue

    def state_dict(self) -> dict[str, Any]:
        return self.learner.trainer_state(self.worker.env_steps)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.worker.env_steps = self.learner.load_trainer_state(state)
        self.worker.publish(self.model, self.learner.version)

    def close(self) -> None:
        """Stop the policy worker and the batcher (the env stays open: its owner closes it)."""
        self.batcher.stop_event.set()
        self.worker.stop_event.set()
        for thread in (self.batcher, self.worker):
            if thread.is_alive():
                thread.join()


register_algo("appo", APPOTrainer, double_buffered=True)
