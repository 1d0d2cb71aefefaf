"""`cascade run --dry-run`: what a recipe will do, before any compute — stages, data sizes,
steps and the settings that matter per stage, as each stage kind's runner describes it
(:func:`describe_plan`; the preset a GRPO stage extends, said to be chosen by the stage's name
when its ``preset`` does not name it; what the environment changes, ``CASCADE_VLLM``) — and where
every resolved setting came from (:func:`describe_sources`): the recipe (or a file it extends),
the preset a GRPO stage extends (what the preset merge recorded,
:func:`cascade_rl.recipe.merge_presets`), a value derived from other fields (the reward model of
an RLHF stage, the preset named like the stage), or the field's default.

The plan sits above the trainers in the layer map (DESIGN.md): it asks the stage registry
(:mod:`cascade_rl.train.stages`, which loads no trainer) to describe each stage, and the run's
own checks (:mod:`cascade_rl.train.preflight`) for the files a recipe reads, which
:func:`describe_files` prints as they resolve. Every cell is plain text (``rich.text.Text``): a
path or value in brackets is never read as markup."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from cascade_rl.llm.vllm_engine import ENV_SWITCH
from cascade_rl.recipe import PresetMerge, Recipe, expand, merge_presets
from cascade_rl.train.preflight import input_paths
from cascade_rl.train.stages import runner_for

#: the order sources are shown in
SOURCES = ("recipe", "preset", "derived", "default")
SECTIONS = ("model", "world", "runtime", "eval", "start_from")


def describe_plan(recipe: Recipe, out: Path | None = None, presets: PresetMerge | None = None) -> Table:
    """The stages in order, each as its runner describes it (:mod:`cascade_rl.train.stages`), with
    the preset each GRPO stage extends and (given the preset merge) how the stage chose it."""
    run_dir = Path(out or recipe.run_dir)
    variables = {"world": str(run_dir / "world"), "run": str(run_dir)}
    model = (
        _expanded(recipe.model.path, variables)
        or f"tiny Qwen3 (hidden {recipe.model.tiny.hidden_size}, {recipe.model.tiny.num_layers} layers)"
    )
    table = Table(title=Text(f"{recipe.name}: {model} -> {run_dir}"))  # Text: a value is never read as markup
    for column in ("#", "kind", "stage", "rows", "steps", "settings"):
        table.add_column(column, overflow="fold")
    if recipe.eval.before_first_stage and not recipe.stages[0].evaluation_only:
        table.add_row("0", "eval", "base", "-", "-", "the base model, before any stage (eval.before_first_stage)")
    chosen = presets.chosen if presets is not None else {}
    for index, stage in enumerate(recipe.stages, start=1):
        rows, steps, settings = runner_for(stage).describe(stage, variables)
        settings += _preset_text(chosen.get(index - 1))
        table.add_row(*(Text(cell) for cell in (str(index), stage.kind, stage.name, rows, steps, settings)))
    benchmarks = ", ".join(b.name for b in recipe.eval.benchmarks) or "none"
    caption = (
        f"evaluation after every stage: {benchmarks}" if recipe.eval.after_every_stage else f"benchmarks: {benchmarks}"
    )
    table.caption = Text("\n".join([caption, *_environment_notes(recipe)]))
    return table


def describe_files(recipe: Recipe, variables: dict[str, str]) -> Text:
    """Every input file the recipe names, by field, with the path it resolves to (relative paths
    are read from the recipe file's directory: docs/recipes.md, "Paths"), one line each."""
    lines = ["files: where each path resolves"]
    named = [("model.path", recipe.model.path)] if recipe.model.path else []
    for field, text in named + input_paths(recipe):
        lines.append(
            f"  {field}: {_expanded(text, variables)}" + ("  (built by the run)" if "${world}" in text else "")
        )
    return Text("\n".join(lines))


def _expanded(text: str | None, variables: dict[str, str]) -> str | None:
    try:
        return text and str(Path(expand(text, variables)).expanduser())
    except ValueError as error:
        return str(error)


def _preset_text(chosen: tuple[str, str] | None) -> str:
    """The preset a stage extends, and whether its name chose it (no ``preset:`` in the recipe)."""
    if chosen is None:
        return ""
    name, how = chosen
    return f", preset {name}" + (" (by the stage's name)" if how == "name" else "")


def _environment_notes(recipe: Recipe) -> list[str]:
    """What this machine's environment changes in the recipe (said before any compute)."""
    switch = os.environ.get(ENV_SWITCH, "").lower()
    if recipe.runtime.use_vllm == "auto" and switch in ("0", "off", "false", "no"):
        return [f"{ENV_SWITCH}={os.environ[ENV_SWITCH]} in the environment: runtime.use_vllm auto will not use vLLM"]
    return []


# ----------------------------------------------------------------------------- where values come from
def value_sources(data: Mapping[str, Any], recipe: Recipe) -> dict[str, list[tuple[tuple, Any, str]]]:
    """Every resolved setting of ``recipe`` -- its path (a tuple of keys and list indexes), value
    and source (module docstring) -- by section (``recipe``, ``model``, ``runtime``, ``eval``,
    ..., then ``stages[i] (name)``). ``data`` is the recipe as written
    (:func:`cascade_rl.recipe.read_recipe_file`); what each preset gave is the preset merge's own
    record (:func:`cascade_rl.recipe.merge_presets`)."""
    merge = merge_presets(data)
    resolved = recipe.model_dump(mode="json")
    top = {key: value for key, value in resolved.items() if key not in (*SECTIONS, "stages")}
    sections = {"recipe": [(path, value, _source(path, data)) for path, value in _leaves(top)]}
    for name in SECTIONS:
        if resolved.get(name) is not None:
            given = data.get(name) if isinstance(data.get(name), Mapping) else {}
            sections[name] = [(path, value, _source(path, given)) for path, value in _leaves(resolved[name])]
    written = data.get("stages") or []
    for index, (stage, dumped) in enumerate(zip(recipe.stages, resolved["stages"])):
        given = written[index] if index < len(written) and isinstance(written[index], Mapping) else {}
        rows = [(path, value, _source(path, given, merge, index)) for path, value in _leaves(dumped)]
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
            table.add_row(Text(source), Text(", ".join(settings)))  # Text: a value is never read as markup
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


def _source(path: tuple, given: Mapping[str, Any], merge: PresetMerge | None = None, index: int = -1) -> str:
    if _given(given, path):
        return "recipe"
    if merge is not None and index in merge.given and any(path[: len(p)] == p for p in merge.given[index]):
        return f"preset {merge.chosen[index][0]}"
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
