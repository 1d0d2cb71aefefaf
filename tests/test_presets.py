"""The paper's stage presets are data (``src/cascade_rl/presets/*.yaml``) that GRPO stages extend
(issue 27), and every shipped recipe resolves to the values pinned in ``tests/assets/resolved/``.

The pinned files hold each recipe as ``cascade run RECIPE --dry-run --json`` prints it, with the
checkout's directory written ``<checkout>`` (relative paths are anchored at the recipe file). A
change to a default, a preset or a shipped recipe shows there as a diff to review; after an
intended one, rewrite them with ``.venv/bin/python tests/test_presets.py --write``."""

import json
import sys
from pathlib import Path

import pytest
import yaml

from cascade_rl.recipe import PRESETS, GRPOStage, RecipeError, load_recipe, paper_defaults, parse_recipe, preset_names

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))
PINNED = ROOT / "tests" / "assets" / "resolved"


def resolved(path: Path) -> dict:
    """The recipe resolved, the checkout's directory written ``<checkout>`` (its parent ``<checkout>/..``)."""
    text = json.dumps(load_recipe(path).model_dump(mode="json"))
    for directory, name in ((ROOT, "<checkout>"), (ROOT.parent, "<checkout>/..")):
        text = text.replace(json.dumps(str(directory) + "/")[1:-1], name + "/")
    return json.loads(text)


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_every_shipped_recipe_resolves_to_its_pinned_values(path):
    pinned = PINNED / f"{path.stem}.json"
    assert pinned.is_file(), f"no pinned resolution of {path.name}; run tests/test_presets.py --write"
    assert resolved(path) == json.loads(pinned.read_text()), (
        f"{path.name} resolves differently from {pinned.relative_to(ROOT)}; if intended, run "
        "`.venv/bin/python tests/test_presets.py --write` and review the diff"
    )


def test_the_presets_are_the_papers_grpo_stages_and_each_is_valid():
    assert preset_names() == ["code", "ifrl", "math", "multi_domain", "rlhf", "swe"]
    for name in preset_names():
        text = yaml.safe_load((PRESETS / f"{name}.yaml").read_text())
        assert set(text) - {"thinking_model"} <= set(GRPOStage.model_fields), name
        for kind in ("unified", "thinking"):
            settings = paper_defaults(name, kind)
            own_data = all("data" in step for step in settings["curriculum"])  # every sub-stage names its own
            stage = GRPOStage.model_validate(
                {**settings, "name": f"not-{name}", **({} if own_data else {"data": "x.jsonl"})}
            )
            # every preset names its reward domain, but the multi-domain stage's rows route themselves
            assert stage.curriculum and (stage.domain or name == "multi_domain"), (name, kind)


def test_the_multi_domain_preset_has_cascade_2s_shared_settings():
    stage = GRPOStage.model_validate({**paper_defaults("multi_domain"), "name": "multi_domain", "data": "x.jsonl"})
    assert (stage.rollouts_per_prompt, stage.prompts_per_batch, stage.learning_rate) == (16, 128, 3e-6)
    assert (stage.temperature, stage.top_p, stage.top_k, stage.domain) == (1.0, 1.0, None, None)
    assert stage.dynamic_filter.enabled and stage.max_turns == 6 and stage.stabilisers.kl_coef == 0.0
    assert stage.stabilisers.loss == "token" and not stage.curriculum[0].overlong_filter
    assert paper_defaults("custom-name") == {} and paper_defaults("../recipes/tiny") == {}


def stage(**fields) -> GRPOStage:
    stages = [{"kind": "reward_model", "data": "p.jsonl"}, {"kind": "grpo", "data": "x.jsonl", **fields}]
    return parse_recipe({"name": "r", "model": {"path": "m"}, "stages": stages}).stages[1]


def test_a_stage_extends_the_preset_it_names_or_the_one_of_its_name():
    by_name = stage(name="ifrl")
    by_preset = stage(name="ifrl-ifbench", preset="ifrl")
    assert by_name.preset == by_preset.preset == "ifrl"
    assert by_preset.model_dump(exclude={"name"}) == by_name.model_dump(exclude={"name"})
    assert (by_name.top_k, by_name.thinking, by_name.dynamic_filter.enabled) == (20, "no_think", True)
    plain = stage(name="ifrl", preset="none", curriculum=[{"max_response_length": 64}])
    assert (plain.preset, plain.top_k, plain.thinking, plain.domain) == ("none", None, "think", None)
    generic = stage(name="joint", curriculum=[{"max_response_length": 64}])
    assert generic.preset == "none"


def test_what_a_stage_sets_wins_over_its_preset_key_by_key():
    math = stage(name="math", temperature=0.7, reward_options={"math": {"timeout": 9}})
    assert math.temperature == 0.7 and math.learning_rate == 2e-6
    assert math.reward_options["math"] == {"language_penalty": -1.0, "timeout": 9}
    assert [c.max_response_length for c in math.curriculum] == [24576, 32768, 40960]


def test_an_unknown_preset_is_named_with_the_ones_there_are():
    with pytest.raises(RecipeError) as error:
        stage(name="x", preset="maths")
    assert "stages[1] (x)" in str(error.value) and "unknown preset 'maths'" in str(error.value)
    assert "code, ifrl, math, multi_domain, rlhf, swe" in str(error.value)


def write() -> None:
    PINNED.mkdir(parents=True, exist_ok=True)
    for path in RECIPES:
        (PINNED / f"{path.stem}.json").write_text(json.dumps(resolved(path), indent=1) + "\n")
        print(f"wrote {PINNED / path.stem}.json")


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    write()


def test_the_preset_merge_is_a_step_before_validation_that_says_what_each_preset_gave():
    from cascade_rl.recipe import merge_presets

    data = {
        "name": "r",
        "model": {"path": "m"},
        "stages": [
            {"kind": "grpo", "name": "ifrl", "data": "x.jsonl", "temperature": 0.8},
            {
                "kind": "grpo",
                "name": "if-again",
                "preset": "ifrl",
                "data": "x.jsonl",
                "dynamic_filter": {"enabled": False},
            },
            {"kind": "grpo", "name": "joint", "data": "x.jsonl", "curriculum": [{"max_response_length": 8}]},
        ],
    }
    merge = merge_presets(data)
    assert merge.chosen == {0: ("ifrl", "name"), 1: ("ifrl", "preset")}  # 2: no preset
    assert ("top_k",) in merge.given[0] and ("temperature",) not in merge.given[0]  # the recipe's own
    assert ("dynamic_filter", "enabled") not in merge.given[1] and ("dynamic_filter", "enabled") in merge.given[0]
    assert [stage["preset"] for stage in merge.data["stages"]] == ["ifrl", "ifrl", "none"]
    assert merge.data["stages"][0]["top_k"] == 20 and "top_k" not in data["stages"][0]  # the input is untouched
