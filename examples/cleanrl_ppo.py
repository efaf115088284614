"""CleanRL-style single-file PPO (discrete actions) on gymnasium's vector API, sampled by vecfast.

The script is what you would write for ``gymnasium.make_vec``; the one line that differs
calls ``vecfast.make_vec`` instead (same signature). It follows CleanRL's ``ppo.py``
(same defaults) with one change that gymnasium 1.x calls for: vector envs reset a
finished env on the *next* ``step`` (``AutoresetMode.NEXT_STEP``, gymnasium's default),
so that step is not a real transition and is left out of the update, and a truncated
episode's last observation is right there to bootstrap from.

    python examples/cleanrl_ppo.py --env-id CartPole-v1 --num-envs 8 --total-timesteps 100000
"""

from __future__ import annotations

import argparse
import random
import time

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from torch import nn
from torch.distributions.categorical import Categorical

import vecfast


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env-id", default="CartPole-v1")
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--total-timesteps", type=int, default=500_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--vectorization-mode",
        default=None,
        help="None: the env's batched implementation if it has one (CartPole has), else vecfast's "
        "shared-memory workers; or 'shared_memory', 'async', 'sync', 'vector_entry_point'",
    )
    p.add_argument("--torch-deterministic", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--learning-rate", type=float, default=2.5e-4)
    p.add_argument("--anneal-lr", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--num-steps", type=int, default=128, help="steps per env per rollout")
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--norm-adv", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--clip-vloss", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--target-kl", type=float, default=None)
    args = p.parse_args(argv)
    args.batch_size = args.num_envs * args.num_steps
    args.num_iterations = max(1, args.total_timesteps // args.batch_size)
    return args


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_size: int, num_actions: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_size, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_size, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, num_actions), std=0.01),
        )

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(
        self, x: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        probs = Categorical(logits=self.actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    # The only change from the gymnasium version: `vecfast.make_vec` instead of `gym.make_vec`.
    envs = vecfast.make_vec(args.env_id, num_envs=args.num_envs, vectorization_mode=args.vectorization_mode)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    assert isinstance(envs.single_action_space, gym.spaces.Discrete), "only discrete action spaces are supported"
    assert envs.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP) == AutoresetMode.NEXT_STEP
    print(f"{args.env_id}: {args.num_envs} envs in {type(envs.unwrapped).__name__}", flush=True)

    obs_size = int(np.prod(envs.single_observation_space.shape))
    agent = Agent(obs_size, int(envs.single_action_space.n)).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    shape = (args.num_steps, args.num_envs)
    obs = torch.zeros(shape + (obs_size,), device=device)
    actions = torch.zeros(shape, dtype=torch.long, device=device)
    logprobs = torch.zeros(shape, device=device)
    rewards = torch.zeros(shape, device=device)
    terminations = torch.zeros(shape, device=device)
    dones = torch.zeros(shape, device=device)  # terminated or truncated
    valid = torch.zeros(shape, dtype=torch.bool, device=device)  # False: the step only reset the env
    values = torch.zeros(shape, device=device)

    global_step = 0
    start_time = time.time()
    next_obs_np, _ = envs.reset(seed=args.seed)
    next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32, device=device).reshape(args.num_envs, -1)
    autoreset = np.zeros(args.num_envs, dtype=bool)

    for iteration in range(1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs
            valid[step] = torch.as_tensor(~autoreset, device=device)
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
            values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            next_obs_np, reward, terminated, truncated, infos = envs.step(action.cpu().numpy())
            autoreset = terminated | truncated
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            terminations[step] = torch.as_tensor(terminated, dtype=torch.float32, device=device)
            dones[step] = torch.as_tensor(autoreset, dtype=torch.float32, device=device)
            next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32, device=device).reshape(args.num_envs, -1)
            if "episode" in infos:
                for i in np.flatnonzero(infos["_episode"]):
                    ret, length = infos["episode"]["r"][i], infos["episode"]["l"][i]
                    print(f"global_step={global_step}, episodic_return={ret:.1f}, episodic_length={length}")

        # GAE. With next-step autoreset, obs[t + 1] after an episode end is its last
        # observation: bootstrap from it unless the episode terminated, and stop the
        # recursion there (the next step belongs to the new episode).
        with torch.no_grad():
            next_value = agent.get_value(next_obs).flatten()
            advantages = torch.zeros_like(rewards)
            lastgaelam = torch.zeros(args.num_envs, device=device)
            for t in reversed(range(args.num_steps)):
                following = next_value if t == args.num_steps - 1 else values[t + 1]
                delta = rewards[t] + args.gamma * following * (1.0 - terminations[t]) - values[t]
                lastgaelam = delta + args.gamma * args.gae_lambda * (1.0 - dones[t]) * lastgaelam
                advantages[t] = lastgaelam
            returns = advantages + values

        keep = valid.reshape(-1)
        b_obs = obs.reshape(-1, obs_size)[keep]
        b_logprobs = logprobs.reshape(-1)[keep]
        b_actions = actions.reshape(-1)[keep]
        b_advantages = advantages.reshape(-1)[keep]
        b_returns = returns.reshape(-1)[keep]
        b_values = values.reshape(-1)[keep]

        b_inds = np.arange(len(b_obs))
        clipfracs = []
        for _ in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for mb_inds in np.array_split(b_inds, args.num_minibatches):
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs.append(((ratio - 1.0).abs() > args.clip_coef).float().mean().item())

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(
                        newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef
                    )
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

                loss = pg_loss - args.ent_coef * entropy.mean() + v_loss * args.vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        sps = int(global_step / (time.time() - start_time))
        print(
            f"iteration={iteration}/{args.num_iterations}, SPS={sps}, value_loss={v_loss.item():.3f}, "
            f"policy_loss={pg_loss.item():.3f}, approx_kl={approx_kl.item():.4f}, clipfrac={np.mean(clipfracs):.3f}",
            flush=True,
        )

    envs.close()


if __name__ == "__main__":
    main()
