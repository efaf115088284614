"""The batched PointGoal navigation simulator: state, dynamics, rewards and metrics of N envs as tensors.

Both the vector env and the single env drive this class, so their dynamics are the same
code. Every per-step operation is a fixed sequence of tensor ops over the batch; Python
loops run only over scene groups, and only when a group changes scene.

Envs are split into groups of ``max_envs_per_scene``; a group shares one scene. After a
group has started ``rotation_episodes`` episodes on its scene, the next scene of the
dataset is installed in a free place and each env of the group moves to it when its episode
ends; the old place is released once no env is left on it. Which scene and which episode an
env gets depends only on the seed, the actions and the episode counts, never on timing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from vecfast.envs.nav.assets import SceneBank
from vecfast.envs.nav.renderer import BatchRenderer, SceneBatch
from vecfast.envs.nav.scenes import SceneIndex

STOP, MOVE_FORWARD, TURN_LEFT, TURN_RIGHT = 0, 1, 2, 3
_M32 = 0xFFFFFFFF


@dataclass(frozen=True)
class NavConfig:
    """Task settings, Habitat's PointNav defaults."""

    forward_step: float = 0.25
    turn_degrees: float = 10.0
    success_distance: float = 0.2
    success_reward: float = 2.5
    slack_reward: float = -0.01
    max_episode_steps: int = 500
    width: int = 64
    height: int = 64
    hfov_deg: float = 90.0
    camera_height: float = 0.88
    max_depth: float = 10.0
    rgb: bool = False


@dataclass
class StepResult:
    """What one ``act`` call produced, per env."""

    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    success: torch.Tensor
    collided: torch.Tensor


def _mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (stays below 2**63 in int64 arithmetic, so it is exact on any device)."""
    x = ((x >> 16) ^ x) * 0x45D9F3B & _M32
    x = ((x >> 16) ^ x) * 0x45D9F3B & _M32
    return (x >> 16) ^ x


class NavSim:
    """``num_envs`` PointNav agents in shared resident scenes, stepped and rendered as one batch."""

    def __init__(
        self,
        num_envs: int,
        index: SceneIndex,
        max_envs_per_scene: int = 32,
        rotation_episodes: int | None = None,
        scene_seed: int = 0,
        config: NavConfig | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        self.num_envs = n = num_envs
        self.config = cfg = config or NavConfig()
        self.device = dev = torch.device(device)
        self.group_size = max_envs_per_scene
        self.num_groups = math.ceil(n / max_envs_per_scene)
        num_scenes = len(index.files)
        self.rotating = num_scenes > self.num_groups
        self.rotation_episodes = rotation_episodes or 4 * max_envs_per_scene
        # One spare place receives a group's next scene while the group's envs finish their episodes on the old one;
        # groups of one env move at once, so they need none.
        spare = 1 if self.rotating and min(n, max_envs_per_scene) > 1 else 0
        num_places = self.num_groups + spare if self.rotating else num_scenes
        self.bank = SceneBank(index, num_places, scene_seed, dev)
        self.renderer = BatchRenderer(cfg.height, cfg.width, cfg.hfov_deg, cfg.camera_height, cfg.max_depth, dev)
        self.env_group = torch.arange(n, device=dev) // max_envs_per_scene
        self.group_sizes = torch.bincount(self.env_group, minlength=self.num_groups).tolist()
        self.group_place = [self.bank.install_next() for _ in range(min(self.num_groups, num_scenes))]
        self.group_place = [self.group_place[g % len(self.group_place)] for g in range(self.num_groups)]
        self.group_next: list[int | None] = [None] * self.num_groups
        self.group_episodes = torch.zeros(self.num_groups, dtype=torch.long, device=dev)

        def zeros(dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(n, dtype=dtype, device=dev)

        self.place = torch.tensor(self.group_place, device=dev)[self.env_group]
        self.pos = torch.zeros((n, 2), device=dev)
        self.heading = zeros()
        self.goal = torch.zeros((n, 2), device=dev)
        self.goal_index = zeros(torch.long)
        self.start_distance = zeros()
        self.distance = zeros()
        self.path_length = zeros()
        self.steps = zeros(torch.long)
        self.episode_return = zeros()
        self.seeds = zeros(torch.long)
        self.episode_count = zeros(torch.long)
        self.grid_rows, self.grid_cols = index.grid_shape
        self._turn = math.radians(cfg.turn_degrees)

    # ------------------------------------------------------------------ episodes

    def seed(self, seeds: torch.Tensor) -> None:
        """Seed every env's episode sequence (restarting it) from ``seeds`` (N,) integers."""
        self.seeds = _mix32(seeds.to(self.device, torch.long) & _M32)
        self.episode_count.zero_()

    def reset_envs(self, mask: torch.Tensor) -> None:
        """Start a new episode in the envs of ``mask`` (N,) bool, moving them to their group's next scene if any."""
        if self.rotating:
            self._rotate(mask)
        place = self.place
        num_episodes = self.bank.episodes.shape[1]
        choice = _mix32((self.seeds + self.episode_count * 0x27D4EB2D) & _M32) % num_episodes
        episode = self.bank.episodes[place, choice]  # (N, 6)
        m = mask[:, None]
        self.pos = torch.where(m, episode[:, 0:2], self.pos)
        self.heading = torch.where(mask, episode[:, 2], self.heading)
        self.goal = torch.where(m, episode[:, 3:5], self.goal)
        self.goal_index = torch.where(mask, self.bank.episode_goal[place, choice], self.goal_index)
        distance = self.geodesic(self.pos)
        self.distance = torch.where(mask, distance, self.distance)
        self.start_distance = torch.where(mask, distance, self.start_distance)
        zero = torch.zeros((), device=self.device)
        self.path_length = torch.where(mask, zero, self.path_length)
        self.episode_return = torch.where(mask, zero, self.episode_return)
        self.steps = torch.where(mask, 0, self.steps)
        self.episode_count += mask.long()
        self.group_episodes += torch.bincount(self.env_group[mask], minlength=self.num_groups)

    def _rotate(self, mask: torch.Tensor) -> None:
        """Scene rotation: runs in Python per group, and only while a group is due or moving."""
        episodes = self.group_episodes.tolist()
        if max(episodes) >= self.rotation_episodes // 2:
            self.bank.prefetch()  # load the next scene in the background from half-way on
        group_resets = torch.bincount(self.env_group[mask], minlength=self.num_groups).tolist()
        for g in range(self.num_groups):
            if episodes[g] >= self.rotation_episodes and self.group_next[g] is None:
                old = self.group_place[g]
                if group_resets[g] == self.group_sizes[g] and self.group_place.count(old) == 1:
                    self.bank.release(old)  # the whole group leaves its scene now: reuse the place
                place = self.bank.install_next()
                if place is None:
                    break  # every place is taken: try again when one is released
                self.group_next[g] = place
                self.group_episodes[g] = 0
        moving = [g for g in range(self.num_groups) if self.group_next[g] is not None]
        if not moving:
            return
        next_place = torch.tensor([s if s is not None else -1 for s in self.group_next], device=self.device)
        target = next_place[self.env_group]
        self.place = torch.where(mask & (target >= 0), target, self.place)
        on_next = torch.bincount(self.env_group[self.place == target], minlength=self.num_groups).tolist()
        for g in moving:
            if on_next[g] == self.group_sizes[g]:
                self.group_place[g] = self.group_next[g]
                self.group_next[g] = None
        in_use = set(self.place.unique().tolist()) | {s for s in self.group_next if s is not None}
        for place, path in enumerate(self.bank.place_path):
            if path is not None and place not in in_use:
                self.bank.release(place)

    # ------------------------------------------------------------------ dynamics

    def _flat_cell(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(flat index into the place grids, inside the grid) of the cells containing ``pos`` (..., 2)."""
        res = self.bank.resolution
        col = torch.floor(pos[..., 0] / res).long()
        row = torch.floor(pos[..., 1] / res).long()
        inside = (col >= 0) & (col < self.grid_cols) & (row >= 0) & (row < self.grid_rows)
        col, row = col.clamp(0, self.grid_cols - 1), row.clamp(0, self.grid_rows - 1)
        place = self.place.view(-1, *([1] * (pos.dim() - 2)))
        return (place * self.grid_rows + row) * self.grid_cols + col, inside

    def walkable_at(self, pos: torch.Tensor) -> torch.Tensor:
        """Whether the agent's centre may be at ``pos`` (N, ..., 2), each env in its own scene."""
        flat, inside = self._flat_cell(pos)
        return self.bank.walkable.view(-1)[flat] & inside

    def geodesic(self, pos: torch.Tensor) -> torch.Tensor:
        """Geodesic distance (N,) from ``pos`` (N, 2) to each env's goal: its field, bilinear between cell centres.

        Near walls, where a neighbouring cell centre is not walkable, the value of the cell itself is used.
        """
        res, rows, cols = self.bank.resolution, self.grid_rows, self.grid_cols
        fx = pos[:, 0] / res - 0.5
        fy = pos[:, 1] / res - 0.5
        x0 = torch.floor(fx).clamp(0, cols - 2)
        y0 = torch.floor(fy).clamp(0, rows - 2)
        wx = (fx - x0).clamp(0, 1)
        wy = (fy - y0).clamp(0, 1)
        num_goals = self.bank.fields.shape[1]
        base = (self.place * num_goals + self.goal_index) * rows * cols
        x0l, y0l = x0.long(), y0.long()
        own_col = torch.floor(pos[:, 0] / res).long().clamp(0, cols - 1)
        own_row = torch.floor(pos[:, 1] / res).long().clamp(0, rows - 1)
        index = (
            torch.stack(
                [
                    y0l * cols + x0l,
                    y0l * cols + x0l + 1,
                    (y0l + 1) * cols + x0l,
                    (y0l + 1) * cols + x0l + 1,
                    own_row * cols + own_col,
                ],
                dim=1,
            )
            + base[:, None]
        )
        v = self.bank.fields.view(-1)[index]
        bilinear = (v[:, 0] * (1 - wx) + v[:, 1] * wx) * (1 - wy) + (v[:, 2] * (1 - wx) + v[:, 3] * wx) * wy
        return torch.where(torch.isfinite(bilinear), bilinear, v[:, 4])

    def act(self, actions: torch.Tensor, active: torch.Tensor) -> StepResult:
        """Apply ``actions`` (N,) to the envs of ``active`` (N,) bool; the others do not move or count a step."""
        cfg = self.config
        forward = active & (actions == MOVE_FORWARD)
        turn = torch.where(actions == TURN_LEFT, 1.0, torch.where(actions == TURN_RIGHT, -1.0, 0.0))
        self.heading = torch.remainder(
            self.heading + torch.where(active, turn * self._turn, 0.0) + math.pi, 2 * math.pi
        )
        self.heading -= math.pi
        before = self.pos
        collided = self._move(forward)
        self.path_length = self.path_length + torch.linalg.vector_norm(self.pos - before, dim=1)
        distance = self.geodesic(self.pos)
        stop = active & (actions == STOP)
        success = stop & (distance < cfg.success_distance)
        reward = self.distance - distance + cfg.slack_reward + torch.where(success, cfg.success_reward, 0.0)
        reward = torch.where(active, reward, 0.0)
        self.distance = distance
        self.steps = self.steps + active.long()
        self.episode_return = self.episode_return + reward
        truncated = active & ~stop & (self.steps >= cfg.max_episode_steps)
        return StepResult(reward, stop, truncated, success, collided & active)

    def _move(self, forward: torch.Tensor) -> torch.Tensor:
        """Move the ``forward`` envs by ``forward_step`` in sub-steps of one grid cell, sliding along walls.

        A sub-step goes where it can: the full step, else its x part, else its y part, else
        nowhere. Sub-steps of one cell cannot cross the band of unwalkable cells around
        any solid (at least two agent radii wide). Returns whether the move was obstructed.
        """
        substeps = max(1, math.ceil(self.config.forward_step / self.bank.resolution))
        length = torch.where(forward, self.config.forward_step / substeps, 0.0)
        heading = self.heading.double()  # float64 trig: identical results whatever the batch size
        step = torch.stack([torch.cos(heading), torch.sin(heading)], dim=1).float() * length[:, None]
        step_x = step * torch.tensor([1.0, 0.0], device=self.device)
        step_y = step * torch.tensor([0.0, 1.0], device=self.device)
        collided = torch.zeros_like(forward)
        pos = self.pos
        for _ in range(substeps):
            options = torch.stack([pos + step, pos + step_x, pos + step_y], dim=1)  # (N, 3, 2)
            ok = self.walkable_at(options)
            pos = torch.where(
                ok[:, 0:1],
                options[:, 0],
                torch.where(ok[:, 1:2], options[:, 1], torch.where(ok[:, 2:3], options[:, 2], pos)),
            )
            collided |= forward & ~ok[:, 0]
        self.pos = pos
        return collided

    # ------------------------------------------------------------------ observations and metrics

    def observe(self) -> dict[str, torch.Tensor]:
        """Depth (N, H, W, 1), optional RGB (N, H, W, 3) and the goal in polar coordinates (N, 2)."""
        bank, place = self.bank, self.place
        scene = SceneBatch(
            boxes=bank.boxes[place],
            ceiling=bank.ceiling[place],
            textures=bank.textures,
            place=place,
            floor_texture=bank.floor_texture[place],
            ceiling_texture=bank.ceiling_texture[place],
        )
        heading = self.heading.double()
        depth, rgb = self.renderer.render(self.pos, heading, scene, rgb=self.config.rgb)
        to_goal = (self.goal - self.pos).double()
        rho = torch.linalg.vector_norm(to_goal, dim=1)
        phi = torch.remainder(torch.atan2(to_goal[:, 1], to_goal[:, 0]) - heading + math.pi, 2 * math.pi) - math.pi
        obs = {"depth": depth, "pointgoal_with_gps_compass": torch.stack([rho, phi], dim=1).float()}
        if rgb is not None:
            obs["rgb"] = rgb
        return obs

    def spl(self, success: torch.Tensor) -> torch.Tensor:
        """Success weighted by path length: shortest-path length over max(taken path, shortest path)."""
        return success.float() * self.start_distance / torch.maximum(self.path_length, self.start_distance)

    def close(self) -> None:
        self.bank.close()


def entropy_seed() -> int:
    """A fresh 32-bit seed for envs reset without one."""
    return int(np.random.SeedSequence().entropy & _M32)
