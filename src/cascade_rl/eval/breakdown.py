"""Numbers reported beside a benchmark's headline value (SPEC section 9).

IFEval and IFBench are reported at two levels and in two modes (Zhou et al., 2023): *prompt
level* (a response counts when it follows every instruction of its prompt) and *instruction
level* (each instruction counts on its own), each *strict* (the answer as written) and *loose*
(the answer also read without its first / last line and without ``*``; see
:mod:`cascade_rl.rewards.ifeval.scorer`). The paper's table shows IFEval's strict prompt-level
accuracy, the headline of an ``ifeval`` benchmark in the default strict mode; all four numbers
are kept in ``eval.json`` under ``extra``. Every sample counts (k per prompt), so prompt-level
strict equals the avg@k headline.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

IFEVAL_LEVELS = ("prompt_strict", "prompt_loose", "instruction_strict", "instruction_loose")


def breakdown(scores: Sequence[Sequence[Any]]) -> dict[str, float]:
    """Extra numbers (percent) for the samples' scores; empty when the domain has none."""
    details = [s.details for row in scores for s in row]
    if any("strict_follow_list" in d for d in details):
        return ifeval_levels(details)
    return {}


def ifeval_levels(details: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The four IFEval accuracies from IF scorer details; samples whose row could not be scored
    (no follow lists: a scorer error) are left out and counted in ``unscored``."""
    scored = [d for d in details if "strict_follow_list" in d]
    out = {"unscored": float(len(details) - len(scored))}
    for mode in ("strict", "loose"):
        lists = [d[f"{mode}_follow_list"] for d in scored]
        instructions = sum(len(flags) for flags in lists)
        out[f"prompt_{mode}"] = 100.0 * sum(all(flags) for flags in lists) / max(len(lists), 1)
        out[f"instruction_{mode}"] = 100.0 * sum(sum(flags) for flags in lists) / max(instructions, 1)
    return {key: out[key] for key in (*IFEVAL_LEVELS, "unscored")}
