"""`cascade run --dry-run` says where every resolved setting came from (issue 27): the recipe or
a file it extends, the preset a stage extends, a value derived from other fields, or the
field's default."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cascade_rl.plan import value_sources
from cascade_rl.recipe import parse_recipe, read_recipe_file

ROOT = Path(__file__).resolve().parents[1]


def sources_of(data: dict, section: str) -> dict[str, str]:
    recipe = parse_recipe(yaml.safe_load(yaml.safe_dump(data)))
    rows = value_sources(data, recipe)[section]
    return {".".join(str(key) for key in path): source for path, _, source in rows}


RECIPE = {
    "name": "r",
    "model": {"path": "base", "kind": "thinking"},
    "runtime": {"reward_workers": 2},
    "stages": [
        {"kind": "reward_model", "data": "pairs.jsonl"},
        {"kind": "grpo", "name": "ifrl", "data": "if.jsonl", "temperature": 0.8, "dynamic_filter": {"readd_hard": 0.2}},
    ],
}


def test_each_setting_of_a_stage_is_traced_to_the_recipe_its_preset_a_derivation_or_a_default():
    sources = sources_of(RECIPE, "stages[1] (ifrl)")
    assert sources["temperature"] == sources["dynamic_filter.readd_hard"] == sources["data"] == "recipe"
    assert sources["top_k"] == sources["dynamic_filter.enabled"] == "preset ifrl"
    # the thinking model's section of the preset: its curriculum, its reward domain
    assert sources["domain"] == sources["curriculum.1.max_response_length"] == "preset ifrl"
    assert sources["reward_options.if_rm.reward_model"] == sources["preset"] == "derived"
    assert sources["top_p"] == sources["curriculum.1.stop_window"] == sources["stabilisers.kl_coef"] == "default"


def test_sections_other_than_stages_are_the_recipe_or_defaults():
    runtime = sources_of(RECIPE, "runtime")
    assert runtime["reward_workers"] == "recipe" and runtime["lm_head"] == "default"
    assert sources_of(RECIPE, "model")["kind"] == "recipe"
    assert set(sources_of(RECIPE, "eval").values()) == {"default"}


def test_a_value_from_an_extended_recipe_file_is_the_recipes():
    data = read_recipe_file(ROOT / "recipes" / "tiny-mopd.yaml")
    recipe = parse_recipe(read_recipe_file(ROOT / "recipes" / "tiny-mopd.yaml"))
    sections = value_sources(data, recipe)
    math = {".".join(map(str, path)): source for path, _, source in sections["stages[4] (math)"]}
    assert math["learning_rate"] == "recipe" and math["domain"] == "preset math"
    mopd = {".".join(map(str, path)): source for path, _, source in sections["stages[7] (mopd)"]}
    assert mopd["teachers.math"] == "recipe" and mopd["top_p"] == "default"


def dry_run(recipe: Path, *flags: str, cwd: Path = ROOT, command: str = "--dry-run") -> subprocess.CompletedProcess:
    words = [command] if command else []
    return subprocess.run(
        [sys.executable, "-m", "cascade_rl.cli", "run", str(recipe), *words, *flags],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
    )


def with_inputs(directory: Path, recipe: dict) -> Path:
    """``recipe`` written to ``directory/r.yaml`` beside the model directory and data files it names."""
    (directory / "base").mkdir(exist_ok=True)
    for name in ("pairs.jsonl", "if.jsonl", "gsm8k-test.jsonl", "math.jsonl"):
        (directory / name).write_text('{"question": "1 + 1?", "answer": "2"}\n')
    path = directory / "r.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def test_the_dry_run_prints_the_plan_then_the_sources(tmp_path):
    result = dry_run(with_inputs(tmp_path, RECIPE))
    assert result.returncode == 0, result.stderr
    plan, sources = result.stdout.split("stages[1] (ifrl): where each value comes from")
    assert "Bradley-Terry" in plan and "domain if_rm, think" in plan
    assert "preset ifrl" in sources and "top_k=20" in sources and "temperature=0.8" in sources


def plan_text(recipe, *args, width=300):
    from rich.console import Console

    from cascade_rl.plan import describe_plan

    console = Console(width=width, record=True)
    console.print(describe_plan(recipe, None, *args))
    return console.export_text()


def test_the_plan_says_which_preset_a_stage_extends_and_that_its_name_chose_it(monkeypatch):
    from cascade_rl.recipe import merge_presets

    data = {**RECIPE, "stages": [*RECIPE["stages"], {**RECIPE["stages"][1], "name": "ifrl-again", "preset": "ifrl"}]}
    text = plan_text(parse_recipe(yaml.safe_load(yaml.safe_dump(data))), merge_presets(data))
    assert "preset ifrl (by the stage's name)" in text  # stages[1]: no preset field
    again = next(line for line in text.splitlines() if "ifrl-again" in line)
    assert "preset ifrl" in again and "by the stage's name" not in again
    monkeypatch.setenv("CASCADE_VLLM", "off")
    assert "CASCADE_VLLM=off in the environment: runtime.use_vllm auto will not use vLLM" in plan_text(
        parse_recipe(yaml.safe_load(yaml.safe_dump(RECIPE)))
    )


# --------------------------------------------------------------------- the dry run is the run's own check (issue 42)
MATH = {
    "name": "m",
    "model": {"path": "base"},
    "eval": {"benchmarks": [{"name": "gsm8k", "data": "gsm8k-test.jsonl", "format": "gsm8k", "k": 1}]},
    "stages": [{"kind": "grpo", "name": "math", "data": [{"path": "math.jsonl", "format": "gsm8k"}]}],
}


def test_an_absolute_path_and_bracketed_values_print(tmp_path):
    """rich read `[/tmp/.../gsm8k-train.jsonl]` as a closing markup tag and crashed; `benchmarks=`
    printed empty."""
    path = with_inputs(tmp_path, MATH)
    recipe = {**MATH, "stages": [{**MATH["stages"][0], "data": [{"path": str(tmp_path / "math.jsonl")}]}]}
    path.write_text(yaml.safe_dump({**recipe, "stages": [{**recipe["stages"][0], "domain": "math"}]}))
    result = dry_run(path)
    assert result.returncode == 0, result.stderr
    assert f"data=[{tmp_path / 'math.jsonl'}]" in result.stdout
    assert "benchmarks=[gsm8k]" in result.stdout


def stage(**fields) -> dict:
    return {**MATH, "stages": [{**MATH["stages"][0], **fields}]}


@pytest.mark.parametrize(
    "recipe, error",
    [
        (stage(data="missing.jsonl"), "stages[0] (math).data[0].path: data file not found: {dir}/missing.jsonl"),
        (
            {**MATH, "eval": {"benchmarks": [{"name": "gsm8k", "data": "gsm8k-test.jsonl", "format": "gsmk8"}]}},
            "eval.benchmarks[0] (gsm8k).format: unknown format 'gsmk8'; known: nemo-gym,",
        ),
        (
            stage(data=[{"path": "math.jsonl", "format": "gsm8k", "format_options": {"split": "train"}}]),
            "stages[0] (math).data[0].format: format gsm8k takes no option 'split'",
        ),
        (
            stage(prompts_per_batch=4, rollouts_per_prompt=4, per_device_batch_size=3),
            "stages[0] (math).per_device_batch_size: 3 does not divide the 16 completions of a step",
        ),
        (
            stage(reward_options={"math": {"languge_penalty": -1}}),
            "stages[0] (math).reward_options.math.languge_penalty: unknown option; math accepts: language_penalty",
        ),
        ({**MATH, "model": {"path": "nowhere"}}, "model.path: {dir}/nowhere does not exist"),
        (stage(data="base"), "stages[0] (math).data[0].path: data file not found: {dir}/base"),  # no data file in it
        (
            {
                **MATH,
                "stages": [
                    {"kind": "reward_model", "data": "math.jsonl"},
                    {
                        **MATH["stages"][0],
                        "name": "rlhf",
                        "data": "math.jsonl",
                        "reward_options": {"preference": {"reward_model": "http:///v1#rm"}},
                    },
                ],
            },
            "stages[1] (rlhf).reward_options.preference.reward_model: server 'http:///v1#rm' is not an "
            "http(s)://host:port URL",
        ),
        (
            {
                **MATH,
                "stages": [
                    {"kind": "reward_model", "data": "math.jsonl"},
                    {
                        **MATH["stages"][0],
                        "name": "rlhf",
                        "data": "math.jsonl",
                        "reward_options": {"preference": {"reward_model": "rm-model"}},
                    },
                ],
            },
            "stages[1] (rlhf).reward_options.preference.reward_model: {dir}/rm-model is neither a model directory",
        ),
        ({"name": "e", "eval": MATH["eval"]}, "stages: none: an evaluation-only recipe trains nothing"),
    ],
    ids=[
        "missing data",
        "benchmark format",
        "format option",
        "micro-batch",
        "reward option",
        "model",
        "directory",
        "server spec",
        "local reward model",
        "no stages",
    ],
)
def test_the_dry_run_refuses_what_the_run_refuses_before_any_model_loads(tmp_path, recipe, error):
    result = dry_run(with_inputs(tmp_path, recipe))
    assert result.returncode == 2, result.stdout + result.stderr
    assert error.format(dir=tmp_path) in " ".join(result.stderr.split()), result.stderr


@pytest.mark.parametrize(
    "recipe, error",
    [
        (stage(data="missing.jsonl"), "stages[0] (math).data[0].path: data file not found"),
        (
            {**MATH, "eval": {"benchmarks": [{"name": "gsm8k", "data": "gsm8k-test.jsonl", "format": "gsmk8"}]}},
            "eval.benchmarks[0] (gsm8k).format: unknown format 'gsmk8'",
        ),
    ],
    ids=["missing data", "benchmark format"],
)
def test_the_run_refuses_with_the_dry_runs_message_before_it_writes_anything(tmp_path, recipe, error):
    """The run used to start vLLM and die with a traceback after 10 s on an unknown benchmark
    format; the dry run said nothing (a `missing:` cell) and exited 0."""
    path = with_inputs(tmp_path, recipe)
    checked, run = dry_run(path), dry_run(path, "--out", str(tmp_path / "run"), command="")
    assert checked.returncode == run.returncode == 2, run.stderr
    assert error in checked.stderr and checked.stderr.splitlines()[-1] == run.stderr.splitlines()[-1]
    assert not (tmp_path / "run").exists() and "Traceback" not in run.stderr


def test_relative_paths_are_read_from_the_recipe_file_and_printed_resolved(tmp_path):
    """Data paths resolved from the current directory and `extends:` from the recipe file; now
    both from the file, the same from any directory, and the dry run prints where each went."""
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    path = with_inputs(tmp_path, MATH)
    base = {
        **MATH,
        "model": {"path": "../base"},
        "eval": {"benchmarks": [{"name": "gsm8k", "data": "../gsm8k-test.jsonl", "format": "gsm8k"}]},
    }
    (recipes / "base.yaml").write_text(yaml.safe_dump({**base, "stages": []}))
    (recipes / "r.yaml").write_text(
        yaml.safe_dump(
            {
                "extends": "base.yaml",
                "stages": [{**MATH["stages"][0], "data": [{"path": "../math.jsonl", "format": "gsm8k"}]}],
            }
        )
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = dry_run(Path("../recipes/r.yaml"), cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    assert f"model.path: {tmp_path / 'base'}" in result.stdout
    assert f"stages[0] (math).data[0].path: {tmp_path / 'math.jsonl'}" in result.stdout
    assert f"eval.benchmarks[0] (gsm8k).data: {tmp_path / 'gsm8k-test.jsonl'}" in result.stdout
    assert path.exists()
