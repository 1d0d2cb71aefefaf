"""Sub-stages and the response-length (and input-context) curriculum of an RL stage (SPEC section 5).

A stage's ``curriculum`` is a list of sub-stages with growing budgets (math: 24K with overlong
filtering -> 32K without -> 40K). Each sub-stage starts from the previous one's checkpoint and
ends after its ``max_steps`` or, with ``stop_truncation_ratio``, as soon as the truncation
("clip") ratio of a step reaches the threshold (paper: ~10%).

Sub-stages hand over by directory like stages do (``substage-N/model`` + ``done``), so
``--resume`` continues after the last finished sub-stage.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from transformers import TrainerCallback

T = TypeVar("T")


class TruncationStop(TrainerCallback):
    """Stop training once a logged step's truncation ratio reaches ``threshold``."""

    def __init__(self, threshold: float | None):
        self.threshold = threshold
        self.stopped_at: int | None = None
        self.ratio: float | None = None

    def on_log(self, args, state, control, logs=None, **kwargs):
        ratio = (logs or {}).get("completions/clipped_ratio")
        if self.threshold is None or ratio is None:
            return
        if float(ratio) >= self.threshold:
            self.stopped_at, self.ratio = state.global_step, float(ratio)
            control.should_training_stop = True


def run_substages(
    steps: Sequence[T], stage_dir: Path, start_model: Path, run_substage: Callable[[int, T, Path, Path], dict]
) -> Path:
    """Run each sub-stage (a curriculum step, or an SFT sub-stage) from the previous one's
    model; skip finished ones (resume) and redo a half-written one.

    ``run_substage(index, step, model_in, substage_dir)`` trains, saves ``substage_dir/model``
    and returns a summary (steps run, why it stopped) recorded in ``substage_dir/done``.
    Returns the last sub-stage's model directory.
    """
    model = Path(start_model)
    for index, step in enumerate(steps):
        substage_dir = stage_dir / f"substage-{index + 1}"
        marker = substage_dir / "done"
        if marker.exists() and (substage_dir / "model").exists():
            model = substage_dir / "model"
            continue
        shutil.rmtree(substage_dir, ignore_errors=True)  # half-written: redo it
        substage_dir.mkdir(parents=True)
        summary = run_substage(index, step, model, substage_dir)
        marker.write_text(json.dumps(summary))
        model = substage_dir / "model"
    return model


def merge_substage_metrics(stage_dir: Path, substages: int) -> None:
    """Concatenate the sub-stages' metrics into the stage's ``metrics.jsonl`` with a global step."""
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
