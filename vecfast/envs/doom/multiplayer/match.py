"""One networked Doom match between learning agents, as a PettingZoo ParallelEnv.

The match is a :class:`~vecfast.envs.doom.multiplayer.matches.DoomMatchesVectorEnv` of one match
(each player's game in its own worker process, stepped in lockstep, restarted as a whole on
failure), seen through PettingZoo's API: vecfast plays multiplayer Doom through that one
implementation, whether one match at a time or many in a trainer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from vecfast.envs.doom.multiplayer.matches import DoomMatchesVectorEnv
from vecfast.envs.doom.multiplayer.player import MatchNetwork

__all__ = ["DoomMatch"]

_SLOT_INFOS = ("agent_id", "match_id", "active")  # the vector env's slot bookkeeping, not the player's


class DoomMatch(ParallelEnv):
    """A deathmatch between ``num_agents`` learning agents (``player_0`` hosts).

    ``num_bots`` built-in bots join the match (the host adds them at the start of each
    match). Each agent's observation and action space are those of the single-player
    full-game env; rewards use its shaping (``reward_shaping``) per agent. Players respawn,
    so agents never terminate: all are truncated at ``timelimit_minutes``. ``infos[agent]``
    carries the raw figures (frags, deaths, damage dealt and taken, hits) every step and, at
    the end of a match, ``"outcome"`` (``"win"``: most frags alone, ``"draw"``: most, tied,
    or ``"loss"``, among the learning agents) and ``"true_objective"`` (1.0 for an outright
    win, else 0.0; the agent's frags when bots play).

    A player process that dies, or a match whose games stop answering for ``timeout``
    seconds, is torn down (its processes killed) and started again (in a fresh network, or
    on a fresh port): that step returns every agent ``truncated=True`` with
    ``infos[agent]["match_restarted"]`` (the reason) and the next ``reset`` plays the new
    match. A host that cannot start (its port was taken meanwhile) is retried likewise, up
    to ``max_start_attempts`` times. ``network_isolation``: see
    :class:`~vecfast.envs.doom.multiplayer.matches.DoomMatchesVectorEnv`.

    Quiet: the games' network handshake (some 30 lines a duel) is dropped, or appended to the
    file the environment variable ``VECFAST_ENV_LOG`` names (a training run's ``env.log``);
    ``VECFAST_VERBOSE=1`` leaves it on the terminal. What a game prints that is not chatter
    (an error) still reaches stderr (:mod:`vecfast.chatter`).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 35, "is_parallelizable": True}

    def __init__(
        self,
        wad: str,
        name: str,
        num_agents: int = 2,
        num_bots: int = 0,
        frame_skip: int = 2,
        timelimit_minutes: float = 4.0,
        resolution: tuple[int, int] = (128, 72),
        reward_shaping: dict[str, float] | None = None,
        render_mode: str | None = None,
        timeout: float = 20.0,
        max_start_attempts: int = 5,
        network_isolation: bool | None = None,
    ) -> None:
        self.match = DoomMatchesVectorEnv(
            wad,
            1,
            num_agents,
            timeout=timeout,
            max_start_attempts=max_start_attempts,
            network_isolation=network_isolation,
            num_bots=num_bots,
            frame_skip=frame_skip,
            timelimit_minutes=timelimit_minutes,
            resolution=resolution,
            reward_shaping=reward_shaping,
            render_mode=render_mode,
        )
        self.possible_agents = list(self.match.possible_agents)
        self.agents: list[str] = []
        self.metadata = {**DoomMatch.metadata, "name": name}
        self.render_mode = render_mode
        self._last_obs: dict[str, Any] = {}

    @property
    def network(self) -> MatchNetwork:
        return self.match.network

    @property
    def port(self) -> int:
        """The UDP port the host of the match now running listens on."""
        return self.match.ports[0]

    @property
    def restarts(self) -> int:
        """Times the match was torn down and started again."""
        return len(self.match.restarts)

    def observation_space(self, agent: str) -> spaces.Space:
        return self.match.single_observation_space

    def action_space(self, agent: str) -> spaces.Space:
        return self.match.single_action_space

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        obs, infos = self.match.reset(seed=seed, options=options)
        self.agents = list(self.possible_agents)
        return self._per_agent_obs(obs), self._per_agent_infos(infos)

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if not self.agents:
            raise RuntimeError("the match is over: call reset()")
        batch = np.stack([np.asarray(actions[agent]) for agent in self.possible_agents])
        obs, rewards, terminated, truncated, infos = self.match.step(batch)
        agents = self.agents
        if "match_restarted" in infos:
            self.agents = []
            reason = infos["match_restarted"][0]
            return (
                self._last_obs,
                dict.fromkeys(agents, 0.0),
                dict.fromkeys(agents, False),
                dict.fromkeys(agents, True),
                {agent: {"match_restarted": reason} for agent in agents},
            )
        over = bool(terminated.any() or truncated.any())  # a networked match ends for all at once
        result = (
            self._per_agent_obs(obs),
            {agent: float(rewards[i]) for i, agent in enumerate(agents)},
            dict.fromkeys(agents, False),
            dict.fromkeys(agents, over),
            self._per_agent_infos(infos),
        )
        if over:
            self.agents = []
        return result

    def render(self) -> np.ndarray | None:
        """The host's last full-resolution frame."""
        return self.match.render()[0]

    def close(self) -> None:
        self.match.close()

    def _per_agent_obs(self, obs: dict[str, np.ndarray]) -> dict[str, Any]:
        self._last_obs = {agent: {key: value[i] for key, value in obs.items()} for i, agent in enumerate(self.agents)}
        return self._last_obs

    def _per_agent_infos(self, infos: dict[str, Any]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {agent: {} for agent in self.possible_agents}
        for key, value in infos.items():
            if key.startswith("_") or key in _SLOT_INFOS:
                continue
            for i in np.flatnonzero(infos[f"_{key}"]).tolist():
                entry = value[i]
                out[self.possible_agents[i]][key] = entry.item() if isinstance(entry, np.generic) else entry
        return out
