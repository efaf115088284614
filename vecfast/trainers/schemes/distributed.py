"""The distributed scheme, DD-PPO (Wijmans et al. 2020): the synchronous scheme in every rank of a
torch.distributed run, decentralised (no parameter server).

Each rank steps its own envs with its own copy of the policy and learns from its own rollout;
``DistributedDataParallel`` averages the gradients, so the copies stay identical (step counts,
advantage and normaliser statistics are summed over the ranks too: :mod:`vecfast.trainers.base.collective`).
A synchronous step waits for the slowest rank, so stragglers are preempted: once ``sync_frac``
of the ranks have finished their rollout, the others end theirs early, provided they have
``min_rollout_fraction`` of it, and learn from the shorter rollout as it is.
"""

from __future__ import annotations

import math
import secrets
from typing import Any

import torch.distributed as dist
from gymnasium.vector import VectorEnv
from torch.nn.parallel import DistributedDataParallel

from vecfast.trainers.algorithm.models import ActorCritic
from vecfast.trainers.base import collective
from vecfast.trainers.config import TrainConfig
from vecfast.trainers.protocols import AlgorithmFactory
from vecfast.trainers.sampling.acting_plan import PlanFactory, single_policy
from vecfast.trainers.schemes.synchronous import SyncTrainer


class DistributedActorCritic(DistributedDataParallel):
    """An :class:`ActorCritic` whose ``evaluate`` (its ``forward``) runs through DDP, so that the backward pass
    averages gradients over the ranks; every other attribute is the model's own."""

    def evaluate(self, *args: Any, **kwargs: Any) -> Any:
        return self(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "module":
                raise
            return getattr(self.module, name)


def learn_through_ddp(model: ActorCritic) -> ActorCritic:
    """Wrap ``model`` for learning. DDP copies rank 0's parameters and buffers to every rank once; after that
    the normalisers' statistics stay equal by all-reducing their updates, so no buffer is re-sent per forward.

    DDP gets a process group of its own: its reducer never lets go of its group (torch 2.13), whose threads then
    outlive ``destroy_process_group`` and may still be releasing the run's last collective when the interpreter
    exits, which aborts the rank. The run's own group, used by everything else, ends with the run."""
    device_ids = [model.critic.weight.device] if model.critic.weight.is_cuda else None
    return DistributedActorCritic(  # type: ignore[return-value]
        model, device_ids=device_ids, forward_sync_buffers=False, process_group=dist.new_group()
    )


class Preemption:
    """Ends a rollout early once ``sync_frac`` of the ranks have finished theirs (after ``min_steps`` of it).

    The count of finished rollouts lives in torch.distributed's store, under a key per rollout
    (no reset to race with), prefixed by a token that rank 0 draws for this run.
    """

    def __init__(self, world_size: int, sync_frac: float, min_steps: int) -> None:
        token = [secrets.token_hex(4) if dist.get_rank() == 0 else None]
        dist.broadcast_object_list(token)  # one prefix for all ranks, a new one for a restarted run
        self.store = dist.PrefixStore(f"vecfast/rollouts/{token[0]}/", dist.distributed_c10d._get_default_store())
        self.needed = sync_frac * world_size
        self.min_steps = min_steps
        self.rollouts = 0
        self.key = ""

    def begin(self) -> None:
        self.key = str(self.rollouts)
        if self.rollouts >= 2:  # every rank has learned from that one: nobody reads its count again
            self.store.delete_key(str(self.rollouts - 2))
        self.rollouts += 1

    def stop_early(self, steps: int) -> bool:
        return steps >= self.min_steps and self.store.add(self.key, 0) >= self.needed

    def finished(self) -> None:
        self.store.add(self.key, 1)


class DistributedTrainer(SyncTrainer):
    """One rank of a DD-PPO run: needs the process group its launch set up (:mod:`vecfast.trainers.run.launch`).

    Self-play runs in every rank: each rank's league draws its own opponents, and the match results are gathered
    before the books take them, so the Elo ratings and snapshots are the job's (and the ranks' learners stay equal).
    """

    def __init__(
        self,
        env: VectorEnv,
        algorithm: AlgorithmFactory,
        cfg: TrainConfig,
        total_env_steps: int,
        *,
        plan: PlanFactory = single_policy,
    ) -> None:
        if cfg.num_policies > 1:
            raise ValueError(
                f"num_policies={cfg.num_policies}: populations train under the sync and async schemes (algo='ppo' "
                "or 'appo'); DD-PPO's ranks would each learn every policy from different numbers of steps"
            )
        if not dist.is_initialized():
            raise RuntimeError(
                "the distributed scheme runs in the ranks of a distributed launch: vecfast.train(..., "
                "num_processes=N), or `torchrun --nproc_per_node=N -m vecfast train ...`"
            )
        world = collective.world_size()
        preemption = Preemption(world, cfg.sync_frac, math.ceil(cfg.min_rollout_fraction * cfg.rollout))
        super().__init__(
            env, algorithm, cfg, total_env_steps, plan=plan, learn_with=learn_through_ddp, rollout_end=preemption
        )
