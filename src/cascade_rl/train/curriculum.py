"""Sub-stages and the response-length (and input-context) curriculum of an RL stage (SPEC sections 5-6).

A stage's ``curriculum`` is a list of sub-stages with growing budgets (math: 24K with overlong
filtering -> 32K without -> 40K; SWE: input context 16K -> 24K). Each sub-stage starts from the
previous one's checkpoint and ends after its ``max_steps`` (the fallback) or when a stop rule
says so, never before ``stop_min_steps`` (:class:`SubstageStop`):

* the **truncation rule** (:class:`TruncationStopRule`, math): the truncation ("clip") ratio
  *reaches* the threshold (paper: ~10%) -- the 24K **compression** sub-stage starts with 30-50%
  of rollouts truncated and ends when the ratio has *fallen* to it (``stop_direction: falls``),
  the **extension** sub-stages start with few truncated and end when it has *risen* to it
  (``rises``), ``auto`` takes the side the first window starts on; on a moving average over
  ``stop_window`` steps;
* the **reward-plateau rule** (:class:`RewardPlateauRule`, SWE): the 16K warm-up ends "when the
  reward plateaus (little improvement over consecutive iterations)" -- here, when the mean reward
  of the last ``plateau_window`` steps is at most ``plateau_tolerance`` above that of the
  ``plateau_window`` steps before (the paper gives no numbers: the SWE preset's 10 steps and 0.01
  are this project's).

The rules see each logged step's metrics as ``metrics.jsonl`` records them (``truncation_ratio``,
``reward/mean``), so a resumed sub-stage replays its log into them and decides as the
uninterrupted one would. They know no trainer (DESIGN convention 12).

Sub-stages hand over by directory like stages do (``substage-N/model`` + ``done``), so
``--resume`` continues after the last finished sub-stage; a sub-stage that was interrupted
continues from its last checkpoint (the sub-stage runner finds it). A sub-stage's trainer is
freed before the next one starts (:func:`release_memory`): the trainer, its reward and callbacks
refer to each other, and the cycle holding the model, its gradients and Adam's moments would
otherwise outlive it.
"""

from __future__ import annotations

import ctypes
import gc
import json
import sys
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from statistics import mean
from typing import TypeVar

from cascade_rl.recipe import CurriculumStep
from cascade_rl.train import distributed

T = TypeVar("T")


class TruncationStopRule:
    """Decides, step by step, whether a curriculum sub-stage has reached its truncation ratio."""

    def __init__(self, threshold: float | None, *, direction: str = "auto", window: int = 10, min_steps: int = 20):
        self.threshold, self.direction = threshold, direction
        self.window, self.min_steps = window, min_steps
        self.recent: deque[float] = deque(maxlen=window)
        self.steps = 0
        self.stopped_at: int | None = None
        self.ratio: float | None = None

    def observe(self, step: int, ratio: float) -> bool:
        """Record step ``step``'s truncation ratio; True when the sub-stage should end now."""
        if self.threshold is None:
            return False
        self.steps += 1
        self.recent.append(float(ratio))
        if len(self.recent) < self.window:
            return False
        average = mean(self.recent)
        if self.direction == "auto":  # the first full window says which way the ratio must move
            self.direction = "falls" if average > self.threshold else "rises"
        reached = average <= self.threshold if self.direction == "falls" else average >= self.threshold
        if reached and self.steps >= self.min_steps:
            self.stopped_at, self.ratio = step, average
            return True
        return False

    @classmethod
    def for_step(cls, step: CurriculumStep) -> TruncationStopRule:
        """The rule of a recipe curriculum step."""
        return cls(
            step.stop_truncation_ratio,
            direction=step.stop_direction,
            window=step.stop_window,
            min_steps=step.stop_min_steps,
        )


class RewardPlateauRule:
    """Decides, step by step, whether a sub-stage's reward has plateaued (module docstring)."""

    def __init__(self, window: int | None, *, tolerance: float = 0.01, min_steps: int = 1):
        self.window, self.tolerance, self.min_steps = window, tolerance, min_steps
        self.recent: deque[float] = deque(maxlen=2 * window if window else 1)
        self.steps = 0
        self.stopped_at: int | None = None
        #: the two windows' rewards when the rule ended the sub-stage: (earlier, last)
        self.windows: tuple[list[float], list[float]] | None = None

    def observe(self, step: int, reward: float) -> bool:
        """Record step ``step``'s mean reward; True when the sub-stage should end now."""
        if self.window is None:
            return False
        self.steps += 1
        self.recent.append(float(reward))
        if len(self.recent) < 2 * self.window or self.steps < self.min_steps:
            return False
        earlier, last = list(self.recent)[: self.window], list(self.recent)[self.window :]
        if mean(last) - mean(earlier) <= self.tolerance:
            self.stopped_at, self.windows = step, (earlier, last)
            return True
        return False

    @property
    def gain(self) -> float | None:
        """The last window's mean reward minus the earlier one's, when the rule ended the sub-stage."""
        return None if self.windows is None else mean(self.windows[1]) - mean(self.windows[0])

    @classmethod
    def for_step(cls, step: CurriculumStep) -> RewardPlateauRule:
        """The rule of a recipe curriculum step."""
        return cls(step.plateau_window, tolerance=step.plateau_tolerance, min_steps=step.stop_min_steps)


class SubstageStop:
    """A curriculum step's stop rules fed with its logged steps (module docstring): which rule
    ended the sub-stage, at which step, and on what."""

    def __init__(self, step: CurriculumStep):
        self.truncation = TruncationStopRule.for_step(step)
        self.plateau = RewardPlateauRule.for_step(step)
        self.stopped_by: str | None = None

    def observe(self, step: int, metrics: Mapping[str, float]) -> bool:
        """One logged step's metrics (``metrics.jsonl``'s names); True when the sub-stage ends now."""
        if self.stopped_by is not None:
            return True
        ratio, reward = metrics.get("truncation_ratio"), metrics.get("reward/mean")
        if ratio is not None and self.truncation.observe(step, ratio):
            self.stopped_by = "truncation_ratio"
        elif reward is not None and self.plateau.observe(step, reward):
            self.stopped_by = "reward_plateau"
        return self.stopped_by is not None

    def summary(self) -> dict:
        """What ended the sub-stage (``max_steps`` when no rule did), for its ``done`` record."""
        record: dict = {"stopped_by": self.stopped_by or "max_steps"}
        if self.stopped_by == "truncation_ratio":
            record.update(stopped_at=self.truncation.stopped_at, truncation_ratio=self.truncation.ratio)
        elif self.stopped_by == "reward_plateau":
            earlier, last = self.plateau.windows or ([], [])
            record.update(
                stopped_at=self.plateau.stopped_at,
                plateau={"earlier_rewards": earlier, "last_rewards": last, "gain": self.plateau.gain},
            )
        return record

    def explain(self) -> str:
        """One line saying which rule ended the sub-stage and on what."""
        if self.stopped_by == "truncation_ratio":
            return (
                f"truncation ratio {self.truncation.ratio:.3f} over the last {self.truncation.window} steps reached "
                f"{self.truncation.threshold} at step {self.truncation.stopped_at}"
            )
        if self.stopped_by == "reward_plateau":
            earlier, last = self.plateau.windows or ([], [])
            return (
                f"reward plateau at step {self.plateau.stopped_at}: mean {mean(last):.4f} over the last "
                f"{len(last)} steps, {mean(earlier):.4f} over the {len(earlier)} before (gain {self.plateau.gain:+.4f} "
                f"<= {self.plateau.tolerance})"
            )
        return "no stop rule ended it (max_steps)"


def run_substages(
    steps: Sequence[T], stage_dir: Path, start_model: Path, run_substage: Callable[[int, T, Path, Path], dict]
) -> Path:
    """Run each sub-stage (a curriculum step, or an SFT sub-stage) from the previous one's
    model; skip finished ones (resume). An unfinished one is handed to ``run_substage`` as it
    is: it continues from its last checkpoint, or starts over when there is none.

    ``run_substage(index, step, model_in, substage_dir)`` trains, saves ``substage_dir/model``
    and returns a summary (steps run, why it stopped) recorded in ``substage_dir/done``.
    Every process calls this; only the main process writes. Returns the last model directory.
    """
    model = Path(start_model)
    for index, step in enumerate(steps):
        substage_dir = stage_dir / f"substage-{index + 1}"
        if not distributed.on_main("sub-stage status", partial(_open_substage, substage_dir)):
            summary = run_substage(index, step, model, substage_dir)
            release_memory()
            distributed.on_main("sub-stage done", partial(_write_text, substage_dir / "done", json.dumps(summary)))
        model = substage_dir / "model"
    return model


def release_memory() -> None:
    """Free what a finished sub-stage left in reference cycles and hand the freed heap back to
    the system (glibc keeps it otherwise). The whole real recipe in one process ran out of its
    24 GiB at the first step of IF-RL's second sub-stage, with the first one's trainer (model,
    gradients, Adam's moments: ~2.2 GB for 135M parameters in float32) still alive."""
    gc.collect()
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc (musl): nothing to trim
            pass


def _open_substage(substage_dir: Path) -> bool:
    """Whether the sub-stage has finished; if not, make sure its directory exists."""
    if (substage_dir / "done").exists() and (substage_dir / "model").exists():
        return True
    substage_dir.mkdir(parents=True, exist_ok=True)
    return False


def _write_text(path: Path, text: str) -> None:
    path.write_text(text)


def merge_substage_metrics(stage_dir: Path, substages: int) -> None:
    """Concatenate the sub-stages' metrics into the stage's ``metrics.jsonl`` with a global step
    (main process only)."""
    if not distributed.is_main():
        return
    offset = 0
    lines = []
    for index in range(1, substages + 1):
        path = stage_dir / f"substage-{index}" / "metrics.jsonl"
        last = 0
        for line in path.read_text().splitlines() if path.exists() else []:
            record = json.loads(line)
            last = max(last, int(record.get("step", 0)))
            record["substage_step"] = record.get("step", 0)
            record["step"] = offset + record.get("step", 0)
            lines.append(json.dumps(record))
        offset += last
    (stage_dir / "metrics.jsonl").write_text("\n".join(lines) + ("\n" if lines else ""))
