"""Sampling beyond one machine: envs on the nodes of a Ray cluster, stepped from the learner's process (the ``ray``
extra).

- :mod:`.connection`: joining a cluster or starting Ray on this machine (as little opened as Ray allows).
- :mod:`.env_sampler`: :class:`EnvSampler`, the Ray actor that owns one node's share of the envs.
- :mod:`.remote_vector_env`: :class:`RemoteVectorEnv`, those samplers as one vector env with EnvPool's
  ``send``/``recv`` (SEED RL's central inference: observations go to the learner's process, which acts for all).
"""
