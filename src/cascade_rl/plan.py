"""`cascade run --dry-run`: what a recipe will do, before any compute — stages, data sizes,
steps and the settings that matter per stage (:func:`describe_plan`) — and where every
resolved setting came from (:func:`describe_sources`): the recipe (or a file it extends), the
preset a GRPO stage extends (``presets/NAME.yaml``), a value derived from other fields (the
reward model of an RLHF stage, the preset named like the stage), or the field's default."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from rich.table import Table

from cascade_rl.data.rows import count_rows as file_rows
from cascade_rl.data.rows import data_files
from cascade_rl.recipe import (
    DataSource,
    DistillStage,
    EvalStage,
    GRPOStage,
    Recipe,
    RewardModelStage,
    SFTStage,
    expand,
    paper_defaults,
)

#: the order sources are shown in
SOURCES = ("recipe", "preset", "derived", "default")
SECTIONS = ("model", "world", "runtime", "eval", "start_from")


def count_rows(sources: list[DataSource], variables: dict[str, str]) -> str:
    """Rows across ``sources`` (every file a path names: a file, a directory, a glob) after
    ``limit`` and upsampling, or why they cannot be counted yet."""
    total = 0
    for source in sources:
        if "${world}" in source.path:
            return "built at run time"
        try:
            path = Path(expand(source.path, variables))
        except ValueError as error:
            return str(error)
        files = data_files(path)
        if not files or not files[0].exists():
            return f"missing: {path}"
        rows = sum(file_rows(file) for file in files)
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


# ----------------------------------------------------------------------------- where values come from
def value_sources(data: Mapping[str, Any], recipe: Recipe) -> dict[str, list[tuple[tuple, Any, str]]]:
    """Every resolved setting of ``recipe`` -- its path (a tuple of keys and list indexes), value
    and source (module docstring) -- by section (``recipe``, ``model``, ``runtime``, ``eval``,
    ..., then ``stages[i] (name)``).
    ``data`` is the recipe as written (:func:`cascade_rl.recipe.read_recipe_file`)."""
    resolved = recipe.model_dump(mode="json")
    top = {key: value for key, value in resolved.items() if key not in (*SECTIONS, "stages")}
    sections = {"recipe": [(path, value, _source(path, data, {})) for path, value in _leaves(top)]}
    for name in SECTIONS:
        if resolved.get(name) is not None:
            given = data.get(name) if isinstance(data.get(name), Mapping) else {}
            sections[name] = [(path, value, _source(path, given, {})) for path, value in _leaves(resolved[name])]
    written = data.get("stages") or []
    for index, (stage, dumped) in enumerate(zip(recipe.stages, resolved["stages"])):
        given = written[index] if index < len(written) and isinstance(written[index], Mapping) else {}
        preset = getattr(stage, "preset", "none")
        defaults = paper_defaults(preset, recipe.model.kind) if preset != "none" else {}
        rows = [(path, value, _source(path, given, defaults, preset)) for path, value in _leaves(dumped)]
        sections[f"stages[{index}] ({stage.name})"] = rows
    return sections


def describe_sources(data: Mapping[str, Any], recipe: Recipe) -> list[Table]:
    """One table per section: each source with the settings (``field=value``) it gave."""
    tables = []
    for section, rows in value_sources(data, recipe).items():
        title = f"{section}: where each value comes from"
        table = Table(title=title, title_justify="left", show_header=False, min_width=len(title))
        table.add_column("from", style="bold")
        table.add_column("settings", overflow="fold")
        for source in sorted({source for _, _, source in rows}, key=lambda s: SOURCES.index(s.split()[0])):
            settings = [f"{_dotted(path)}={_brief(value)}" for path, value, where in rows if where == source]
            table.add_row(source, ", ".join(settings))
        tables.append(table)
    return tables


def _leaves(tree: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """(path, value) of every leaf of a resolved section: mappings are walked, and so are lists
    of mappings that are not named (curriculum steps); data sources, benchmarks, other lists and
    empty mappings are leaves."""
    if isinstance(tree, Mapping) and tree:
        for key, value in tree.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(tree, list) and tree and all(isinstance(v, Mapping) and not _named(v) for v in tree):
        for index, value in enumerate(tree):
            yield from _leaves(value, (*path, index))
    else:
        yield path, tree


def _named(item: Mapping[str, Any]) -> bool:
    return "name" in item or "path" in item


def _dotted(path: tuple) -> str:
    return "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in path).lstrip(".")


def _given(tree: Any, path: tuple) -> bool:
    """Whether ``path`` (or a part of it holding a plain value) was written in ``tree``."""
    for key in path:
        if isinstance(tree, list) and isinstance(key, int):
            if key >= len(tree):
                return False
        elif not isinstance(tree, Mapping):
            return True
        elif key not in tree:
            return False
        tree = tree[key]
    return True


def _source(path: tuple, given: Mapping[str, Any], preset: Mapping[str, Any], name: str = "") -> str:
    if _given(given, path):
        return "recipe"
    if preset and _given(preset, path):
        return f"preset {name}"
    if path == ("preset",) or (path[0] == "reward_options" and path[-1] == "reward_model"):
        return "derived"
    return "default"


def _brief(value: Any) -> str:
    """A setting's value on one line: data sources and benchmarks by their path or name, the
    steps of a curriculum without their unset fields."""
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        keys = [next((v[k] for k in ("name", "path") if k in v), None) for v in value]
        if all(keys):
            return "[" + ", ".join(map(str, keys)) + "]"
        value = [{k: v for k, v in item.items() if v is not None} for item in value]
    return value if isinstance(value, str) else json.dumps(value, separators=(", ", ": "))
