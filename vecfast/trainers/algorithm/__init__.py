"""The algorithm: PPO, its losses, the actor-critic model and its parts (encoders, distributions,
normalisers, optimisers, the learning-rate schedule, numerical checks), and the learners that train policies.
"""
