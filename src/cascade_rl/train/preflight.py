"""What a run checks before any stage computes (DESIGN convention 5: a bad recipe fails before
compute, naming the field), and what ``cascade run --dry-run`` checks too.

:func:`check_recipe` is everything the run would refuse before or at the start of a stage that
can be known without loading a model or contacting a server: the base model's directory; every
input file (stage data, benchmarks, converter files, baselines) present and readable; every
public ``format:`` of data and benchmarks known, with options it takes; the server specs the
recipe names (reward models, judges, teachers, the vLLM server) well formed, the local ones
present; the run a recipe starts from (``start_from``). The run calls it first and the dry run
calls the same function, so both refuse with the same one-line message (exit code 2). What the
recipe itself says wrong (fields, reward options, a micro-batch that does not divide a step) is
refused when it loads (:mod:`cascade_rl.recipe`). Files of the toy world (``${world}``) are
built by the run, and checked again once they are (:func:`check_inputs`); servers are contacted
when their stage starts (``train/cascade.py``: ``check_reward_servers``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cascade_rl.data.rows import data_files
from cascade_rl.recipe import Benchmark, DataSource, DistillStage, GRPOStage, Recipe, RecipeError, expand


def check_recipe(recipe: Recipe, variables: dict[str, str]) -> None:
    """Raise :class:`RecipeError` (one line, naming the field) for the first thing the run would
    refuse (module docstring); the toy world's files are not built yet and not checked."""
    from cascade_rl.train.reuse import check_source

    if not recipe.stages:
        raise RecipeError(
            "stages: none: an evaluation-only recipe trains nothing; evaluate a model on its benchmarks with "
            "`cascade eval MODEL --recipe RECIPE`"
        )
    model_path(recipe)
    check_inputs(recipe, variables, world_built=False)
    for field, name, options in formats(recipe):
        check_format_of(field, name, options)
    check_model_specs(recipe, variables)
    check_source(recipe)  # start_from: the stages taken over exist, finished and unchanged


def check_benchmarks(benchmarks: list[Benchmark], variables: dict[str, str], judge: str | None = None) -> None:
    """:func:`check_recipe` for the benchmarks ``cascade eval`` runs: their files, formats and
    judges (``judge``, given on the command line, instead of theirs), before a model loads."""
    if judge:
        check_model_spec("--judge", judge, variables)
    for index, bench in enumerate(benchmarks):
        field = f"eval.benchmarks[{index}] ({bench.name})"
        for where, text in benchmark_files(field, bench):
            check_file(where, text, variables)
        if bench.format is not None:
            check_format_of(field, bench.format, bench.format_options)
        if bench.judge and not judge:
            check_model_spec(f"{field}.judge", bench.judge, variables)


def model_path(recipe: Recipe) -> Path | None:
    """The directory the run starts from: ``start_from.checkpoint`` when given, else the base
    model's (None for a tiny model the run builds); it must exist."""
    from cascade_rl.train.reuse import start_checkpoint

    start = start_checkpoint(recipe)
    if start is None and recipe.model.path is None:
        return None
    path = start or Path(_expanded("model.path", recipe.model.path, {})).expanduser()
    if not path.exists():
        raise RecipeError(f"model.path: {path} does not exist (models are loaded from local disk)")
    return path


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


def check_inputs(recipe: Recipe, variables: dict[str, str], *, world_built: bool = True) -> None:
    """Every data file the recipe reads (stage data, benchmarks, converter answer files,
    baselines) exists and can be read: a missing one is a one-line error naming the field and
    the file. Other run outputs (``${run}``) are not checked, nor the toy world's files
    (``${world}``) until ``world_built``."""
    for field, text in input_paths(recipe):
        if world_built or "${world}" not in text:
            check_file(field, text, variables)


def check_file(field: str, text: str, variables: dict[str, str]) -> list[Path]:
    """The data files ``text`` names (a file, or every data file of a directory or glob pattern:
    :func:`cascade_rl.data.rows.data_files`): at least one, each one readable."""
    path = Path(_expanded(field, text, variables)).expanduser()
    files = data_files(path)
    if not files or not files[0].exists():
        raise RecipeError(f"{field}: data file not found: {path}")
    for file in files:
        if not file.is_file():
            raise RecipeError(f"{field}: {file} is a directory, not a data file")
        if not os.access(file, os.R_OK):
            raise RecipeError(f"{field}: {file} cannot be read (permission denied)")
    return files


# ----------------------------------------------------------------------------- what a recipe reads
def input_paths(recipe: Recipe) -> list[tuple[str, str]]:
    """(field path, file) of every input file a recipe names."""
    found: list[tuple[str, str]] = []
    for field, source in data_sources(recipe):
        found.append((f"{field}.path", source.path))
        if "answers" in source.format_options:
            found.append((f"{field}.format_options.answers", str(source.format_options["answers"])))
    for index, bench in enumerate(recipe.eval.benchmarks):
        found += benchmark_files(f"eval.benchmarks[{index}] ({bench.name})", bench)
    return [(field, path) for field, path in found if "${run}" not in path]


def data_sources(recipe: Recipe) -> Iterator[tuple[str, DataSource]]:
    """(field path, source) of every data source of every stage that trains in this run, its
    sub-stages' own included (the stages up to ``start_from.through`` are taken over, not trained)."""
    names = [stage.name for stage in recipe.stages]
    taken = names.index(recipe.start_from.through) + 1 if recipe.start_from is not None else 0
    for index, stage in enumerate(recipe.stages):
        if index < taken:
            continue
        where = f"stages[{index}] ({stage.name})"
        for i, source in enumerate(getattr(stage, "data", None) or []):
            yield f"{where}.data[{i}]", source
        for part in ("substages", "curriculum"):  # SFT sub-stages' data, GRPO sub-stages' own
            for sub_index, sub in enumerate(getattr(stage, part, None) or []):
                for i, source in enumerate(sub.data or []):
                    yield f"{where}.{part}[{sub_index}].data[{i}]", source


def formats(recipe: Recipe) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(field path, format, options) of every data source and benchmark converted on read."""
    for field, source in data_sources(recipe):
        if source.format is not None:
            yield f"{field}.format", source.format, source.format_options
    for index, bench in enumerate(recipe.eval.benchmarks):
        if bench.format is not None:
            yield f"eval.benchmarks[{index}] ({bench.name}).format", bench.format, bench.format_options


def benchmark_files(field: str, bench: Benchmark) -> list[tuple[str, str]]:
    """(field path, file) of a benchmark's input files: its rows, a converter's answers, baselines."""
    files = [(f"{field}.data", bench.data)]
    if "answers" in bench.format_options:
        files.append((f"{field}.format_options.answers", str(bench.format_options["answers"])))
    if bench.baseline:
        files.append((f"{field}.baseline", bench.baseline))
    return files


def check_format_of(field: str, name: str, options: dict[str, Any]) -> None:
    from cascade_rl.data.formats import format_options, get_format

    try:
        format_options(get_format(name, field), options, field)
    except ValueError as error:
        raise RecipeError(str(error)) from None


def check_model_specs(recipe: Recipe, variables: dict[str, str]) -> None:
    """The models a recipe names besides its base model -- reward models, judges, teachers, the
    vLLM generation server -- as well-formed server URLs or local directories that exist."""
    stage_names = {stage.name for stage in recipe.stages}
    for index, stage in enumerate(recipe.stages):
        where = f"stages[{index}] ({stage.name})"
        if isinstance(stage, GRPOStage):
            for domain, options in stage.reward_options.items():
                for key in ("reward_model", "judge"):
                    value = options.get(key)
                    if isinstance(value, str) and not value.startswith("@"):
                        check_model_spec(f"{where}.reward_options.{domain}.{key}", value, variables)
        if isinstance(stage, DistillStage):
            for domain, teacher in stage.teachers.items():
                if teacher not in stage_names:
                    check_model_spec(f"{where}.teachers.{domain}", teacher, variables)
        if getattr(stage, "base", "policy") != "policy":
            check_model_spec(f"{where}.base", stage.base, variables)
    for index, bench in enumerate(recipe.eval.benchmarks):
        if bench.judge:
            check_model_spec(f"eval.benchmarks[{index}] ({bench.name}).judge", bench.judge, variables)
    if recipe.runtime.vllm_mode == "server" and recipe.runtime.vllm_server_base_url:
        check_model_spec("runtime.vllm_server_base_url", recipe.runtime.vllm_server_base_url, variables)


def check_model_spec(field: str, spec: str, variables: dict[str, str]) -> None:
    """A model named by ``spec``: an ``http(s)://HOST:PORT[/v1][#MODEL]`` server (its form only:
    it is contacted when its stage starts) or a local directory (``local:PATH`` too) that exists."""
    from cascade_rl.llm.transport import is_server_spec, parse_server_spec

    if "${run}" in spec or "${world}" in spec:
        return  # written by the run
    text = _expanded(field, spec, variables)
    if is_server_spec(text):
        try:
            parse_server_spec(text, what="server")
        except ValueError as error:
            raise RecipeError(f"{field}: {error}") from None
        return
    path = Path(text.removeprefix("local:")).expanduser()
    if not path.is_dir():
        raise RecipeError(f"{field}: {path} is neither a model directory nor an http(s):// server URL")


def _expanded(field: str, text: str, variables: dict[str, str]) -> str:
    try:
        return expand(text, variables)
    except RecipeError as error:
        raise RecipeError(f"{field}: {error}") from None
