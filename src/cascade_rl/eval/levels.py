"""IFEval's four accuracies per evaluated stage, each with its standard error over prompts and
its change from the previous evaluation with the error of that change paired over prompts
(SPEC section 9; issue 18: "prompt / instruction x strict / loose, each with its standard error
and paired stage-to-stage changes").

The headline of an ``ifeval`` benchmark (prompt-level strict) already has both in the report's
main tables; the other three levels are read here from the stage's ``eval-samples`` file, whose
records keep each sample's ``strict_follow_list`` and ``loose_follow_list``. Every level is the
mean of a per-prompt score, so one standard error serves all four:

* prompt level: the share of the prompt's samples that follow every instruction;
* instruction level: the instructions the prompt's samples follow, divided by the benchmark's
  mean number of instructions per prompt (the prompts' instruction counts are fixed by the
  benchmark, so the mean of these scores is exactly followed / all instructions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cascade_rl.eval.breakdown import IFEVAL_LEVELS
from cascade_rl.eval.forgetting import Change, paired_stderr
from cascade_rl.eval.runs import StageRecord, read_metrics
from cascade_rl.metrics import standard_error


def level_scores(path: Path) -> dict[str, list[float]] | None:
    """Per IFEval level, each prompt's score (in prompt order) from one ``eval-samples`` file;
    None when the file holds no IF follow lists or a prompt has a sample without them."""
    rows, _ = read_metrics(path)
    by_prompt: dict[int, list[Mapping[str, Any]]] = {}
    for row in rows:
        details = row.get("details")
        if isinstance(row.get("prompt_index"), int) and isinstance(details, dict):
            by_prompt.setdefault(row["prompt_index"], []).append(details)
    groups = [by_prompt[i] for i in sorted(by_prompt)]
    if not groups or not all("strict_follow_list" in d for group in groups for d in group):
        return None
    mean_count = sum(len(group[0]["strict_follow_list"]) for group in groups) / len(groups)
    scores: dict[str, list[float]] = {}
    for mode in ("strict", "loose"):
        lists = [[d[f"{mode}_follow_list"] for d in group] for group in groups]
        scores[f"prompt_{mode}"] = [sum(all(flags) for flags in group) / len(group) for group in lists]
        scores[f"instruction_{mode}"] = [
            sum(sum(flags) for flags in group) / len(group) / max(mean_count, 1e-9) for group in lists
        ]
    return {level: scores[level] for level in IFEVAL_LEVELS}


def stage_levels(records: Sequence[StageRecord], benchmark: str) -> list[dict[str, Any]]:
    """For each record with ``benchmark``'s IF samples: per level its value, standard error,
    change from the previous such record and that change's paired standard error (points)."""
    out, previous = [], None
    for record in records:
        scores = level_scores(record.directory / "eval-samples" / f"{benchmark}.jsonl")
        if scores is None:
            continue
        levels = {}
        for level, values in scores.items():
            entry: dict[str, Any] = {
                "value": 100.0 * sum(values) / len(values),
                "stderr": 100.0 * standard_error(values),
            }
            if previous is not None and len(previous[level]) == len(values):
                entry["change"] = entry["value"] - 100.0 * sum(previous[level]) / len(values)
                entry["change_stderr"] = paired_stderr(previous[level], values)
            levels[level] = entry
        out.append({"stage": record.name, "levels": levels})
        previous = scores
    return out


def levels_section(records: Sequence[StageRecord], benchmarks: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
    """Markdown tables (one per IF benchmark with samples) and their numbers for report.json."""
    from cascade_rl.eval.tables import format_table

    lines: list[str] = []
    numbers: dict[str, Any] = {}
    for benchmark in benchmarks:
        rows = stage_levels(records, benchmark)
        if not rows:
            continue
        numbers[benchmark] = rows
        table = [[row["stage"], *(_cell(row["levels"][level]) for level in IFEVAL_LEVELS)] for row in rows]
        lines += [
            f"## {benchmark}: prompt / instruction level, strict / loose",
            "",
            "Each cell: the value ± its standard error over prompts, then in brackets the change from "
            "the previous evaluation ± its standard error paired over prompts.",
            "",
            format_table(table, ["stage", *IFEVAL_LEVELS]),
            "",
        ]
    return lines, numbers


def _cell(entry: Mapping[str, Any]) -> str:
    text = f"{entry['value']:.1f} ± {entry['stderr']:.1f}"
    if "change" in entry:
        text += f" ({Change(entry['change'], entry.get('change_stderr')).text()})"
    return text
