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


def register_envs() -> None:
    for env_id, scenario in DOOM_SCENARIOS.items():
        full_id = f"vecfast/{env_id}"
        if full_id not in gymnasium.registry:
            gymnasium.register(
                full_id,
                entry_point="vecfast.envs.doom.scenario_env:DoomScenarioEnv",
                kwargs={"scenario": scenario},
            )
