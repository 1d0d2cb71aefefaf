"""The run report's plots (PNG, matplotlib imported on use): training curves of every RL stage,
the forgetting heat map, and response length and entropy across stages.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cascade_rl.eval.forgetting import forgetting_matrix
from cascade_rl.eval.runs import SAMPLE_RATES, RunSummary, StageRecord, evaluations

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _step_axis(metrics: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[int]]:
    """x positions (cumulative step) and the positions where a new sub-stage starts (its step
    counter restarts or its ``substage`` key changes)."""
    positions, boundaries = [], []
    for position, row in enumerate(metrics, start=1):
        if position > 1:
            previous = metrics[position - 2]
            restarted = (
                isinstance(row.get("step"), (int, float))
                and isinstance(previous.get("step"), (int, float))
                and row["step"] <= previous["step"]
            )
            if restarted or row.get("substage") != previous.get("substage"):
                boundaries.append(position)
        positions.append(position)
    return positions, boundaries


def _series(metrics: Sequence[Mapping[str, Any]], key: str, positions: Sequence[int]) -> tuple[list[int], list[float]]:
    pairs = [
        (x, float(row[key]))
        for x, row in zip(positions, metrics)
        if isinstance(row.get(key), (int, float)) and not isinstance(row.get(key), bool)
    ]
    return [x for x, _ in pairs], [y for _, y in pairs]


def plot_training_curves(stage: StageRecord, path: Path) -> Path:
    """Reward (mean, ±std band, per domain) and response length (mean, think, no_think) per step."""
    metrics = stage.metrics
    positions, boundaries = _step_axis(metrics)
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11, 4), dpi=100)
    reward_axes, length_axes = figure.subplots(1, 2)
    xs, mean = _series(metrics, "reward/mean", positions)
    reward_axes.plot(xs, mean, color="black", linewidth=2, label="reward/mean")
    std_xs, std = _series(metrics, "reward/std", positions)
    if std_xs == xs and xs:
        reward_axes.fill_between(
            xs,
            [m - s for m, s in zip(mean, std)],
            [m + s for m, s in zip(mean, std)],
            color="grey",
            alpha=0.25,
            label="± std",
        )
    domain_keys = sorted(
        {
            key
            for row in metrics
            for key in row
            if key.startswith("reward/") and key.endswith("/mean") and key.count("/") == 2
        }
    )
    for key in domain_keys:
        reward_axes.plot(*_series(metrics, key, positions), linewidth=1, label=key)
    rate_keys = sorted({key for row in metrics for key in row if key.split("/")[-1] in SAMPLE_RATES})
    for key in rate_keys:  # shares in [0, 1], e.g. reward/swe/applied
        reward_axes.plot(*_series(metrics, key, positions), linewidth=1, linestyle=":", label=key)
    for key, style in (
        ("response_length/mean", "-"),
        ("response_length/think", "--"),
        ("response_length/no_think", ":"),
    ):
        length_axes.plot(*_series(metrics, key, positions), linestyle=style, label=key)
    for axes, title in ((reward_axes, "reward per step"), (length_axes, "response length per step (tokens)")):
        for boundary in boundaries:
            axes.axvline(boundary - 0.5, color="grey", linestyle="--", linewidth=0.8)
        axes.set_title(f"{stage.name}: {title}")
        axes.set_xlabel("step" + (" (sub-stages separated)" if boundaries else ""))
        axes.grid(alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


def plot_forgetting(summary: RunSummary, targets: Mapping[str, str], path: Path) -> Path | None:
    """Heat map of the forgetting matrix; own-domain cells outlined."""
    names, deltas = forgetting_matrix(summary)
    if not names or not summary.benchmarks:
        return None
    grid = [[math.nan if d is None else d for d in row] for row in deltas]
    limit = max([abs(d) for row in deltas for d in row if d is not None] + [1.0])
    from matplotlib.figure import Figure

    figure = Figure(figsize=(1.3 * len(summary.benchmarks) + 2.5, 0.55 * len(names) + 1.8), dpi=100)
    axes = figure.subplots()
    image = axes.imshow(grid, cmap="RdYlGn", vmin=-limit, vmax=limit, aspect="auto")
    axes.set_xticks(range(len(summary.benchmarks)), summary.benchmarks, rotation=30, ha="right")
    axes.set_yticks(range(len(names)), [f"after {name}" for name in names])
    for r, row in enumerate(deltas):
        for c, delta in enumerate(row):
            own = targets.get(names[r]) == summary.benchmarks[c]
            axes.text(
                c,
                r,
                "—" if delta is None else f"{delta:+.1f}",
                ha="center",
                va="center",
                fontsize=9,
                fontweight="bold" if own else "normal",
            )
            if own:
                axes.add_patch(_outline(c, r))
    axes.set_title("change vs previous evaluation (points)\noutlined: the stage's own domain", fontsize=10)
    figure.colorbar(image, ax=axes)
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


def plot_length_entropy(summary: RunSummary, path: Path) -> Path | None:
    """Response length on every benchmark after each stage; entropy and rollout length per
    step through the RL stages (stage boundaries marked)."""
    records = [r for r in evaluations(summary) if r.response_length]
    rl_rows = [r for r in summary.rows if r.kind == "grpo" and r.metrics]
    if not records and not rl_rows:
        return None
    from matplotlib.figure import Figure

    figure = Figure(figsize=(15, 4), dpi=100)
    length_axes, entropy_axes, rollout_axes = figure.subplots(1, 3)
    names = [r.name for r in records]
    for benchmark in summary.benchmarks:
        points = [(i, r.response_length[benchmark]) for i, r in enumerate(records) if benchmark in r.response_length]
        if points:
            length_axes.plot([i for i, _ in points], [v for _, v in points], marker="o", label=benchmark)
    length_axes.set_xticks(range(len(names)), names, rotation=30, ha="right")
    length_axes.set_title(f"benchmark response length after each stage ({summary.length_unit})")
    offset = 0
    for row in rl_rows:
        positions = [offset + p for p in _step_axis(row.metrics)[0]]
        entropy_axes.plot(*_series(row.metrics, "entropy", positions), label=row.name)
        rollout_axes.plot(*_series(row.metrics, "response_length/mean", positions), label=row.name)
        for axes in (entropy_axes, rollout_axes):
            axes.axvline(offset + 0.5, color="grey", linestyle="--", linewidth=0.8)
        offset += len(row.metrics)
    entropy_axes.set_title("rollout entropy per RL step (nats / token)")
    rollout_axes.set_title("rollout length per RL step (tokens)")
    for axes in (entropy_axes, rollout_axes):
        axes.set_xlabel("RL step, stages in order")
    for axes in (length_axes, entropy_axes, rollout_axes):
        axes.grid(alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


def _outline(column: int, row: int):
    from matplotlib.patches import Rectangle

    return Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=2)
