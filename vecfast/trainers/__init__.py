"""Built-in trainers (APPO, PPO, DD-PPO) behind one small protocol."""
