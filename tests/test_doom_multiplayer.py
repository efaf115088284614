"""PettingZoo multiplayer Doom: networked matches of real VizDoom games (host + joiners on 127.0.0.1).

The env must pass PettingZoo's own API tests, play whole matches (figures every step, the
outcome at the end), run several matches side by side on automatically chosen ports, and
never hang or leak: a dead player or a taken port restarts the match, and killing the owner
leaves no game process, no namespace holder and nothing in /dev/shm. (How the games are
kept off the host's network: tests/test_doom_network.py.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import numpy as np
import psutil
import pytest
from gymnasium.error import AlreadyPendingCallError
from helpers import descendants, shm_entries, shm_files_used_by, vizdoom_shm_left, wait_gone
from pettingzoo.test import api_test, parallel_api_test

from vecfast.envs.doom import doom_deathmatch_v0, doom_duel_v0
from vecfast.envs.doom.multiplayer import matches as doom_vector

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]  # Doom matches over the network: slow

SHORT = 0.05  # minutes: 105 tics, 52 steps at frame skip 2
NOOP = np.array([0, 0, 0, 0, 0, 0, 10])


@pytest.fixture(autouse=True)
def fresh_cwd(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def games() -> list[psutil.Process]:
    return [p for p in descendants() if p.name() == "vizdoom"]


def play_until_over(env: Any, rng: np.random.Generator) -> tuple[int, dict, dict]:
    space = env.action_space(env.possible_agents[0])
    steps = 0
    while env.agents:
        actions = {agent: rng.integers(0, space.nvec) for agent in env.agents}
        _, rewards, terminations, truncations, infos = env.step(actions)
        steps += 1
    return steps, truncations, infos


def test_pettingzoo_api_tests() -> None:
    env = doom_duel_v0.parallel_env(timelimit_minutes=SHORT)
    try:
        parallel_api_test(env, num_cycles=300)  # crosses the end of a match
    finally:
        env.close()
    aec = doom_duel_v0.env(timelimit_minutes=SHORT)
    try:
        api_test(aec, num_cycles=50)
    finally:
        aec.close()


def test_a_duel_plays_to_its_time_limit_and_starts_again() -> None:
    env = doom_duel_v0.parallel_env(timelimit_minutes=SHORT)
    try:
        obs, infos = env.reset(seed=0)
        assert set(obs) == {"player_0", "player_1"}
        for agent in env.agents:
            assert env.observation_space(agent).contains(obs[agent])
        assert env.action_space("player_1") == env.action_space("player_0")
        _, _, _, _, step_infos = env.step({agent: NOOP for agent in env.agents})
        for agent in env.possible_agents:
            assert {"frags", "deaths", "damage_dealt", "damage_taken", "hits", "hits_taken"} <= set(step_infos[agent])
        steps, truncations, infos = play_until_over(env, np.random.default_rng(0))
        assert steps + 1 in (52, 53)  # 105 tics at 2 tics per step
        assert all(truncations.values())
        outcomes = sorted(infos[agent]["outcome"] for agent in env.possible_agents)
        frags = [infos[agent]["frags"] for agent in env.possible_agents]
        assert outcomes == (["draw", "draw"] if frags[0] == frags[1] else ["loss", "win"])
        for agent in env.possible_agents:
            assert infos[agent]["true_objective"] == float(infos[agent]["outcome"] == "win")
        assert env.restarts == 0
        env.reset(seed=1)
        _, _, _, truncations, _ = env.step({agent: NOOP for agent in env.agents})
        assert not any(truncations.values())
    finally:
        env.close()


def test_a_dead_player_restarts_the_match(process_guard: Any) -> None:
    env = doom_duel_v0.parallel_env(timelimit_minutes=1.0, timeout=5.0)
    try:
        env.reset(seed=0)
        for _ in range(3):
            env.step({agent: NOOP for agent in env.agents})
        victims = games()
        assert len(victims) == 2
        victims[1].kill()
        started = time.monotonic()
        for _ in range(10):  # the other game waits for the dead one: a timeout, not a hang
            _, rewards, _, truncations, infos = env.step({agent: NOOP for agent in env.agents})
            if not env.agents:
                break
        assert time.monotonic() - started < 30
        assert all(truncations.values()) and "match_restarted" in infos["player_0"]
        assert env.restarts == 1
        assert wait_gone(victims, timeout=5) == []
        env.reset(seed=1)
        _, _, _, truncations, _ = env.step({agent: NOOP for agent in env.agents})
        assert not any(truncations.values())
    finally:
        env.close()
    assert games() == []


def test_a_taken_port_is_replaced_without_a_crash(tmp_path: Any) -> None:
    """In the host's network (in a private one no other process can take a port).

    A host whose port is taken exits while starting, which VizDoom 1.3.2 answers by
    segfaulting its worker: the match must start on another port before any game does. The
    owner runs with faulthandler on, which would print the worker's crash.
    """
    script = textwrap.dedent(
        """
        import socket, warnings
        from vecfast.envs.doom import doom_deathmatch_v0
        from vecfast.envs.doom.multiplayer import player as doom_player
        taken = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        taken.bind(("0.0.0.0", 0))  # as a VizDoom host binds it
        picks = iter([taken.getsockname()[1]])
        real = doom_player.free_udp_port
        doom_player.free_udp_port = lambda: next(picks, None) or real()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            env = doom_deathmatch_v0.parallel_env(
                num_agents=2, timelimit_minutes=0.05, timeout=3.0, network_isolation=False
            )
        assert [w.category for w in caught] == [doom_player.NetworkIsolationWarning], caught
        obs, _ = env.reset(seed=0)
        assert sorted(obs) == ["player_0", "player_1"] and env.restarts >= 1, (obs, env.restarts)
        env.step({a: [0, 0, 0, 0, 0, 0, 10] for a in env.agents})
        env.close()
        print("ok", flush=True)
        """
    )
    before = shm_entries()
    run = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=100
    )
    assert run.stdout.splitlines()[-1:] == ["ok"], run.stderr[-3000:]
    assert "Fatal Python error" not in run.stderr, run.stderr[-3000:]
    assert vizdoom_shm_left(before) == set()


def test_killing_the_owner_leaves_no_game_and_no_shared_memory(tmp_path: Any, process_guard: Any) -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from vecfast.envs.doom import doom_duel_v0
        env = doom_duel_v0.parallel_env(timelimit_minutes=1.0)
        env.reset(seed=0)
        env.step({a: [0, 0, 0, 0, 0, 0, 10] for a in env.agents})
        print("ready", int(env.network.isolated), flush=True)
        time.sleep(60)
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert owner.stdout is not None
        ready, isolated = owner.stdout.readline().split()
        assert ready == "ready"
        tree = descendants(owner.pid)
        process_guard.watch(tree)
        assert len([p for p in tree if p.name() == "vizdoom"]) == 2
        holders = [p for p in tree if "network_isolation" in " ".join(p.cmdline())]
        assert len(holders) == int(isolated)  # the private network's holder must go too
        shm_names = shm_files_used_by(tree)
        assert shm_names  # VizDoom's IPC files of the two games
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(5)
        assert wait_gone(tree, timeout=10) == []
    finally:
        if owner.poll() is None:
            owner.kill()
    assert shm_names.isdisjoint(shm_entries())


def test_vector_env_runs_matches_in_shared_workers(process_guard: Any) -> None:
    env = doom_duel_v0.vector_env(2, timelimit_minutes=SHORT)
    process_guard.watch(descendants())
    try:
        obs, infos = env.reset(seed=0)
        assert env.num_envs == 4 and obs["screen"].shape == (4, 3, 72, 128)
        assert infos["agent_id"].tolist() == ["player_0", "player_1"] * 2
        assert infos["match_id"].tolist() == [0, 0, 1, 1]
        assert len(set(env.ports)) == 2
        helpers = ("reaper", "network_isolation")  # the games' reaper, the private network's holder
        workers = [
            p for p in descendants() if p.name() != "vizdoom" and not any(h in " ".join(p.cmdline()) for h in helpers)
        ]
        assert len(workers) == 2 and len(games()) == 4  # no process per match
        env.action_space.seed(0)
        ends = []
        for t in range(110):  # two matches each (52-53 steps, then a reset step)
            obs, rewards, terminated, truncated, infos = env.step(env.action_space.sample())
            assert not terminated.any()
            np.testing.assert_array_equal(truncated.reshape(2, 2).all(axis=1), truncated.reshape(2, 2).any(axis=1))
            if truncated.any():
                ends.append(t)
                frags = infos["frags"].reshape(2, 2)
                for m in np.flatnonzero(truncated.reshape(2, 2).all(axis=1)):
                    want = doom_vector.outcomes(frags[m])
                    assert infos["outcome"][2 * m : 2 * m + 2].tolist() == want
                    assert infos["true_objective"][2 * m : 2 * m + 2].tolist() == [float(o == "win") for o in want]
            elif ends and t == ends[-1] + 1:
                assert not infos["active"].any()  # the reset step
            else:
                assert infos["active"].all() and {"frags", "deaths"} <= set(infos)
        assert len(ends) == 2
        mask = np.array([True, False, False, False])
        with pytest.raises(ValueError, match="a match resets as a whole"):
            env.reset(options={"reset_mask": mask})
        obs, _ = env.reset(options={"reset_mask": np.array([False, False, True, True])})
        assert obs["screen"].shape == (4, 3, 72, 128)
    finally:
        env.close()
    assert games() == []


@pytest.mark.parametrize(("module", "num_bots"), [(doom_duel_v0, 1), (doom_deathmatch_v0, 3)])
def test_built_in_bots_join_networked_matches(module: Any, num_bots: int, process_guard: Any) -> None:
    """The host adds the bots; the match plays to its end and the next one has them again."""
    env = module.vector_env(1, num_agents=2, num_bots=num_bots, timelimit_minutes=SHORT)
    process_guard.watch(descendants())
    try:
        env.reset(seed=0)
        env.action_space.seed(0)
        ends = []
        for t in range(60):  # one match (52-53 steps), its reset step, and a few steps of the next
            _, _, _, truncated, infos = env.step(env.action_space.sample())
            if t in (1, 58):
                assert env.call("player_count")[0] == 2 + num_bots  # as the host sees it
            if truncated.any():
                assert truncated.all() and "match_restarted" not in infos
                np.testing.assert_array_equal(infos["true_objective"], infos["frags"])  # against bots: frags
                ends.append(t)
        assert len(ends) == 1
    finally:
        env.close()
    assert games() == []


def match_of_game(game: psutil.Process, ports: list[int]) -> int:
    """The match whose host's port a game's command line names (``-port P`` hosts, ``-join 127.0.0.1:P`` joins)."""
    args = " ".join(game.cmdline())
    return next(m for m, port in enumerate(ports) if f"-port {port} " in args or f"127.0.0.1:{port} " in args)


CAUSE = {"host": "raised", "joiner": "raised", "stopped host": "stalled", "worker": "died"}  # restart records


@pytest.mark.parametrize("victim", list(CAUSE))
def test_a_dead_game_restarts_its_match_only(victim: str, process_guard: Any) -> None:
    """A killed game ends its match for both players (truncated, ``match_restarted``, one record) while the other
    match plays on; the match's other game, which would hang, is gone too; the next step starts the new match.
    A worker holds a player of every match of its group: its death (or a game that stalls, which stalls its worker
    past the step timeout) ends them all."""
    env = doom_duel_v0.vector_env(2, timelimit_minutes=1.0, timeout=5.0)
    process_guard.watch(descendants())
    shm_before = shm_entries()
    try:
        env.reset(seed=0)
        noop = np.tile(NOOP, (4, 1))
        for _ in range(3):
            _, _, _, _, infos = env.step(noop)
        before = games()
        match = {g: match_of_game(g, env.ports) for g in before}
        role = "-join" if victim == "joiner" else "-port"
        game = next(g for g in before if match[g] == 0 and role in " ".join(g.cmdline()))
        if victim == "worker":
            os.kill(env.players.worker_pids[0], signal.SIGKILL)
            ended = [0, 1, 2, 3]
        elif victim == "stopped host":
            os.kill(game.pid, signal.SIGSTOP)
            ended = [0, 1, 2, 3]  # both workers wait on the stopped match past the step timeout
        else:
            game.kill()
            ended = [0, 1]
        started = time.monotonic()
        for _ in range(5):  # a host may run a step ahead of its dead joiner
            _, rewards, _, truncated, infos = env.step(noop)
            if "match_restarted" in infos:
                break
        assert time.monotonic() - started < 30
        assert np.flatnonzero(truncated).tolist() == ended, (truncated, infos.get("match_restarted"))
        assert np.flatnonzero(infos["_match_restarted"]).tolist() == ended and infos["restarted"][ended].all()
        assert [r.env_indices for r in env.restarts] == [(0, 1), (2, 3)][: len(ended) // 2]
        assert {r.cause for r in env.restarts} == {CAUSE[victim]}
        dead = before if len(ended) == 4 else [g for g in before if match[g] == 0]
        assert wait_gone(dead, timeout=5) == []  # the dead game's partner too: it would have hung
        assert all(g.is_running() for g in before if g not in dead)  # the other match's games play on
        _, rewards, _, truncated, infos = env.step(noop)  # the reset step of the new match
        assert not truncated.any() and infos["active"].tolist() == [i not in ended for i in range(4)]
        assert (rewards[ended] == 0).all()
        _, _, _, truncated, infos = env.step(noop)
        assert infos["active"].all() and not truncated.any() and len(games()) == 4
    finally:
        env.close()
    assert games() == [] and vizdoom_shm_left(shm_before) == set()


@pytest.mark.parametrize("victim", ["host", "joiner"])
def test_a_game_that_dies_between_matches_restarts_its_match_only(victim: str, process_guard: Any) -> None:
    """A game killed after its match ended, before the next begins: the new episode the match's players start
    fails at once for both (each ends the games its match began with, never the partner's rebuilt game), so the
    match restarts alone, once, and the other match plays on; no worker waits out the step timeout."""
    env = doom_duel_v0.vector_env(2, timelimit_minutes=SHORT, timeout=5.0)
    process_guard.watch(descendants())
    try:
        env.reset(seed=0)
        noop = np.tile(NOOP, (4, 1))
        truncated = np.zeros(4, bool)
        while not truncated.all():  # both matches reach their time limit at the same step
            _, _, _, truncated, _ = env.step(noop)
        before = games()
        match = {g: match_of_game(g, env.ports) for g in before}
        role = "-join" if victim == "joiner" else "-port"
        next(g for g in before if match[g] == 0 and role in " ".join(g.cmdline())).kill()
        started = time.monotonic()
        for _ in range(5):
            _, _, _, truncated, infos = env.step(noop)
            if "match_restarted" in infos:
                break
        assert time.monotonic() - started < 5.0  # the step timeout (10 s) never ran out
        assert np.flatnonzero(infos["_match_restarted"]).tolist() == [0, 1], infos.get("match_restarted")
        assert np.flatnonzero(truncated).tolist() == [0, 1]
        assert [r.env_indices for r in env.restarts] == [(0, 1)]
        assert all(g.is_running() for g in before if match[g] == 1)
        for _ in range(3):
            _, _, _, truncated, infos = env.step(noop)
        assert not truncated.any() and infos["active"].all() and len(games()) == 4
        assert [r.env_indices for r in env.restarts] == [(0, 1)]  # the new match began once, its games untouched
    finally:
        env.close()
    assert games() == []


def test_a_reset_after_a_game_died_restarts_its_match_once(process_guard: Any) -> None:
    """``reset`` with a game of match 0 dead: its players are rebuilt as they start the new match, which counts as
    the match's one restart (not as none, nor as every match's); the reset and the steps after it report nothing
    owed, the other match's games play on."""
    env = doom_duel_v0.vector_env(2, timelimit_minutes=1.0, timeout=5.0)
    process_guard.watch(descendants())
    try:
        env.reset(seed=0)
        noop = np.tile(NOOP, (4, 1))
        for _ in range(3):
            env.step(noop)
        before = games()
        match = {g: match_of_game(g, env.ports) for g in before}
        next(g for g in before if match[g] == 0).kill()
        started = time.monotonic()
        _, infos = env.reset(seed=1)
        assert time.monotonic() - started < 5.0 and "restarted" not in infos
        assert [r.env_indices for r in env.restarts] == [(0, 1)]
        assert all(g.is_running() for g in before if match[g] == 1)
        for _ in range(2):
            _, _, _, truncated, infos = env.step(noop)
            assert not truncated.any() and "match_restarted" not in infos
        assert [r.env_indices for r in env.restarts] == [(0, 1)] and len(games()) == 4
    finally:
        env.close()
    assert games() == []


def test_matches_step_half_at_a_time_through_send_and_recv(process_guard: Any) -> None:
    """Double-buffered: recv returns the matches of the earliest send, while the other half steps (as APPO samples);
    a slot that owes an action cannot be received twice, and a send that cuts a match is refused."""
    env = doom_duel_v0.vector_env(4, timelimit_minutes=SHORT, double_buffered=True)
    process_guard.watch(descendants())
    try:
        assert env.double_buffered
        env.async_reset(seed=0)
        obs, rewards, _, _, infos = env.recv()
        assert infos["env_id"].tolist() == list(range(8)) and obs["screen"].shape == (8, 3, 72, 128)
        with pytest.raises(ValueError, match="cut match 1"):
            env.send(np.tile(NOOP, (3, 1)), np.array([0, 1, 2]))
        env.send(np.tile(NOOP, (8, 1)), np.arange(8))  # a job per half of each worker's matches
        halves, ends = [], 0
        for _ in range(120):  # 60 steps of each half: its matches end once (52-53 steps)
            obs, rewards, terminated, truncated, infos = env.recv()
            ids = infos["env_id"]
            assert len(ids) == 4 and (ids.reshape(2, 2) // 2 == ids.reshape(2, 2)[:, :1] // 2).all()  # whole matches
            assert obs["screen"].shape == (4, 3, 72, 128) and infos["agent_id"].tolist() == ["player_0", "player_1"] * 2
            halves.append(tuple(ids.tolist()))
            ends += int(truncated.sum())
            with pytest.raises(AlreadyPendingCallError):
                env.send(np.tile(NOOP, (4, 1)), [i for i in range(8) if i not in ids][:4])
            env.send(np.tile(NOOP, (4, 1)), ids)
        assert set(halves) == {(0, 1, 2, 3), (4, 5, 6, 7)}  # the two halves of every worker take turns
        assert ends == 8  # every slot's match ended once
    finally:
        env.close()
    assert games() == []


def test_a_dead_game_restarts_its_match_in_a_double_buffered_env(process_guard: Any) -> None:
    """A game killed in each half: the stepping half's match reports its end within a recv or two (a game may run a
    step ahead), the waiting half's when next sent, each with only its own two slots truncated; then each restarted
    match's next send starts its new match (reward 0, not active) while the others play on."""
    env = doom_duel_v0.vector_env(4, timelimit_minutes=1.0, timeout=5.0, double_buffered=True)
    process_guard.watch(descendants())
    noop = np.tile(NOOP, (4, 1))
    try:
        env.async_reset(seed=0)
        env.recv()
        env.send(np.tile(NOOP, (8, 1)), np.arange(8))
        _, _, _, _, infos = env.recv()
        waiting = infos["env_id"]  # with the caller; the other half steps
        stepping = np.setdiff1d(np.arange(8), waiting)
        match = {g: match_of_game(g, env.ports) for g in games()}
        victims = {
            int(half[0]) // 2: next(g for g, m in match.items() if m == half[0] // 2) for half in (stepping, waiting)
        }
        for game in victims.values():
            game.kill()
        restarted = []
        for half in (stepping, waiting):
            if half is waiting:
                env.send(noop, waiting)
            for _ in range(3):
                _, rewards, _, truncated, infos = env.recv()
                assert infos["env_id"].tolist() == half.tolist()
                if "match_restarted" in infos:
                    break
                env.send(noop, half)
            ended = half[:2]  # the victim's match: the half's first
            assert (
                half[truncated].tolist() == ended.tolist()
                and half[infos["_match_restarted"]].tolist() == ended.tolist()
            )
            restarted.append(ended)
        assert [r.env_indices for r in env.restarts] == [tuple(ended.tolist()) for ended in restarted]
        for half, ended in zip((stepping, waiting), restarted, strict=True):  # then each restarted match starts anew
            env.send(noop, half)
            _, rewards, _, truncated, infos = env.recv()
            assert infos["env_id"].tolist() == half.tolist() and not truncated.any()
            assert half[~infos["active"]].tolist() == ended.tolist() and (rewards[:2] == 0).all()
        env.step(np.tile(NOOP, (8, 1)))
        _, _, _, truncated, infos = env.step(np.tile(NOOP, (8, 1)))
        assert infos["active"].all() and not truncated.any() and len(games()) == 8
        assert wait_gone(list(victims.values()), timeout=5) == []
    finally:
        env.close()
    assert games() == []


def test_a_policy_plays_doom_duels_against_a_fixed_opponent_with_frames(process_guard: Any) -> None:
    """Evaluation of Doom duels (and so evaluation while training and videos of them) plays on the duels' own
    vector env of agent slots: the outcome is Doom's (by frags), the frames match 0's host's."""
    import torch

    import vecfast
    from vecfast.trainers.algorithm.models import ActorCritic
    from vecfast.trainers.config import TrainConfig

    spaces = doom_duel_v0.vector_env(1, timelimit_minutes=SHORT, resolution=(64, 36))
    policy_spaces = (spaces.single_observation_space, spaces.single_action_space)
    spaces.close()
    torch.manual_seed(0)
    policy = ActorCritic(*policy_spaces, TrainConfig.from_overrides(use_rnn=False))
    frames: list[np.ndarray] = []
    kwargs = {"timelimit_minutes": SHORT, "resolution": (64, 36)}
    result = vecfast.evaluate(policy, env=doom_duel_v0, episodes=3, opponent="random", on_frame=frames.append,
                              env_kwargs=kwargs)  # fmt: skip
    assert result.episodes == 3 and set(result.lengths) <= {51, 52}  # the policy's steps of each 52-step duel
    assert result.win_rate + result.draw_rate + result.loss_rate == pytest.approx(1.0)
    assert len(frames) >= 3 * 51 and frames[0].ndim == 3 and frames[0].shape[2] == 3
    assert process_guard.new_descendants() == []


def test_a_doom_duel_run_evaluates_and_films_its_policy_while_training(tmp_path: Any, process_guard: Any) -> None:
    """A run of the doom_duel_v0 module (its keyword arguments given as an id's are) plays games against the
    built-in opponents while training and films one, as board game runs do."""
    import json

    import vecfast

    run_dir = tmp_path / "run"
    vecfast.train(
        doom_duel_v0, env_kwargs={"timelimit_minutes": SHORT, "resolution": (64, 36)}, algo="ppo",
        total_env_steps=400, run_dir=run_dir, num_workers=1, num_envs_per_worker=2, rollout=16, batch_size=64,
        use_rnn=False, eval_every_env_steps=200, eval_episodes=2, video_every_env_steps=300, print_every_sec=None,
        seed=0,
    )  # fmt: skip
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evaluated = [line for line in lines if "eval/win_rate_vs_random" in line]
    assert evaluated and all(0.0 <= line["eval/win_rate_vs_initial"] <= 1.0 for line in evaluated)
    assert sorted((run_dir / "videos").glob("*.mp4"))
    assert process_guard.new_descendants() == []
