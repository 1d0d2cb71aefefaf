"""Reward scorers for every Cascade RL domain (SPEC sections 5-6) and their registry.

One module per domain, each a pure scorer (``Score``); :mod:`.registry` maps the ``domain``
column of a row to its scorer; :mod:`.adapter` turns the registry into TRL reward functions.
"""

from cascade_rl.rewards.base import Score

__all__ = ["Score"]
