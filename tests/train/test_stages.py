"""One stage interface (issue 43): every stage kind a recipe can name has a runner in the registry,
the cascade looks runners up by kind only, and a stage's checks run before any stage computes."""

import typing
from pathlib import Path

import pytest

from cascade_rl.recipe import Stage, parse_recipe
from cascade_rl.train import cascade
from cascade_rl.train.context import Dtypes, Handover, StageContext
from cascade_rl.train.stages import RUNNERS, runner_for


def test_every_kind_a_recipe_can_name_has_one_runner_with_the_interface():
    union = typing.get_args(typing.get_args(Stage)[0])
    kinds = {typing.get_args(model.model_fields["kind"].annotation)[0] for model in union}
    assert kinds == set(RUNNERS)
    for runner in RUNNERS.values():
        assert callable(runner.run) and callable(runner.check)


def test_the_cascade_knows_no_stage_class():
    source = Path(cascade.__file__).read_text()
    for name in ("SFTStage", "RewardModelStage", "GRPOStage", "DistillStage"):
        assert name not in source, name


def context(tmp_path, **fields):
    from cascade_rl.recipe import Runtime

    return StageContext(Runtime(), 0, Dtypes("float32", "float32"), tmp_path / "01-x", tmp_path / "base", **fields)


def test_an_eval_stage_hands_over_what_it_was_given_and_a_kind_without_runner_is_named(tmp_path):
    recipe = parse_recipe({"name": "r", "model": {"path": "m"}, "stages": [{"kind": "eval"}]})
    given = context(tmp_path, reward_models={"rm": tmp_path / "rm"})
    assert runner_for(recipe.stages[0]).run(recipe.stages[0], given) == Handover(
        tmp_path / "base", {"rm": tmp_path / "rm"}
    )

    class Unknown:
        kind = "ppo"

    with pytest.raises(KeyError, match="no runner for stage kind 'ppo'; runners: sft, reward_model"):
        runner_for(Unknown())


def test_a_finished_reward_model_stage_still_hands_over_its_model(tmp_path):
    recipe = parse_recipe(
        {"name": "r", "model": {"path": "m"}, "stages": [{"kind": "reward_model", "data": "p.jsonl"}]}
    )
    before = Handover(tmp_path / "sft")
    after = cascade.finished_handover(recipe.stages[0], tmp_path / "02-rm", {"policy": str(tmp_path / "sft")}, before)
    assert after == Handover(tmp_path / "sft", {"rm": tmp_path / "02-rm" / "model"})


def test_a_stages_policy_is_recorded_relative_to_its_run_and_older_entries_still_read(tmp_path, monkeypatch):
    run = tmp_path / "runs" / "r"
    (run / "01-sft" / "model").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert cascade.policy_entry(Path("runs/r/01-sft/model"), Path("runs/r")) == "01-sft/model"
    assert cascade.policy_entry(tmp_path / "base", run) == str(tmp_path / "base")  # outside the run: absolute
    assert cascade.recorded_policy("01-sft/model", run) == run / "01-sft" / "model"
    # written before entries were relative to the run: relative to where cascade ran then
    assert cascade.recorded_policy("runs/r/01-sft/model", Path("runs/r")) == Path("runs/r/01-sft/model")


def test_each_runner_describes_its_stage_for_the_plan():
    recipe = parse_recipe(
        {
            "name": "r",
            "model": {"path": "m"},
            "stages": [
                {"kind": "sft", "substages": [{"data": "${world}/sft.jsonl", "max_steps": 7}]},
                {"kind": "reward_model", "data": "${world}/pairs.jsonl"},
                {"kind": "grpo", "name": "g", "data": "x.jsonl", "curriculum": [{"max_response_length": 8}] * 2},
                {"kind": "eval", "benchmarks": None},
            ],
        }
    )
    described = [runner_for(stage).describe(stage, {"world": "/w"}) for stage in recipe.stages]
    assert described[0] == ("built at run time", "7", "stage1: 16384 tok, 1 ep, lr 2e-05")
    assert described[1].settings.startswith("Bradley-Terry, base policy")
    assert described[2].rows.startswith("missing: x.jsonl") and described[2].steps == "<= 400"
    assert described[3] == ("-", "-", "benchmarks: all")


def test_the_plan_shows_each_substages_data_its_stop_rules_and_the_topics_left_out(tmp_path):
    rows = lambda n: "".join('{"prompt": "p", "domain": "preference"}\n' for _ in range(n))  # noqa: E731
    for name, count in (("rlhf.jsonl", 5), ("a.jsonl", 3), ("b.jsonl", 2)):
        (tmp_path / name).write_text(rows(count))
    stages = [
        {"kind": "reward_model", "data": "pairs.jsonl"},
        {
            "kind": "grpo",
            "name": "rlhf",
            "data": {"path": str(tmp_path / "rlhf.jsonl"), "drop_topics": ["math", "code"]},
        },
        {
            "kind": "grpo",
            "name": "swe",
            "curriculum": [
                {
                    "max_response_length": 16,
                    "max_prompt_length": 32,
                    "plateau_window": 2,
                    "data": str(tmp_path / "a.jsonl"),
                },
                {"max_response_length": 16, "max_prompt_length": 64, "data": str(tmp_path / "b.jsonl")},
            ],
        },
    ]
    recipe = parse_recipe({"name": "r", "model": {"path": "m"}, "stages": stages})
    rlhf, swe = (runner_for(stage).describe(stage, {}) for stage in recipe.stages[1:])
    assert rlhf.rows == "5" and rlhf.settings.endswith(", without math, code prompts")
    assert swe.rows == "3 -> 2" and swe.steps == "<= 400"
    assert "lengths 16(prompts <= 32, until the reward plateaus) -> 16(prompts <= 64)" in swe.settings
