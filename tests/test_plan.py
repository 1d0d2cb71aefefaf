"""`cascade run --dry-run` says where every resolved setting came from (issue 27): the recipe or
a file it extends, the preset a stage extends, a value derived from other fields, or the
field's default."""

import subprocess
import sys
from pathlib import Path

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


def test_the_dry_run_prints_the_plan_then_the_sources(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(RECIPE))
    result = subprocess.run(
        [sys.executable, "-m", "cascade_rl.cli", "run", str(path), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
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
