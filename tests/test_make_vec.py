"""``vecfast.make_vec`` takes what ``gymnasium.make_vec`` takes: ids, ``module:EnvId`` and specs, with its errors."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import vecfast


@pytest.mark.parametrize("make_vec", [gymnasium.make_vec, vecfast.make_vec], ids=["gymnasium", "vecfast"])
@pytest.mark.parametrize(
    "env_id",
    ["CartPole-v1", "gymnasium.envs.classic_control:CartPole-v1"],
    ids=["id", "module:id"],
)
def test_ids_as_gymnasium_takes_them(make_vec, env_id: str) -> None:
    """Old behaviour: vecfast looked ids up with gymnasium.spec(), which does not import ``module:``."""
    envs = make_vec(env_id, num_envs=2)
    try:
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (2, 4) and np.isfinite(obs).all()
    finally:
        envs.close()


@pytest.mark.parametrize("make_vec", [gymnasium.make_vec, vecfast.make_vec], ids=["gymnasium", "vecfast"])
def test_an_id_of_the_wrong_type_raises_gymnasiums_error(make_vec) -> None:
    with pytest.raises(gymnasium.error.Error, match="Invalid id type"):
        make_vec(123, num_envs=2)
