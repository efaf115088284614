"""gymnasium ids of vecfast's envs, registered on ``import vecfast``.

Entry points are strings, so registering imports no simulator: VizDoom is an optional
dependency and is imported only when one of its envs is made.
"""

from __future__ import annotations

import gymnasium

# id -> vizdoom scenario config name
DOOM_SCENARIOS = {
    "DoomBasic-v0": "basic",
    "DoomDefendTheCenter-v0": "defend_the_center",
    "DoomDefendTheLine-v0": "defend_the_line",
    "DoomHealthGathering-v0": "health_gathering",
    "DoomHealthGatheringSupreme-v0": "health_gathering_supreme",
    "DoomMyWayHome-v0": "my_way_home",
    "DoomDeadlyCorridor-v0": "deadly_corridor",
    "DoomTakeCover-v0": "take_cover",
}


# id -> full-game settings: vizdoom's multiplayer maps against its built-in bots
DOOM_FULL_GAMES = {
    "DoomDuelBots-v0": {"wad": "multi_duel.wad", "num_bots": 1},
    "DoomDeathmatchBots-v0": {"wad": "multi_deathmatch.wad", "num_bots": 7},
}


def register_envs() -> None:
    from vecfast.envs.nav.registration import register_nav_envs

    register_nav_envs()
    entries = [
        *((env_id, "scenario_env:DoomScenarioEnv", {"scenario": s}) for env_id, s in DOOM_SCENARIOS.items()),
        *((env_id, "full_game_env:DoomFullGameEnv", kwargs) for env_id, kwargs in DOOM_FULL_GAMES.items()),
    ]
    if "vecfast/Timed-v0" not in gymnasium.registry:
        gymnasium.register("vecfast/Timed-v0", entry_point="vecfast.envs.timed:TimedEnv")
    for env_id, entry_point, kwargs in entries:
        full_id = f"vecfast/{env_id}"
        if full_id not in gymnasium.registry:
            gymnasium.register(full_id, entry_point=f"vecfast.envs.doom.{entry_point}", kwargs=kwargs)
