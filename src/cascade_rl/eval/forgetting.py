"""What changed between evaluations, and whether it is forgetting (SPEC sections 1 and 9-10):
each benchmark's change from one evaluated stage to a later one with its standard error paired
over prompts, the stage x benchmark change matrix, and the target check of every RL stage (its
own benchmark's gain, and its largest later fall against the forgetting limit). See the
**Noise** paragraph of :mod:`cascade_rl.eval.report` for the rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cascade_rl.eval.runs import DEFAULT_FORGETTING_LIMIT, DEFAULT_MIN_GAIN, RunSummary, StageRecord, evaluations

#: differences of percentages carry float error (32.33 - 22.33 = 9.9999...): a change compared
#: with a target or a limit within this much of it is equal to it
ROUNDING = 1e-9


@dataclass
class TargetCheck:
    """The own-domain gain of one RL stage and whether its benchmark was later forgotten."""

    stage: str
    benchmark: str
    start: float | None
    end: float | None
    min_gain: float
    worst_later_value: float | None = None
    worst_later_stage: str | None = None
    forgetting_limit: float = DEFAULT_FORGETTING_LIMIT
    finished: bool = True  # False: the run has no finished stage of this name
    fall_stderr: float | None = None  # paired standard error of the later fall
    gain_stderr: float | None = None  # paired standard error of the stage's own change

    @property
    def delta(self) -> float | None:
        return None if self.start is None or self.end is None else self.end - self.start

    @property
    def gain_reached(self) -> bool:
        return self.delta is not None and self.delta >= self.min_gain - ROUNDING

    @property
    def within_gain_noise(self) -> bool:
        return self.delta is not None and self.gain_stderr is not None and self.delta <= 2.0 * self.gain_stderr

    @property
    def gain_met(self) -> bool:
        """At least ``min_gain`` points and, where the change's paired standard error is known,
        more than twice that error (a gain inside the sampling noise is not a gain)."""
        return self.gain_reached and not self.within_gain_noise

    @property
    def later_fall(self) -> float | None:
        if self.end is None or self.worst_later_value is None:
            return None
        return max(0.0, self.end - self.worst_later_value)

    @property
    def forgetting_met(self) -> bool:
        return not is_forgetting(self.later_fall, self.fall_stderr, self.forgetting_limit)

    @property
    def fall_text(self) -> str | None:
        if self.later_fall is None:
            return None
        return f"{self.later_fall:.1f}" + (f" ± {self.fall_stderr:.1f}" if self.fall_stderr is not None else "")

    def problems(self) -> list[str]:
        """Plain sentences for every part of the target that is not met."""
        found = []
        if not self.finished:
            found.append(
                f"`{self.stage}`: no finished stage of that name in this run, so {self.benchmark} is unchecked"
            )
        elif self.end is None:
            found.append(f"`{self.stage}`: {self.benchmark} was not evaluated after the stage")
        elif self.start is None:
            found.append(
                f"`{self.stage}`: no {self.benchmark} value for the checkpoint it started from, so its gain is unknown"
            )
        elif not self.gain_reached:
            found.append(
                f"`{self.stage}`: {self.benchmark} changed by {self.delta:+.1f} points "
                f"({self.start:.1f} -> {self.end:.1f}); target +{self.min_gain:.1f}, "
                f"short by {self.min_gain - self.delta:.1f}"
            )
        elif self.within_gain_noise:
            found.append(
                f"`{self.stage}`: {self.benchmark} changed by {self.delta:+.1f} ± {self.gain_stderr:.1f} points "
                f"({self.start:.1f} -> {self.end:.1f}), not more than twice its paired standard error"
            )
        if not self.forgetting_met:
            noise = f"; more than twice its standard error ({2 * self.fall_stderr:.1f})" if self.fall_stderr else ""
            found.append(
                f"{self.benchmark} fell {self.fall_text} points after `{self.stage}` "
                f"(lowest after `{self.worst_later_stage}`); limit {self.forgetting_limit:.1f}, "
                f"over by {self.later_fall - self.forgetting_limit:.1f}{noise}"
            )
        return found

    def within_noise(self) -> bool:
        """A fall over the limit that is not forgetting because it is within twice its error."""
        fall = self.later_fall
        return fall is not None and fall > self.forgetting_limit and self.forgetting_met

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "benchmark": self.benchmark,
            "start": self.start,
            "end": self.end,
            "delta": self.delta,
            "min_gain": self.min_gain,
            "gain_met": self.gain_met,
            "later_fall": self.later_fall,
            "worst_later_stage": self.worst_later_stage,
            "delta_stderr": self.gain_stderr,
            "later_fall_stderr": self.fall_stderr,
            "forgetting_limit": self.forgetting_limit,
            "forgetting_met": self.forgetting_met,
            "finished": self.finished,
            "met": not self.problems(),
            "problems": self.problems(),
        }


def is_forgetting(fall: float | None, stderr: float | None, limit: float) -> bool:
    """A fall (points, positive = lower) is forgetting when it exceeds the limit and, where its
    paired standard error is known, twice that error."""
    if fall is None or fall <= limit + ROUNDING:
        return False
    return stderr is None or fall > 2.0 * stderr


def paired_stderr(before: Sequence[float] | None, after: Sequence[float] | None) -> float | None:
    """Standard error (points) of the change from ``before`` to ``after``, paired over the
    prompts both were measured on; None when either is unknown or they differ in prompts."""
    if not before or not after or len(before) != len(after):
        return None
    from cascade_rl.metrics import standard_error

    return 100.0 * standard_error([b - a for a, b in zip(before, after)])


@dataclass(frozen=True)
class Change:
    """A benchmark's change from one evaluation to a later one, with its paired error."""

    delta: float
    stderr: float | None

    def text(self, bold: bool = False) -> str:
        text = f"{self.delta:+.1f}" + (f" ± {self.stderr:.1f}" if self.stderr is not None else "")
        return f"**{text}**" if bold else text


def change(before: StageRecord, after: StageRecord, benchmark: str) -> Change | None:
    if benchmark not in before.eval or benchmark not in after.eval:
        return None
    return Change(
        after.eval[benchmark] - before.eval[benchmark],
        paired_stderr(before.prompt_scores.get(benchmark), after.prompt_scores.get(benchmark)),
    )


def stage_changes(summary: RunSummary) -> tuple[list[str], list[list[Change | None]]]:
    """Per evaluated stage, each benchmark's change against its latest earlier evaluation on the
    line the stage descends from (a side branch: against the stage it branched from)."""
    names, rows = [], []
    ordered = evaluations(summary)
    for position, row in enumerate(ordered):
        if not row.eval or (position == 0 and summary.baseline):
            continue
        names.append(row.name)
        rows.append([change(start, row, b) if (start := start_of(ordered, position, b)) else None
                     for b in summary.benchmarks])  # fmt: skip
    return names, rows


#: stage kinds that leave the policy as it was: what they evaluate is the checkpoint before them
_SAME_POLICY = ("reward_model", "eval")


def start_of(ordered: Sequence[StageRecord], position: int, benchmark: str) -> StageRecord | None:
    """The latest evaluation of ``benchmark`` that the checkpoint at ``position`` descends from:
    earlier main-line stages, or for a side branch the stage it branched from and those before."""
    record = ordered[position]
    names = [r.name for r in ordered]
    end = position
    if record.branch_from in names[:position]:
        end = names.index(record.branch_from) + 1
        while end < position and ordered[end].kind in _SAME_POLICY:  # they evaluated that checkpoint too
            end += 1
    line = [r for r in ordered[:end] if r.branch_from is None and benchmark in r.eval]
    return line[-1] if line else None


def descendants(ordered: Sequence[StageRecord], position: int) -> list[StageRecord]:
    """The evaluations after ``position`` that carry its training on: none for a side branch,
    and never a side branch."""
    if ordered[position].branch_from is not None:
        return []
    return [r for r in ordered[position + 1 :] if r.branch_from is None]


def forgetting_matrix(summary: RunSummary) -> tuple[list[str], list[list[float | None]]]:
    """Per evaluated stage, each benchmark's change against its latest earlier value (None
    where either value is missing)."""
    names, rows = stage_changes(summary)
    return names, [[None if c is None else c.delta for c in row] for row in rows]


def gain_for(min_gain: float | Mapping[str, float], stage: str) -> float:
    """The points ``stage`` must add: one number for all stages, or per stage (default 10)."""
    return float(min_gain.get(stage, DEFAULT_MIN_GAIN)) if isinstance(min_gain, Mapping) else float(min_gain)


def check_targets(
    summary: RunSummary,
    targets: Mapping[str, str],
    min_gain: float | Mapping[str, float],
    forgetting_limit: float,
) -> list[TargetCheck]:
    """One check per stage named in ``targets`` (stage name -> own benchmark), in run order;
    targets naming no finished stage come last, marked unfinished. ``min_gain``: points, for
    every stage or per stage name."""
    ordered = evaluations(summary)
    checks = []
    first_stage = 1 if summary.baseline else 0
    for position, record in enumerate(ordered):
        if position < first_stage or record.name not in targets:
            continue
        benchmark = targets[record.name]
        start = start_of(ordered, position, benchmark)
        gain = change(start, record, benchmark) if start else None
        later = [r for r in descendants(ordered, position) if benchmark in r.eval]
        worst = min(later, key=lambda r: r.eval[benchmark]) if later else None
        fall = change(worst, record, benchmark) if worst is not None else None  # end minus the worst value
        checks.append(
            TargetCheck(
                stage=record.name,
                benchmark=benchmark,
                start=start.eval[benchmark] if start else None,
                end=record.eval.get(benchmark),
                min_gain=gain_for(min_gain, record.name),
                worst_later_stage=worst.name if worst else None,
                worst_later_value=worst.eval[benchmark] if worst else None,
                forgetting_limit=forgetting_limit,
                fall_stderr=fall.stderr if fall else None,
                gain_stderr=gain.stderr if gain else None,
            )
        )
    checked = {check.stage for check in checks}
    for stage, benchmark in targets.items():
        if stage not in checked:
            checks.append(TargetCheck(stage, benchmark, None, None, gain_for(min_gain, stage), finished=False))
    return checks


def untargeted_falls(summary: RunSummary, targets: Mapping[str, str], limit: float) -> list[tuple[str, str, Change]]:
    """``(stage, benchmark, change)`` for every fall beyond the forgetting rule (a ⚠ of the change
    matrix) on a benchmark that is no RL stage's own -- an out-of-distribution benchmark such as
    IFBench, or what SFT taught -- which no target check covers."""
    owned = set(targets.values())
    names, changes = stage_changes(summary)
    return [
        (name, benchmark, item)
        for name, row in zip(names, changes)
        for benchmark, item in zip(summary.benchmarks, row)
        if item is not None and benchmark not in owned and is_forgetting(-item.delta, item.stderr, limit)
    ]
