"""Checks a run makes before any stage computes (DESIGN convention 5: a bad recipe fails before
compute, naming the field): every input file exists, and a checkpoint that keeps its own chat
template has one."""

from __future__ import annotations

from pathlib import Path

from cascade_rl.data.rows import data_files
from cascade_rl.recipe import Recipe, RecipeError, expand


def check_chat_template(path: Path) -> None:
    """``model.chat_template: keep`` needs a tokenizer that has one: a one-line error naming the
    checkpoint and the field otherwise (before any compute). A template without
    ``{% generation %}`` markers still trains SFT on the assistant's answer only (the row's last
    message, as a prompt / completion pair: ``train/sft.py``)."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as error:
        raise RecipeError(f"model.path: {path} has no readable tokenizer ({error})") from None
    if not tokenizer.chat_template:
        raise RecipeError(
            f"model.chat_template: keep, but the tokenizer in {path} has no chat template; "
            "use chat_template: cascade or import a model that carries one (cascade model import)"
        )


def check_inputs(recipe: Recipe, variables: dict[str, str]) -> None:
    """Every data file the recipe reads (stage data, benchmarks, converter answer files) exists
    (a directory or glob pattern names at least one) before any stage runs: a missing one is a
    one-line error naming the field and the file. Files of the toy world (``${world}``) are built
    by then; other run outputs are not checked."""
    for field, text in input_paths(recipe):
        try:
            path = Path(expand(text, variables)).expanduser()
        except RecipeError as error:
            raise RecipeError(f"{field}: {error}") from None
        files = data_files(path)
        if not files or not files[0].exists():
            raise RecipeError(f"{field}: data file not found: {path}")


def input_paths(recipe: Recipe) -> list[tuple[str, str]]:
    """(field path, file) of every input file a recipe names, but the data of stages taken over
    from another run or a checkpoint (``start_from``: they do not train here)."""
    from cascade_rl.train.reuse import reused_names

    found: list[tuple[str, str]] = []
    taken = set(reused_names(recipe))
    for index, stage in enumerate(recipe.stages):
        if stage.name in taken:
            continue
        sources = [(f"stages[{index}] ({stage.name}).data[{i}]", s) for i, s in enumerate(getattr(stage, "data", []))]
        for part in ("substages", "curriculum"):  # SFT sub-stages' data, GRPO sub-stages' own
            for sub_index, sub in enumerate(getattr(stage, part, [])):
                sources += [
                    (f"stages[{index}] ({stage.name}).{part}[{sub_index}].data[{i}]", s)
                    for i, s in enumerate(sub.data or [])
                ]
        for field, source in sources:
            found.append((f"{field}.path", source.path))
            if "answers" in source.format_options:
                found.append((f"{field}.format_options.answers", str(source.format_options["answers"])))
    for index, bench in enumerate(recipe.eval.benchmarks):
        field = f"eval.benchmarks[{index}] ({bench.name})"
        found.append((f"{field}.data", bench.data))
        if "answers" in bench.format_options:
            found.append((f"{field}.format_options.answers", str(bench.format_options["answers"])))
        if bench.baseline:
            found.append((f"{field}.baseline", bench.baseline))
    return [(field, path) for field, path in found if "${run}" not in path]
