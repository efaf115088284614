"""Multi-agent envs (PettingZoo multiplayer Doom) and many matches as one vector env."""
