"""Start a run from another run's finished stages (recipe ``start_from``; SPEC section 1: the
cascade against one joint RL stage must start from the *same* SFT and reward-model checkpoints).

``start_from: {run: runs/tiny, through: rm}`` takes this recipe's stages up to and including
``rm`` from ``runs/tiny`` instead of training them. Before anything is linked (and before any
compute) the source is checked: it must hold a ``recipe.json`` whose stages up to ``through``
are this recipe's, unchanged (same names, same settings), built on the same model and toy
world, and each of them must have finished there. Then, in this run:

* each taken-over stage is a directory of its own (``<NN-stage>/``) whose entries link to the
  source's (checkpoint, evaluation, samples, metrics) and whose ``stage.json`` says where it
  came from (``reused_from``); the engine treats it as a finished stage, so the next stage
  starts from its checkpoint and ``@rm`` names the source's reward model;
* the toy world and the built base model are links to the source's (same files, same
  tokenizer), and the arena's baseline answers (sampled once from the SFT policy) are copied,
  so every benchmark is scored exactly as in the source run.

``--from`` / ``--only`` naming a taken-over stage is refused: it is not trained here.

``start_from: {checkpoint: DIR, through: rlhf}`` starts from a checkpoint directory instead (a
released intermediate stage, e.g. ``Nemotron-Cascade-8B-RLHF`` of
``nvidia/Nemotron-Cascade-8B-Intermediate-ckpts``): it must hold a ``config.json``; the stages
up to ``through`` are marked done in this run (``stage.json`` with ``reused_from``, nothing
linked: the checkpoint stands for them all) and the checkpoint is the run's starting model
(``00-base/model``, with the recipe's chat template), so the first later stage trains from it.
Nothing of the earlier stages exists here: a later stage that names one of their reward models
(``'@rm'``) is refused when the recipe is read.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cascade_rl.recipe import Recipe, RecipeError, branch_source, expand, parse_recipe


def source_run(recipe: Recipe) -> Path | None:
    """The run directory the stages are taken from (None without ``start_from.run``)."""
    if recipe.start_from is None or recipe.start_from.run is None:
        return None
    return Path(expand(recipe.start_from.run)).expanduser()


def start_checkpoint(recipe: Recipe) -> Path | None:
    """The checkpoint directory the run starts from (None without ``start_from.checkpoint``)."""
    if recipe.start_from is None or recipe.start_from.checkpoint is None:
        return None
    return Path(expand(recipe.start_from.checkpoint)).expanduser()


def reused_names(recipe: Recipe) -> list[str]:
    """The names of the stages taken from the source run, in order (none without start_from)."""
    if recipe.start_from is None:
        return []
    names = [stage.name for stage in recipe.stages]
    return names[: names.index(recipe.start_from.through) + 1]


def check_flags(recipe: Recipe, flags: Mapping[str, str | None]) -> None:
    """``--from`` / ``--only`` (``{flag: stage name}``) cannot name a stage taken over."""
    for flag, name in flags.items():
        if name is not None and name in reused_names(recipe):
            raise RecipeError(
                f"{flag} {name}: stage {name!r} is taken from {source_run(recipe) or start_checkpoint(recipe)} "
                "(start_from), "
                "not trained in this run"
            )


def check_source(recipe: Recipe) -> Path | None:
    """The source run directory, after checking that its stages up to ``through`` are this
    recipe's and have finished there, or the start checkpoint, after checking that it is one
    (one-line RecipeError otherwise)."""
    checkpoint = start_checkpoint(recipe)
    if checkpoint is not None:
        if not (checkpoint / "config.json").is_file():
            raise RecipeError(f"start_from.checkpoint: {checkpoint}: not a checkpoint directory (no config.json there)")
        return checkpoint
    source = source_run(recipe)
    if source is None:
        return None
    where = f"start_from.run: {source}"
    saved = source / "recipe.json"
    if not saved.is_file():
        raise RecipeError(f"{where}: no recipe.json there (not a run directory of `cascade run`)")
    theirs = _normalised(json.loads(saved.read_text()), str(saved))
    ours = recipe.model_dump(mode="json")
    for section in ("model", "world"):
        if theirs.get(section) != ours.get(section):
            difference = _first_difference(theirs.get(section), ours.get(section))
            raise RecipeError(f"{where}: its `{section}` section differs from this recipe's ({difference})")
    their_stages = theirs.get("stages") or []
    for position, name in enumerate(reused_names(recipe)):
        if position >= len(their_stages) or their_stages[position].get("name") != name:
            found = [stage.get("name") for stage in their_stages]
            raise RecipeError(
                f"{where}: stage {position + 1} there is not {name!r} (its stages: {', '.join(map(str, found))})"
            )
        if their_stages[position] != ours["stages"][position]:
            difference = _first_difference(their_stages[position], ours["stages"][position])
            raise RecipeError(f"{where}: stage {name!r} differs from this recipe's ({difference})")
        status = _status(source / _dirname(position, name))
        if status.get("status") != "done":
            raise RecipeError(
                f"{where}: stage {name!r} has not finished there ({_dirname(position, name)}/stage.json is "
                f"{status.get('status', 'missing')!r}); finish that run first"
            )
    return source


def _normalised(saved: dict, source: str) -> dict:
    """A saved recipe.json read back through this version's recipe model (fields added since
    take their defaults), or as it is when it no longer validates."""
    try:
        return parse_recipe(saved, source=source).model_dump(mode="json")
    except RecipeError:
        return saved


def _first_difference(theirs: Any, ours: Any, path: str = "") -> str:
    if isinstance(theirs, Mapping) and isinstance(ours, Mapping):
        for key in sorted(set(theirs) | set(ours)):
            if theirs.get(key) != ours.get(key):
                return _first_difference(theirs.get(key), ours.get(key), f"{path}.{key}" if path else key)
    if isinstance(theirs, list) and isinstance(ours, list) and len(theirs) == len(ours):
        for index, (a, b) in enumerate(zip(theirs, ours)):
            if a != b:
                return _first_difference(a, b, f"{path}[{index}]")
    return f"{path or 'value'}: {theirs!r} there, {ours!r} here"


def _dirname(position: int, name: str) -> str:
    return f"{position + 1:02d}-{name}"


def _status(stage_dir: Path) -> dict:
    path = stage_dir / "stage.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def link_stages(recipe: Recipe, run_dir: Path) -> None:
    """Link the source's world, base model and taken-over stages into ``run_dir`` (main
    process; a stage already linked is left as it is)."""
    source = check_source(recipe)
    if source is None:
        return
    if start_checkpoint(recipe) is not None:
        _mark_released(recipe, run_dir, source.resolve())
        return
    source = source.resolve()
    for shared in ("world", "00-base"):
        if (source / shared).exists() and not (run_dir / shared).exists():
            (run_dir / shared).symlink_to(source / shared)
    references = sorted((source / "arena").glob("*.references.jsonl"))
    if references:
        (run_dir / "arena").mkdir(exist_ok=True)
        for path in references:
            if not (run_dir / "arena" / path.name).exists():
                shutil.copyfile(path, run_dir / "arena" / path.name)
    policy: str | None = None
    for position, stage in enumerate(recipe.stages[: len(reused_names(recipe))]):
        name = _dirname(position, stage.name)
        target = run_dir / name
        if stage.trains_policy and branch_source(stage) is None:  # its checkpoint is the next stage's policy
            policy = f"{name}/model"  # relative to the run directory (train/cascade.py's policy_entry)
        if _status(target).get("status") == "done":
            continue
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for entry in (source / name).iterdir():
            if entry.name != "stage.json":
                (target / entry.name).symlink_to(entry)
        status = {key: value for key, value in _status(source / name).items() if key != "policy"}
        status.update(index=position + 1, reused_from=str(source / name))
        if policy is not None:  # the checkpoint the next stage starts from, through this run's links
            status["policy"] = policy
        (target / "stage.json").write_text(json.dumps(status, indent=1))


def _mark_released(recipe: Recipe, run_dir: Path, checkpoint: Path) -> None:
    """The stages a start checkpoint stands for, marked done (their policy is the run's base)."""
    for position, stage in enumerate(recipe.stages[: len(reused_names(recipe))]):
        target = run_dir / _dirname(position, stage.name)
        if _status(target).get("status") == "done":
            continue
        target.mkdir(parents=True, exist_ok=True)
        status = {"index": position + 1, "name": stage.name, "kind": stage.kind, "status": "done"}
        (target / "stage.json").write_text(json.dumps({**status, "reused_from": str(checkpoint)}, indent=1))
