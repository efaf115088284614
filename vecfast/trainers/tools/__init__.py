"""User tools: the command line, the live viewer, plots, enjoy (watch and record) and evaluation, and the
auto-tuner of workers and envs.
"""
