"""Side by side: finished runs of different recipes on the same benchmarks (SPEC section 1: the
paper's claim that domain-wise stages in sequence beat one joint RL stage over all domains at
the same compute; ``recipes/tiny.yaml`` against ``recipes/tiny-joint.yaml``).

``cascade compare RUN_A RUN_B [...]`` reads each run directory (as :mod:`.report` does) and
writes ``compare.md``, ``compare.json`` and ``compare.png`` into ``--out``:

* **final values**: each benchmark after the run's last evaluation, ± its standard error over
  prompts; for every run after the first, its difference from the first run, ± the standard
  error of that difference *paired over prompts* (both runs answered the same prompts);
* **gain over SFT**: each benchmark's change from its value on the SFT checkpoint (the last
  evaluation before the first RL stage) to its final value, paired standard error;
* **largest fall**: each benchmark's largest drop from an earlier evaluation to a later one
  (from the SFT checkpoint on), with the stages involved and its paired standard error;
* **cost**: wall time of the whole run and of its RL stages, RL steps (optimizer updates) and
  rollouts, so a reader checks that the runs had the same compute.

Bad input: a run that is not finished (its ``recipe.json`` names stages with no finished
directory) is refused naming the missing stages, unless ``partial`` is asked for; runs with
different benchmark sets are compared on the common ones and the others are named.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cascade_rl.eval.forgetting import Change, change, paired_stderr
from cascade_rl.eval.runs import RunSummary, StageRecord, evaluations, summarize_run
from cascade_rl.eval.tables import format_duration, format_table, value_text


class CompareError(ValueError):
    """Runs that cannot be compared (missing, unfinished, nothing in common)."""


@dataclass
class Fall:
    """The largest drop of one benchmark within a run, from one evaluation to a later one."""

    change: Change
    peak: str
    low: str


@dataclass
class RunView:
    """What the comparison shows of one run."""

    run_dir: Path
    summary: RunSummary
    missing: list[str] = field(default_factory=list)  # stages the recipe names that have not finished
    final: dict[str, StageRecord] = field(default_factory=dict)  # benchmark -> its last evaluation
    start: dict[str, StageRecord] = field(default_factory=dict)  # benchmark -> its value on the SFT checkpoint

    @property
    def name(self) -> str:
        return self.run_dir.name

    @property
    def rl_rows(self) -> list[StageRecord]:
        return [row for row in self.summary.rows if row.kind == "grpo"]

    @property
    def rl_wall_s(self) -> float:
        return sum(row.wall_s for row in self.rl_rows)

    @property
    def rl_steps(self) -> int:
        return sum(len(row.metrics) for row in self.rl_rows)

    @property
    def rollouts(self) -> int:
        return int(sum(m.get("rollouts/total", 0) for row in self.rl_rows for m in row.metrics))

    def gain(self, benchmark: str) -> Change | None:
        if benchmark not in self.start or benchmark not in self.final:
            return None
        return change(self.start[benchmark], self.final[benchmark], benchmark)

    def largest_fall(self, benchmark: str) -> Fall | None:
        """The largest drop (positive points) between two evaluations, the first at or after
        the SFT checkpoint; None when the benchmark never fell."""
        ordered = [r for r in evaluations(self.summary) if benchmark in r.eval]
        if benchmark in self.start:
            ordered = ordered[ordered.index(self.start[benchmark]) :]
        best: Fall | None = None
        for i, peak in enumerate(ordered):
            for low in ordered[i + 1 :]:
                drop = peak.eval[benchmark] - low.eval[benchmark]
                if drop > 0 and (best is None or drop > best.change.delta):
                    stderr = paired_stderr(low.prompt_scores.get(benchmark), peak.prompt_scores.get(benchmark))
                    best = Fall(Change(drop, stderr), peak.name, low.name)
        return best


def load_run(run_dir: Path, *, partial: bool = False) -> RunView:
    """A run's view; a run whose recipe names stages that have not finished is refused (named)
    unless ``partial``."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CompareError(f"{run_dir}: no such run directory")
    summary = summarize_run(run_dir)
    if not summary.rows:
        raise CompareError(f"{run_dir}: no finished stage (is this a run directory of `cascade run`?)")
    view = RunView(run_dir, summary, missing=_missing_stages(run_dir, summary))
    if view.missing and not partial:
        raise CompareError(
            f"{run_dir} has not finished: stage(s) {', '.join(view.missing)} missing; finish it with "
            f"`cascade run RECIPE --out {run_dir} --resume` (or pass --partial to compare what is done)"
        )
    ordered = evaluations(summary)
    first_rl = next((i for i, r in enumerate(ordered) if r.kind == "grpo"), len(ordered))
    for record in ordered:
        for benchmark in record.eval:
            view.final[benchmark] = record
    for record in ordered[:first_rl]:
        for benchmark in record.eval:
            view.start[benchmark] = record
    return view


def _missing_stages(run_dir: Path, summary: RunSummary) -> list[str]:
    path = run_dir / "recipe.json"
    if not path.exists():
        return list(summary.unfinished)
    try:
        stages = [str(s.get("name")) for s in json.loads(path.read_text()).get("stages", [])]
    except (json.JSONDecodeError, AttributeError) as error:
        raise CompareError(f"{path}: not a recipe.json written by `cascade run` ({error})") from None
    done = {row.name for row in summary.rows}
    return [name for name in stages if name not in done]


@dataclass
class Comparison:
    runs: list[RunView]
    benchmarks: list[str]  # evaluated by every run
    only_in: dict[str, list[str]]  # benchmark -> the runs that have it, for the others

    def notes(self) -> list[str]:
        lines = [f"{benchmark} is left out: only in {', '.join(names)}" for benchmark, names in self.only_in.items()]
        lines += [
            f"{view.name} is unfinished: stage(s) {', '.join(view.missing)} missing"
            for view in self.runs
            if view.missing
        ]
        return lines


def compare(run_dirs: Sequence[Path], *, partial: bool = False) -> Comparison:
    if len(run_dirs) < 2:
        raise CompareError("compare needs at least two run directories")
    names = [Path(d).name for d in run_dirs]
    if len(set(names)) < len(names):
        raise CompareError(f"run directories must have different names to tell them apart: {', '.join(names)}")
    runs = [load_run(Path(d), partial=partial) for d in run_dirs]
    every = list(dict.fromkeys(b for view in runs for b in view.summary.benchmarks))
    common = [b for b in every if all(b in view.final for view in runs)]
    if not common:
        raise CompareError(f"the runs have no benchmark in common ({', '.join(every) or 'none evaluated'})")
    only_in = {b: [view.name for view in runs if b in view.final] for b in every if b not in common}
    return Comparison(runs, common, only_in)


# ---------------------------------------------------------------- tables


def _final_rows(comparison: Comparison) -> list[list[Any]]:
    first = comparison.runs[0]
    rows = []
    for benchmark in comparison.benchmarks:
        row: list[Any] = [benchmark] + [value_text(view.final[benchmark], benchmark) for view in comparison.runs]
        for view in comparison.runs[1:]:
            row.append(change(first.final[benchmark], view.final[benchmark], benchmark).text())  # type: ignore[union-attr]
        rows.append(row)
    return rows


def _gain_rows(comparison: Comparison) -> list[list[Any]]:
    return [
        [benchmark] + [_text(view.gain(benchmark)) for view in comparison.runs] for benchmark in comparison.benchmarks
    ]


def _fall_rows(comparison: Comparison) -> list[list[Any]]:
    rows = []
    for benchmark in comparison.benchmarks:
        cells = []
        for view in comparison.runs:
            fall = view.largest_fall(benchmark)
            cells.append("0.0" if fall is None else f"{_text(fall.change, signed=False)} ({fall.peak} -> {fall.low})")
        rows.append([benchmark] + cells)
    return rows


def _cost_rows(comparison: Comparison) -> list[list[Any]]:
    return [
        ["wall time, whole run"] + [format_duration(v.summary.total_wall_s) for v in comparison.runs],
        ["wall time, RL stages"] + [format_duration(v.rl_wall_s) for v in comparison.runs],
        ["RL stages"] + [", ".join(r.name for r in v.rl_rows) for v in comparison.runs],
        ["RL steps (updates)"] + [v.rl_steps for v in comparison.runs],
        ["RL rollouts"] + [v.rollouts for v in comparison.runs],
    ]


def _text(item: Change | None, signed: bool = True) -> str | None:
    if item is None:
        return None
    text = item.text() if signed else f"{item.delta:.1f}" + (f" ± {item.stderr:.1f}" if item.stderr is not None else "")
    return text


def markdown(comparison: Comparison, plot: str | None = None) -> str:
    names = [view.name for view in comparison.runs]
    first = names[0]
    lines = [
        f"# Comparison: {' vs '.join(names)}",
        "",
        "Values in percent, changes in points, each ± its standard error over prompts; differences of "
        "values measured on the same prompts (stages of one run, or two runs) are paired over prompts.",
        "",
    ]
    lines += [f"- {note}" for note in comparison.notes()] + ([""] if comparison.notes() else [])
    lines += [
        "## Final benchmark values",
        "",
        format_table(_final_rows(comparison), ["benchmark", *names, *(f"{n} - {first}" for n in names[1:])]),
        "",
        "## Gain over SFT",
        "",
        "Final value minus the value on the SFT checkpoint (the last evaluation before the first RL stage).",
        "",
        format_table(_gain_rows(comparison), ["benchmark", *names]),
        "",
        "## Largest fall",
        "",
        "The largest drop of each benchmark from one evaluation to a later one, from the SFT checkpoint on "
        "(stages in brackets); 0.0: it never fell.",
        "",
        format_table(_fall_rows(comparison), ["benchmark", *names]),
        "",
        "## Cost",
        "",
        format_table(_cost_rows(comparison), ["", *names]),
        "",
    ]
    if plot:
        lines += [f"![comparison]({plot})", ""]
    return "\n".join(lines)


def to_json(comparison: Comparison) -> dict[str, Any]:
    def pair(item: Change | None) -> dict[str, float | None] | None:
        return None if item is None else {"value": item.delta, "stderr": item.stderr}

    runs = []
    for view in comparison.runs:
        falls = {b: view.largest_fall(b) for b in comparison.benchmarks}
        runs.append(
            {
                "run": str(view.run_dir),
                "missing_stages": view.missing,
                "final": {
                    b: {
                        "value": view.final[b].eval[b],
                        "stderr": view.final[b].eval_stderr.get(b),
                        "stage": view.final[b].name,
                    }
                    for b in comparison.benchmarks
                },
                "gain_over_sft": {b: pair(view.gain(b)) for b in comparison.benchmarks},
                "largest_fall": {
                    b: None if f is None else {**pair(f.change), "from": f.peak, "to": f.low}  # type: ignore[dict-item]
                    for b, f in falls.items()
                },
                "wall_s": view.summary.total_wall_s,
                "rl_wall_s": view.rl_wall_s,
                "rl_steps": view.rl_steps,
                "rollouts": view.rollouts,
            }
        )
    first = comparison.runs[0]
    differences = {
        view.name: {b: pair(change(first.final[b], view.final[b], b)) for b in comparison.benchmarks}
        for view in comparison.runs[1:]
    }
    return {
        "benchmarks": comparison.benchmarks,
        "left_out": comparison.only_in,
        "runs": runs,
        f"difference_from_{first.name}": differences,
    }


# ---------------------------------------------------------------- plot


def plot(comparison: Comparison, path: Path) -> Path:
    """Grouped bars with standard-error whiskers: final values, gains over SFT, largest falls."""
    benchmarks, runs = comparison.benchmarks, comparison.runs
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5 * 3, 4.5), dpi=100)
    panels = figure.subplots(1, 3)
    width = 0.8 / len(runs)
    for index, view in enumerate(runs):
        xs = [b + (index - (len(runs) - 1) / 2) * width for b in range(len(benchmarks))]
        finals = [view.final[b].eval[b] for b in benchmarks]
        final_err = [view.final[b].eval_stderr.get(b, 0.0) for b in benchmarks]
        gains = [view.gain(b) for b in benchmarks]
        falls = [view.largest_fall(b) for b in benchmarks]
        label = f"{view.name} (RL {format_duration(view.rl_wall_s)})"
        panels[0].bar(xs, finals, width, yerr=final_err, capsize=3, label=label)
        panels[1].bar(xs, [g.delta if g else 0.0 for g in gains], width, yerr=[_err(g) for g in gains], capsize=3)
        panels[2].bar(
            xs,
            [f.change.delta if f else 0.0 for f in falls],
            width,
            yerr=[_err(f.change if f else None) for f in falls],
            capsize=3,
        )
    titles = ("final value (%)", "gain over SFT (points)", "largest fall (points)")
    for axes, title in zip(panels, titles):
        axes.set_xticks(range(len(benchmarks)), benchmarks, rotation=30, ha="right")
        axes.set_title(title)
        axes.axhline(0, color="black", linewidth=0.8)
        axes.grid(axis="y", alpha=0.3)
    panels[0].legend(fontsize=8)
    figure.suptitle("± one standard error over prompts", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


def _err(item: Change | None) -> float:
    return item.stderr if item is not None and item.stderr is not None else 0.0


def write_comparison(comparison: Comparison, out_dir: Path) -> Path:
    """compare.md, compare.json and compare.png in ``out_dir``; returns the markdown path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plot(comparison, out_dir / "compare.png")
    path = out_dir / "compare.md"
    path.write_text(markdown(comparison, "compare.png"), encoding="utf-8")
    (out_dir / "compare.json").write_text(json.dumps(to_json(comparison), indent=2) + "\n", encoding="utf-8")
    return path


def default_output(runs: Sequence[Path]) -> Path:
    """Where a comparison goes unless told: ``compare-A-vs-B`` beside the first run."""
    return Path(runs[0]).parent / ("compare-" + "-vs-".join(Path(r).name for r in runs))
