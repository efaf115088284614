"""Sampling beyond one machine: envs on the nodes of a Ray cluster, feeding the learner's process (the ``ray``
extra).

- :mod:`.connection`: joining a cluster or starting Ray on this machine (as little opened as Ray allows).
- :mod:`.sampler_group`: a run's sampler actors, placed one per node, restarted by Ray, and what both ways of
  acting show of them as a vector env.
- :mod:`.env_sampler`: :class:`EnvSampler`, the Ray actor that owns one node's share of the envs.
- :mod:`.remote_vector_env`: :class:`RemoteVectorEnv`, those samplers as one vector env with EnvPool's
  ``send``/``recv`` (SEED RL's central inference: observations go to the learner's process, which acts for all).
- :mod:`.policy_sampler`: :class:`PolicySampler`, a sampler that acts with its own copy of the policy and ships
  finished trajectories (local inference: Sample Factory's policy worker on each node).
- :mod:`.policy_samplers`: :class:`PolicySamplers`, those samplers as the asynchronous scheme's source of batches.
- :mod:`.local_nodes`: a cluster of several nodes on this machine, started with ``ray start`` (tests, benchmarks).
"""
