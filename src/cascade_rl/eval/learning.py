"""Steps of an RL stage that learned nothing (SPEC 5), read from its ``metrics.jsonl``.

GRPO's advantage is a reward's distance from the mean of its group (the rollouts of one prompt):
a group whose rollouts all score alike adds nothing to the gradient, and a step in which every
group did -- TRL's ``frac_reward_zero_std`` of 1, logged as ``zero_variance_groups``, or no
rollout left to learn from, ``train/learning_share`` 0 -- changes nothing but the optimizer's
state. A stage of such steps only (all prompts too hard or too easy for the policy, a reward that
cannot vary) ends "done" having trained nothing; a stretch of them is time spent for nothing.
:func:`learning_note` says so in one line, for the stage's console summary (``train/cascade.py``)
and the run's report (``eval/report.py``); so does a stage that logged no step at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: the fewest consecutive steps that learned nothing that are named on their own (a whole stage
#: of fewer steps that all learned nothing is named too)
IDLE_WINDOW = 5


@dataclass(frozen=True)
class Idleness:
    """How many logged steps learned nothing, and the runs of :data:`IDLE_WINDOW` or more of them
    in a row (first step, last step, logged steps)."""

    steps: int
    idle: int
    windows: list[tuple[int, int, int]] = field(default_factory=list)

    @property
    def nothing_learned(self) -> bool:
        return self.steps == 0 or self.idle == self.steps

    def to_json(self) -> dict[str, Any]:
        return {"steps": self.steps, "idle_steps": self.idle, "idle_windows": [list(w) for w in self.windows]}


def idle_step(record: Mapping[str, Any]) -> bool:
    """Whether a logged step learned nothing: every group without variance, or no rollout left."""
    share, zero = record.get("train/learning_share"), record.get("zero_variance_groups")
    return (isinstance(share, (int, float)) and share <= 0) or (isinstance(zero, (int, float)) and zero >= 1 - 1e-9)


def idleness(records: Sequence[Mapping[str, Any]]) -> Idleness:
    """The idle steps of a stage's metrics records (training steps: those with a ``step``)."""
    steps = [record for record in records if isinstance(record.get("step"), (int, float))]
    runs: list[list[int]] = []  # [first step, last step, logged steps] of each run of idle steps
    after_idle = False
    for record in steps:
        if idle_step(record):
            if after_idle:
                runs[-1][1:] = [int(record["step"]), runs[-1][2] + 1]
            else:
                runs.append([int(record["step"]), int(record["step"]), 1])
        after_idle = idle_step(record)
    idle = sum(run[2] for run in runs)
    windows = [(a, b, n) for a, b, n in runs if n >= IDLE_WINDOW or idle == len(steps)]
    return Idleness(len(steps), idle, windows)


def learning_note(stage: str, records: Sequence[Mapping[str, Any]]) -> str | None:
    """One line when the stage, or a stretch of it, learned nothing; None otherwise."""
    found = idleness(records)
    if found.steps == 0:
        return f"{stage} learned nothing: no training step was logged (no update of the weights)"
    if found.nothing_learned:
        return (
            f"{stage} learned nothing: in all {found.steps} logged steps every group's rollouts scored alike "
            "(zero variance: no advantage, no policy gradient)"
        )
    if not found.windows:
        return None
    spans = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b, _ in found.windows)
    length = sum(n for _, _, n in found.windows)
    return (
        f"{stage} learned nothing in steps {spans} ({length} of {found.steps} logged steps): every group's "
        "rollouts scored alike (zero variance: no advantage, no policy gradient)"
    )
