"""Batched vector-env wrappers and adapters for other libraries (Stable-Baselines3)."""
