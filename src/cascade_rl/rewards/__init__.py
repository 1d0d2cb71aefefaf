"""Reward scorers for every Cascade RL domain (SPEC sections 5-6) and their registry.

One module per domain, each a pure scorer (``Score``); :mod:`.registry` maps the ``domain``
column of a row to its scorer and scores batches through it. The SWE reward's answer format
(:mod:`.swe_edits`: SEARCH/REPLACE edits and patches) and prompts (:mod:`.swe_prompts`) live here
too, so the SWE pipeline and the toy world above can share them.

Scorers know nothing about training or serving (DESIGN.md, "Layers"): they may run programs in
the sandbox and ask a model through ``llm/`` (the SWE judge, a served reward model). The bridge
to a trainer's reward function is :mod:`cascade_rl.train.rewards`.
"""

from cascade_rl.rewards.base import Score

__all__ = ["Score"]
