"""The defaults of the entry points' own arguments (``train``, ``evaluate``, ``enjoy``, ``export_run``, ``tune``),
which are no config keys: one place that their signatures and the command line both read. (The command line
builds its parser without importing torch, so it cannot read the signatures themselves.)"""

from __future__ import annotations

ALGO = "appo"
"""``train``'s algorithm: APPO, the fastest here."""
TOTAL_ENV_STEPS = 1_000_000
"""``train``'s budget of env steps."""
CHECKPOINT = "last"
"""Which checkpoint of a run ``evaluate``, ``enjoy`` and ``export_run`` read: the newest (``best.pt`` is only
as good as the returns measured when it was written)."""
EVALUATION_EPISODES = 10
"""``evaluate``'s whole episodes on an env."""
EVALUATION_GAMES = 200
"""``evaluate``'s whole games against an opponent: a win rate of 0.5 is +-0.07 (95%) from 200 games, +-0.3 from
10."""
EVALUATION_SEED = 0
"""``evaluate``: env ``i`` resets with ``seed + i``."""
ENJOY_EPISODES = 3
ENJOY_MAX_STEPS = 10_000
"""``enjoy`` cuts an episode of a single-agent env there (a game is played whole)."""
ENJOY_SEED = 0
EXPORT_FORMAT = "onnx"
TUNE_ALGO = "appo"
"""``tune`` chooses the layout of a double-buffered algorithm."""
TUNE_SECONDS = 1.0
"""``tune``'s timing of env steps (inference gets half)."""
