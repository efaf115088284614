"""Schemes: how batches are collected and learned from, independently of the algorithm that learns.

``synchronous`` (act, then learn; on-policy), ``asynchronous`` (Sample Factory's overlapped
sampling, inference and learning) and ``distributed`` (DD-PPO: the synchronous scheme in every
rank of a torch.distributed run). :mod:`vecfast.trainers.registry` names them.
"""
