"""Sub-stages and the response-length (and input-context) curriculum of an RL stage (SPEC section 5).

A stage's ``curriculum`` is a list of sub-stages with growing budgets (math: 24K with overlong
filtering -> 32K without -> 40K). Each sub-stage starts from the previous one's checkpoint and
ends after its ``max_steps`` or when its truncation ("clip") ratio *reaches* the threshold
(paper: ~10%), judged by :class:`TruncationStopRule`:

* the 24K **compression** sub-stage starts with 30-50% of rollouts truncated and ends when the
  ratio has *fallen* to the threshold (``stop_direction: falls``);
* the **extension** sub-stages start with few truncated rollouts and end when the ratio has
  *risen* to it (``rises``);
* ``auto`` takes the side the first window starts on;

always on a moving average over ``stop_window`` steps, and never before ``stop_min_steps``.
The rule knows no trainer (DESIGN convention 12).

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
from collections.abc import Callable, Sequence
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
