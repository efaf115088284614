"""Sampling: the one sampler every scheme runs over send/recv, the trajectory storage it writes, episode
bookkeeping, and the acting plan (who acts for which env or agent slot).
"""
