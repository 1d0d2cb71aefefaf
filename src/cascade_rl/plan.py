"""`cascade run --dry-run`: what a recipe will do, before any compute — stages, data sizes,
steps and the settings that matter per stage."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich.table import Table

from cascade_rl.recipe import (
    DataSource,
    DistillStage,
    EvalStage,
    GRPOStage,
    Recipe,
    RewardModelStage,
    SFTStage,
    expand,
)


def count_rows(sources: list[DataSource], variables: dict[str, str]) -> str:
    """Rows across ``sources`` after upsampling, or why they cannot be counted yet."""
    total = 0
    for source in sources:
        if "${world}" in source.path:
            return "built at run time"
        try:
            path = Path(expand(source.path, variables))
        except ValueError as error:
            return str(error)
        if not path.exists():
            return f"missing: {path}"
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            rows = pq.ParquetFile(path).metadata.num_rows
        else:
            with open(path, "rb") as handle:
                rows = sum(1 for line in handle if line.strip())
        rows = min(rows, source.limit or rows)
        total += math.floor(rows * source.upsample)
    return str(total)


def stage_summary(stage: Any, variables: dict[str, str]) -> tuple[str, str, str]:
    """(data rows, steps, settings) of one stage."""
    if isinstance(stage, SFTStage):
        rows = [count_rows(s.data, variables) for s in stage.substages]
        steps = []
        for sub, count in zip(stage.substages, rows):
            steps.append(
                str(sub.max_steps)
                if sub.max_steps
                else (str(math.ceil(int(count) * sub.epochs / sub.batch_size)) if count.isdigit() else "?")
            )
        settings = "; ".join(
            f"{s.name}: {s.max_length} tok, {s.epochs:g} ep, lr {s.learning_rate:g}" for s in stage.substages
        )
        return " + ".join(rows), " + ".join(steps), settings
    if isinstance(stage, RewardModelStage):
        rows = count_rows(stage.data, variables)
        steps = (
            str(stage.max_steps)
            if stage.max_steps
            else (str(math.ceil(int(rows) * stage.epochs / stage.batch_size)) if rows.isdigit() else "?")
        )
        return (
            rows,
            steps,
            f"Bradley-Terry, base {stage.base}, {stage.epochs:g} ep, lr {stage.learning_rate:g}, "
            f"batch {stage.batch_size}",
        )
    if isinstance(stage, GRPOStage):
        curriculum = " -> ".join(
            f"{c.max_response_length}{'(OF)' if c.overlong_filter else ''}" for c in stage.curriculum
        )
        settings = (
            f"domain {stage.domain or 'per row'}, {stage.thinking}, {stage.prompts_per_batch}x"
            f"{stage.rollouts_per_prompt} rollouts, T {stage.temperature:g}, lr {stage.learning_rate:g}, "
            f"lengths {curriculum}"
            + (", dynamic filtering" if stage.dynamic_filter.enabled else "")
            + (", prompt filter" if stage.prompt_filter else "")
            + _lora_text(stage)
        )
        return count_rows(stage.data, variables), f"<= {sum(c.max_steps for c in stage.curriculum)}", settings
    if isinstance(stage, DistillStage):
        teachers = ", ".join(f"{domain} <- {teacher}" for domain, teacher in stage.teachers.items())
        thinking = stage.thinking if isinstance(stage.thinking, str) else "per domain"
        settings = (
            f"MOPD (reverse KL to each domain's teacher: {teachers}), {thinking}, {stage.prompts_per_batch}x"
            f"{stage.rollouts_per_prompt} rollouts, T {stage.temperature:g}, lr {stage.learning_rate:g}, "
            f"length {stage.max_response_length}"
        )
        return count_rows(stage.data, variables), str(stage.max_steps), settings
    if isinstance(stage, EvalStage):
        return "-", "-", f"benchmarks: {', '.join(stage.benchmarks or ['all'])}"
    return "?", "?", ""


def _lora_text(stage: Any) -> str:
    lora = getattr(stage, "lora", None)
    return f", LoRA r{lora.r}" if lora is not None else ""


def describe_plan(recipe: Recipe, out: Path | None = None) -> Table:
    run_dir = Path(out or recipe.run_dir)
    variables = {"world": str(run_dir / "world"), "run": str(run_dir)}
    model = (
        recipe.model.path
        or f"tiny Qwen3 (hidden {recipe.model.tiny.hidden_size}, {recipe.model.tiny.num_layers} layers)"
    )
    table = Table(title=f"{recipe.name}: {model} -> {run_dir}")
    for column in ("#", "kind", "stage", "rows", "steps", "settings"):
        table.add_column(column, overflow="fold")
    if recipe.eval.before_first_stage and not isinstance(recipe.stages[0], EvalStage):
        table.add_row("0", "eval", "base", "-", "-", "the base model, before any stage (eval.before_first_stage)")
    for index, stage in enumerate(recipe.stages, start=1):
        rows, steps, settings = stage_summary(stage, variables)
        table.add_row(str(index), stage.kind, stage.name, rows, steps, settings)
    benchmarks = ", ".join(b.name for b in recipe.eval.benchmarks) or "none"
    table.caption = (
        f"evaluation after every stage: {benchmarks}" if recipe.eval.after_every_stage else f"benchmarks: {benchmarks}"
    )
    return table
