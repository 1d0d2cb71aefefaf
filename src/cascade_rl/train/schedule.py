"""Which prompts each RL step trains (SPEC sections 5-6), decided once and identically on every
process, whatever engine runs the step (DESIGN convention 12).

A :class:`PromptSchedule` draws step after step: ``prompts_per_batch`` prompts, each in its
thinking mode (:func:`~cascade_rl.train.filtering.split_modes`: exactly half each for
``half``), in epochs over the prompt set; each epoch is a seeded permutation of the prompts the
epoch-level dynamic filter admits (:class:`~cascade_rl.train.filtering.FilterState`). An epoch
that ends inside a batch fills the rest of that batch from the next epoch.

**Results arrive late.** Engines read one step ahead: TRL's data loader draws step ``t + 1``
before step ``t`` is generated. So the draw of step ``t`` sees the results of steps up to
``t - 2`` and no later (``lag = 2``), whatever the engine's timing: the decision is a function
of the seed and of the results, never of when they arrived. Prompts whose results are not yet
visible when an epoch starts are decided last in that epoch; the filter is exact whenever an
epoch spans three steps or more (any real stage; the tiny tests check the edge cases).

**Resume.** :meth:`PromptSchedule.checkpoint` gives the state after ``trained_through`` steps
(the schedule may already have drawn the next step: a snapshot from before that draw is
used), so a run resumed from it — or the next curriculum sub-stage started from it — draws
exactly the prompts the uninterrupted run would have drawn.

**One schedule per data set.** A schedule's prompts are one data set's; a curriculum sub-stage
on another set (its own ``data``) has its own schedule, which numbers its steps on from the
previous sub-stage's (:meth:`PromptSchedule.continue_at`). A sub-stage that returns to a set
continues that set's last schedule, its epoch and dynamic-filter verdicts included.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cascade_rl.recipe import DynamicFilter
from cascade_rl.train.filtering import FilterState, split_modes

LAG = 2
#: steps of results and snapshots kept beyond what the next draw needs
_KEEP = 4


@dataclass(frozen=True)
class StepDraw:
    """The prompts of one step, in slot order, with their modes and epochs."""

    step: int
    prompts: tuple[int, ...]
    modes: tuple[str, ...]
    epochs: tuple[int, ...]


class PromptSchedule:
    """The sequence of steps of one RL stage; see the module docstring."""

    def __init__(
        self,
        prompts: Sequence[int],
        *,
        prompts_per_batch: int,
        thinking: str,
        dynamic_filter: DynamicFilter,
        seed: int = 0,
        modes: Mapping[int, str] | None = None,
    ):
        if not prompts:
            raise ValueError("the stage has no prompts to train on")
        #: the prompts this schedule may draw (a sub-stage's input-context budget can narrow them)
        self.prompts = sorted(set(prompts))
        self.batch, self.thinking, self.seed = prompts_per_batch, thinking, seed
        #: prompts whose mode is fixed (by their reward domain); the others take their slot's mode
        self.fixed_modes = dict(modes or {})
        self.config = dynamic_filter
        self.filter = FilterState(dynamic_filter, seed=seed)
        self.next_step = 1  # steps are numbered as the trainer counts them: 1, 2, ...
        self.order: list[int] = []
        self.position = 0
        self.admitted = 0
        self.refill = False
        self.ingested_through = 0
        #: prompts of drawn steps whose results are not visible yet
        self.drawn: dict[int, list[int]] = {}
        #: results per step: [(prompt, reward or None)]
        self.results: dict[int, list[tuple[int, float | None]]] = {}
        self._snapshots: dict[int, dict] = {}
        self._eligible = set(self.prompts)
        self._start_epoch(pending=set())

    # ----------------------------------------------------------------- drawing
    def draw(self) -> StepDraw:
        """The next step's prompts (decided from results up to ``step - LAG``)."""
        step = self.next_step
        self._snapshots[step] = self.state_dict(with_results=False)
        self._snapshots = {s: snap for s, snap in self._snapshots.items() if s > step - _KEEP}
        self._ingest_through(step - LAG)
        prompts: list[int] = []
        epochs: list[int] = []
        while len(prompts) < self.batch:
            prompt = self._next_prompt(pending=set(prompts))
            prompts.append(prompt)
            epochs.append(self.filter.epoch)
        modes = split_modes(len(prompts), self.thinking, random.Random(f"{self.seed}:modes:{step}"))
        modes = [self.fixed_modes.get(prompt, mode) for prompt, mode in zip(prompts, modes)]
        self.drawn[step] = prompts
        self.next_step = step + 1
        return StepDraw(step, tuple(prompts), tuple(modes), tuple(epochs))

    def record(self, step: int, prompts: Sequence[int], rewards: Sequence[float | None]) -> None:
        """The rewards of step ``step``'s rollouts (every process's, in any order)."""
        if step >= self.next_step:
            raise ValueError(f"results for step {step}, which has not been drawn (next step {self.next_step})")
        self.results[step] = [(int(p), None if r is None else float(r)) for p, r in zip(prompts, rewards)]

    def _ingest_through(self, last: int) -> None:
        for step in range(self.ingested_through + 1, last + 1):
            if step not in self.results:
                raise RuntimeError(
                    f"step {step}'s rewards were never recorded before step {step + LAG} was drawn: the engine read "
                    f"more than one step ahead, which the schedule does not support"
                )
            for prompt, reward in self.results[step]:
                self.filter.record(prompt, reward)
            self.drawn.pop(step, None)
            self.ingested_through = step
        self.results = {s: r for s, r in self.results.items() if s > self.ingested_through - _KEEP}

    def _next_prompt(self, pending: set[int]) -> int:
        while True:
            if self.position >= len(self.order):
                self._finish_epoch(pending)
                continue
            prompt = self.order[self.position]
            self.position += 1
            if prompt not in self._eligible:  # an order carried over from a sub-stage with more prompts
                continue
            if self.refill:
                return prompt
            self.filter.close_prompt_epoch(prompt)
            if self.filter.admit(prompt):
                self.admitted += 1
                return prompt

    def _finish_epoch(self, pending: set[int]) -> None:
        if self.admitted == 0 and not self.refill:  # everything filtered out: train on all rather than stall
            self.filter.counts["refilled_empty_epoch"] += 1
            self.refill, self.position = True, 0
            return
        self.filter.epoch += 1
        self._start_epoch(pending)

    def _start_epoch(self, pending: set[int]) -> None:
        """A seeded permutation; prompts whose latest results are not visible yet go last."""
        order = list(self.prompts)
        random.Random(f"{self.seed}:{self.filter.epoch}:order").shuffle(order)
        unseen = pending.union(*self.drawn.values()) if self.drawn else set(pending)
        self.order = [p for p in order if p not in unseen] + [p for p in order if p in unseen]
        self.position, self.admitted, self.refill = 0, 0, False

    # ----------------------------------------------------------------- state
    def state_dict(self, *, with_results: bool = True) -> dict:
        state = {
            "next_step": self.next_step,
            "filter": self.filter.to_dict(),
            "order": list(self.order),
            "position": self.position,
            "admitted": self.admitted,
            "refill": self.refill,
            "ingested_through": self.ingested_through,
            "drawn": {str(s): list(p) for s, p in self.drawn.items()},
        }
        if with_results:  # those still to be ingested (older ones are kept only for checkpoint())
            state["results"] = _results_dict({s: r for s, r in self.results.items() if s > self.ingested_through})
        return state

    def load_state_dict(self, state: dict) -> None:
        self.next_step = int(state["next_step"])
        self.filter = FilterState.from_dict(self.config, state["filter"])
        self.order = [int(p) for p in state["order"]]
        self.position, self.admitted = int(state["position"]), int(state["admitted"])
        self.refill, self.ingested_through = bool(state["refill"]), int(state["ingested_through"])
        self.drawn = {int(s): [int(p) for p in prompts] for s, prompts in state["drawn"].items()}
        self.results = {
            int(s): [(int(p), None if r is None else float(r)) for p, r in rows]
            for s, rows in state.get("results", {}).items()
        }
        self._snapshots = {}

    def continue_at(self, step: int) -> None:
        """Go on drawing at step ``step`` after steps this schedule did not draw (a sub-stage on
        another data set trained them): every result recorded so far is taken into the filter
        first, as the steps in between have made them visible."""
        if step < self.next_step:
            raise ValueError(f"cannot continue at step {step}: step {self.next_step - 1} was drawn already")
        self._ingest_through(self.next_step - 1)
        self.next_step, self.ingested_through = step, step - 1
        self.drawn, self.results, self._snapshots = {}, {}, {}

    def checkpoint(self, trained_through: int) -> dict:
        """The state to continue from after ``trained_through`` steps were trained (and their
        results recorded), even if the schedule has already drawn the step after."""
        following = trained_through + 1
        if self.next_step == following:
            state = self.state_dict(with_results=False)
        elif following in self._snapshots:
            state = dict(self._snapshots[following])
        else:
            raise RuntimeError(f"no schedule snapshot before step {following} (next step {self.next_step})")
        missing = [s for s in range(state["ingested_through"] + 1, following) if s not in self.results]
        if missing:
            raise RuntimeError(f"checkpoint after step {trained_through}: results of steps {missing} missing")
        state["results"] = _results_dict({s: self.results[s] for s in range(state["ingested_through"] + 1, following)})
        return state

    def digest(self) -> str:
        """A short hash of the whole state: equal on every process, or they disagree."""
        text = json.dumps(self.state_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def metrics(self) -> dict[str, float]:
        values = {f"filter/{name}": float(count) for name, count in self.filter.counts.items()}
        values["filter/epoch"] = float(self.filter.epoch)
        return values


def _results_dict(results: dict[int, list[tuple[int, float | None]]]) -> dict[str, list]:
    return {str(s): [[p, r] for p, r in rows] for s, rows in sorted(results.items())}
