"""Outputs of ``cascade tts`` (SPEC section 8; the paper's Figure 5 shows the same curve): the
score trajectory over rounds as a PNG, and the run's summary (score and budgets per problem)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from cascade_rl.tts.store import write_atomic


def plot_trajectories(trajectories: Mapping[str, tuple[Sequence[dict], float]], path: Path) -> Path:
    """Score after each round (left) and submissions used (right), one line per problem; the
    problem's maximum score is the dotted line of the same colour."""
    figure = Figure(figsize=(11, 4), dpi=100)
    score_axes, submission_axes = figure.subplots(1, 2)
    for position, (problem_id, (rows, max_score)) in enumerate(trajectories.items()):
        color = f"C{position % 10}"
        rounds = [row["round"] for row in rows]
        scores = [row["score"] for row in rows]
        score_axes.plot(rounds, scores, drawstyle="steps-post", marker=".", color=color, label=problem_id)
        score_axes.axhline(max_score, color=color, linestyle=":", linewidth=1)
        submission_axes.plot(rounds, [row["submissions"] for row in rows], color=color, marker=".", label=problem_id)
    score_axes.set(xlabel="round", ylabel="problem score (best per subtask, summed)", title="score trajectory")
    submission_axes.set(xlabel="round", ylabel="submissions used", title="submissions")
    for axes in (score_axes, submission_axes):
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.yaxis.set_major_locator(MaxNLocator(integer=axes is submission_axes))
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.stem}.tmp.png")
    figure.savefig(temporary)
    temporary.replace(path)
    return path


def totals(summaries: Sequence[dict]) -> dict:
    return {
        "score": round(sum(s["score"] for s in summaries), 6),
        "max_score": sum(s["max_score"] for s in summaries),
        "generations": sum(s["generations"]["used"] for s in summaries),
        "submissions": sum(s["submissions"]["used"] for s in summaries),
    }


def write_run_summary(out: Path, summaries: Sequence[dict]) -> Path:
    path = out / "summary.json"
    write_atomic(path, json.dumps({"problems": list(summaries), "total": totals(summaries)}, indent=2) + "\n")
    return path
