"""Self-play in one file: PPO trains a connect four policy against itself and its past snapshots.

Your own training loop, CleanRL style, built from vecfast's self-play pieces without ``vecfast.train()``:

* ``vector_env_from(connect_four_v3, M)``: M matches as one ``TurnBasedVectorEnv`` of 2M agent slots (slot
  ``2m + a`` is agent ``a`` of match ``m``). Only the agent to move acts, so the loop drives it with ``recv``
  (the slots whose turn it is) and ``send`` (their moves). A slot's reward comes at its next turn, after the
  opponent's reply, so each slot keeps its own list of moves, and a move is complete when that turn arrives.
  A game's end is reported to both slots; the action they send back only resets the match (gymnasium's
  NEXT_STEP autoreset), so it is stored nowhere.
* ``ActorCritic`` acts (``model.step``) and learns; its action head masks illegal moves with
  ``observation["action_mask"]``.
* ``SnapshotPool`` with ``Elo``: each game's opponent is the latest policy (80%) or a frozen past snapshot
  (20%), one taken every ``--snapshot-every`` updates. Against a snapshot the learner takes one seat, first
  and second mover in turn, learns from its own moves only, and the result rates it; against itself it
  plays, and learns from, both seats.
* At the end ``play_games`` plays whole games (seats alternated) against a uniformly random player, the
  initial policy and a bot that looks one move ahead.

A population of learners would add ``vecfast.selfplay.PBTController`` after each update (its decision says
whether this learner copies a better one's weights, and its new hyperparameters); one learner has no one
to compare with, so it is left out.

    python examples/selfplay_loop.py --total-steps 200000 --seed 1
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from pettingzoo.classic import connect_four_v3
from torch import nn

from vecfast.multiagent.from_pettingzoo import vector_env_from
from vecfast.selfplay import Elo, SnapshotPool, one_ply_connect_four, random_bot
from vecfast.selfplay.matches import play_games
from vecfast.trainers import ActorCritic, TrainConfig
from vecfast.trainers.algorithm.models import obs_to_tensors


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--total-steps", type=int, default=200_000, help="agent moves, both seats of every match")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--num-matches", type=int, default=32)
    p.add_argument("--num-steps", type=int, default=32, help="recv/send rounds per rollout (a move per match each)")
    p.add_argument("--snapshot-every", type=int, default=10, help="updates between snapshots")
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--eval-games", type=int, default=100, help="games against each yardstick at the end")
    return p.parse_args(argv)


@dataclass
class Move:
    """One of the learner's moves; ``done`` is None until the slot's next turn tells how it went."""

    obs: dict[str, torch.Tensor]
    action: torch.Tensor
    log_prob: torch.Tensor
    value: float
    reward: float = 0.0
    done: bool | None = None
    next_value: float = 0.0  # the value of the observation after it; 0 once the game is over


def forward(model: ActorCritic, obs: dict[str, torch.Tensor]) -> tuple[Any, torch.Tensor]:
    """Action distribution and value of a batch: the model is feedforward, so every row stands on its own."""
    n = len(obs["action_mask"])
    dist, value, _ = model.step(obs, model.initial_state(n), torch.ones(n, dtype=torch.bool))
    return dist, value


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # batches of a few dozen boards: more threads only wait on each other

    env = vector_env_from(connect_four_v3, args.num_matches)  # a TurnBasedVectorEnv
    # the board (6x7x2 int8 planes) goes through two 3x3 convolutions that keep its size, then one layer of 128
    cfg = TrainConfig.from_overrides(
        use_rnn=False, encoder_conv_mlp_layers=(128,), nonlinearity="relu", normalize_input=False,
        normalize_returns=False,
    )  # fmt: skip

    def new_model() -> ActorCritic:
        return ActorCritic(env.single_observation_space, env.single_action_space, cfg)

    model = new_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate, eps=1e-5)
    elo = Elo()
    pool = SnapshotPool(model, new_model, snapshot_every_updates=args.snapshot_every, elo=elo, seed=args.seed)
    initial = pool.snapshot(0)  # the untrained policy: an early opponent, and a yardstick at the end

    # Who plays each match's current game: the drawn opponent, and the seat the learner takes against a snapshot.
    opponents = [pool.draw() for _ in range(env.num_matches)]
    learner_seat = np.arange(env.num_matches) % 2

    def player(slot: int) -> str:
        """Who plays ``slot`` in its match's current game: the learner (``pool.name``) or a snapshot."""
        match, seat = divmod(slot, env.num_agents)
        opponent = opponents[match]
        return pool.name if opponent.latest or seat == learner_seat[match] else opponent.name

    moves: list[list[Move]] = [[] for _ in range(env.num_envs)]  # each slot's moves, in order
    global_step, update, illegal_moves, start_time = 0, 0, 0, time.time()
    env.async_reset(seed=args.seed)

    while global_step < args.total_steps:
        # ------------------------------------------------------------------ rollout
        model.eval()
        for _ in range(args.num_steps):
            obs_np, rewards, terminated, truncated, info = env.recv()
            slots, ended = info["env_id"], terminated | truncated
            obs = obs_to_tensors(obs_np, "cpu")
            players = np.array([player(slot) for slot in slots.tolist()])
            mine = players == pool.name
            actions = np.zeros(len(slots), np.int64)  # an ended slot's action only resets its match
            with torch.no_grad():
                rows = np.flatnonzero(mine)
                if len(rows):
                    dist, values = forward(model, {k: v[rows] for k, v in obs.items()})
                    sampled = dist.sample()
                    log_probs = dist.log_prob(sampled)
                    actions[rows] = sampled.numpy()
                for snapshot in set(players[~mine].tolist()):  # a batch per frozen snapshot
                    theirs = np.flatnonzero(players == snapshot)
                    actions[theirs] = pool.model(snapshot).act({k: v[theirs] for k, v in obs_np.items()})
            for j, i in enumerate(rows.tolist()):
                history = moves[slots[i]]
                if history and history[-1].done is None:  # this turn tells how the slot's last move went
                    last = history[-1]
                    last.reward, last.done = float(rewards[i]), bool(ended[i])
                    last.next_value = 0.0 if terminated[i] else float(values[j])
                if not ended[i]:
                    history.append(Move({k: v[i] for k, v in obs.items()}, sampled[j], log_probs[j], float(values[j])))
            illegal_moves += int((~obs_np["action_mask"][np.arange(len(slots)), actions].astype(bool) & ~ended).sum())
            global_step += int((~ended).sum())

            # A game is over: score it for the learner, then draw the match's next opponent and switch seats.
            for i in np.flatnonzero(ended):
                match, seat = divmod(int(slots[i]), env.num_agents)
                if seat == learner_seat[match]:
                    pool.record(opponents[match].name, 1.0 if rewards[i] > 0 else 0.5 if rewards[i] == 0 else 0.0)
                    opponents[match] = pool.draw()
                    learner_seat[match] = 1 - seat
            env.send(actions, slots)

        # ------------------------------------------------------------------ GAE over each slot's complete moves
        # A move still waiting for its outcome is learned from in the next rollout, with the log-probability it was
        # sampled with (PPO's ratio is against the policy that acted).
        batch: list[Move] = []
        advantages: list[float] = []
        for slot, history in enumerate(moves):
            complete = history if not history or history[-1].done is not None else history[:-1]
            moves[slot] = history[len(complete) :]
            advantage, slot_advantages = 0.0, []
            for move in reversed(complete):  # the recursion stops where a game ends
                delta = move.reward + args.gamma * move.next_value - move.value
                advantage = delta + args.gamma * args.gae_lambda * (not move.done) * advantage
                slot_advantages.append(advantage)
            batch += complete
            advantages += reversed(slot_advantages)
        b_obs = {k: torch.stack([m.obs[k] for m in batch]) for k in batch[0].obs}
        b_actions = torch.stack([m.action for m in batch])
        b_log_probs = torch.stack([m.log_prob for m in batch])
        b_values = torch.tensor([m.value for m in batch])
        b_advantages = torch.tensor(advantages)
        b_returns = b_advantages + b_values

        # ------------------------------------------------------------------ PPO update (CleanRL's)
        model.train()
        for _ in range(args.update_epochs):
            for mb in torch.randperm(len(batch)).chunk(args.num_minibatches):
                dist, new_value = forward(model, {k: v[mb] for k, v in b_obs.items()})
                ratio = (dist.log_prob(b_actions[mb]) - b_log_probs[mb]).exp()
                mb_adv = b_advantages[mb]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(-mb_adv * ratio, -mb_adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef))
                v_clipped = b_values[mb] + (new_value - b_values[mb]).clamp(-args.clip_coef, args.clip_coef)
                v_loss = 0.5 * torch.max((new_value - b_returns[mb]) ** 2, (v_clipped - b_returns[mb]) ** 2).mean()
                loss = pg_loss.mean() - args.ent_coef * dist.entropy().mean() + args.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                optimizer.step()
        update += 1
        snapshot = pool.on_update(update)  # every --snapshot-every updates, or once it beats the snapshots
        print(
            f"update={update}, agent_steps={global_step}, SPS={int(global_step / (time.time() - start_time))}, "
            f"moves_learned={len(batch)}, elo={elo.rating(pool.name):.0f}, snapshots={len(pool.snapshots)}"
            + (f" (new: {snapshot.name}, {snapshot.reason})" if snapshot else ""),
            flush=True,
        )
    env.close()

    # ---------------------------------------------------------------------- evaluation: whole games, seats alternated
    model.eval()
    print(f"illegal moves in training: {illegal_moves}")
    for row in elo.table():
        print(f"  {row.a} vs {row.b}: {row.wins} wins / {row.draws} draws / {row.losses} losses")
    results = {"update": update, "elo": elo, "pool": pool, "illegal_moves": illegal_moves}
    # The policies sample their moves: two deterministic ones would replay the same two games, and an untrained
    # policy's most likely move is often one column, which stacks up four against a random player in 2/3 of games.
    yardsticks = {
        "random": random_bot(args.seed),
        "initial": pool.model(initial.name),
        "one_ply": one_ply_connect_four(args.seed),
    }
    for name, opponent in yardsticks.items():
        games = play_games(model, opponent, connect_four_v3.env, args.eval_games, args.seed, deterministic=False)
        results[name] = games
        print(
            f"vs {name}: win {games.win_rate:.2f}, draw {games.draw_rate:.2f}, loss {games.loss_rate:.2f} "
            f"({games.games} games)",
            flush=True,
        )
    return results


if __name__ == "__main__":
    main()
