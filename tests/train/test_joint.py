"""One GRPO stage over the prompts of several RL domains, and a run that starts from another
run's stages (SPEC section 1: the cascade against a joint RL baseline from the same SFT and
reward-model checkpoints; recipes/tiny-joint.yaml)."""

import json
from pathlib import Path

import pytest

from cascade_rl.recipe import RecipeError, parse_recipe
from cascade_rl.train.cascade import Cascade
from cascade_rl.train.grpo import _batch_split
from cascade_rl.train.reuse import check_source, link_stages
from cascade_rl.train.rl_data import build_rl_data
from cascade_rl.train.schedule import PromptSchedule

MATH = {"domain": "math", "prompt": "What is 2 + 3?", "answer": "5"}
IF = {"domain": "ifeval", "prompt": "Say hi in lowercase.", "instruction_id_list": ["change_case:english_lowercase"]}
CHAT = {"domain": "preference", "prompt": "Tell me about owls."}


def write_rows(path: Path, row: dict, count: int) -> str:
    path.write_text(
        "".join(json.dumps({**row, "prompt": f"{row['prompt']} ({i})", "kwargs": [{}]}) + "\n" for i in range(count))
    )
    return str(path)


def joint_stage(tmp_path: Path, **changes) -> dict:
    stage = {
        "kind": "grpo",
        "name": "joint",
        "data": [
            {"path": write_rows(tmp_path / "chat.jsonl", CHAT, 6), "domain": "preference"},
            {"path": write_rows(tmp_path / "if.jsonl", IF, 4), "domain": "if_rm"},
            write_rows(tmp_path / "math.jsonl", MATH, 6),
        ],
        "thinking": {"preference": "half", "if_rm": "no_think", "math": "think"},
        "prompts_per_batch": 4,
        "curriculum": [{"max_response_length": 16, "max_steps": 2}],
    }
    return {**stage, **changes}


def recipe(stages: list[dict], **extra) -> dict:
    return {"name": "joint", "model": {"path": "/nowhere"}, "stages": stages, **extra}


RM = {"kind": "reward_model", "name": "rm", "data": "pairs.jsonl"}


def test_each_row_keeps_its_reward_domain_and_thinking_mode(tmp_path):
    stage = parse_recipe(recipe([RM, joint_stage(tmp_path)])).stages[1]
    # the IF source is rewarded by IF + the reward model, which defaults to the run's @rm, as RLHF's does
    assert stage.reward_options == {"if_rm": {"reward_model": "@rm"}, "preference": {"reward_model": "@rm"}}
    data = build_rl_data(stage, seed=0)
    domains = {row["_domain"] for row in data.rows}
    assert domains == {"preference", "if_rm", "math"} and data.num_prompts == 16
    # chat prompts get a row per mode; IF and math one row in their own mode
    assert sorted((row["_domain"], row["_mode"]) for row in data.rows if row["_pidx"] in (0, 6, 10)) == [
        ("if_rm", "no_think"),
        ("math", "think"),
        ("preference", "no_think"),
        ("preference", "think"),
    ]
    assert data.modes == {**{p: "no_think" for p in range(6, 10)}, **{p: "think" for p in range(10, 16)}}
    schedule = PromptSchedule(
        data.prompts,
        prompts_per_batch=4,
        thinking=_batch_split(stage),
        dynamic_filter=stage.dynamic_filter,
        modes=data.modes,
    )
    row_of = data.row_index()
    for _ in range(8):
        draw = schedule.draw()
        for prompt, mode in zip(draw.prompts, draw.modes):
            assert mode == data.modes.get(prompt, mode)  # a fixed domain keeps its mode
            assert (prompt, mode) in row_of  # and there is a row to train
        schedule.record(draw.step, list(draw.prompts), [0.0] * 4)


def test_a_domain_without_a_mode_is_named(tmp_path):
    stage = joint_stage(tmp_path, thinking={"preference": "half", "math": "think"})
    with pytest.raises(RecipeError, match=r"stages \(joint\).thinking: no mode for reward domain 'if_rm'"):
        build_rl_data(parse_recipe(recipe([RM, stage])).stages[1], seed=0)


# ---------------------------------------------------------------- start_from


def write_source_run(root: Path, stages: list[dict]) -> Path:
    """A finished run as `cascade run` leaves it: recipe.json, world, stage directories."""
    run = root / "cascade"
    source = parse_recipe(recipe(stages, output_dir=str(run)))
    run.mkdir(parents=True)
    (run / "recipe.json").write_text(json.dumps(source.model_dump(mode="json")))
    (run / "world").mkdir()
    (run / "world" / ".done").write_text("done")
    (run / "arena").mkdir()
    (run / "arena" / "toy-arena.references.jsonl").write_text('{"response": "sft answer"}\n')
    for index, stage in enumerate(source.stages[:2], start=1):
        directory = run / f"{index:02d}-{stage.name}"
        (directory / "model").mkdir(parents=True)
        (directory / "eval.json").write_text(json.dumps({"toy-math": 10.0 * index}))
        status = {"index": index, "name": stage.name, "kind": stage.kind, "status": "done", "wall_s": 5.0}
        (directory / "stage.json").write_text(json.dumps({**status, "policy": f"elsewhere/{index}"}))
    return run


SFT = {"kind": "sft", "name": "sft", "substages": [{"data": "sft.jsonl"}]}


def test_stages_taken_over_are_linked_and_hand_over_their_checkpoints(tmp_path):
    source = write_source_run(tmp_path, [SFT, RM, joint_stage(tmp_path, name="math")])
    joint = parse_recipe(recipe([SFT, RM, joint_stage(tmp_path)], start_from={"run": str(source), "through": "rm"}))
    run = tmp_path / "joint-run"
    run.mkdir()
    link_stages(joint, run)
    assert (run / "world").resolve() == (source / "world").resolve()
    assert (run / "arena" / "toy-arena.references.jsonl").read_text() == '{"response": "sft answer"}\n'
    for name, policy in (("01-sft", "01-sft/model"), ("02-rm", "01-sft/model")):
        status = json.loads((run / name / "stage.json").read_text())
        assert status["status"] == "done" and status["reused_from"] == str((source / name).resolve())
        assert status["policy"] == policy  # through this run's links (relative to it), not the source's paths
        assert (run / name / "model").resolve() == (source / name / "model").resolve()
    assert json.loads((run / "02-rm" / "eval.json").read_text()) == {"toy-math": 20.0}
    cascade = Cascade(joint, run)
    with pytest.raises(RecipeError, match="--from rm: stage 'rm' is taken from .*not trained in this run"):
        cascade.run(start_from="rm")


def test_a_source_that_differs_or_has_not_finished_is_refused_before_any_compute(tmp_path):
    source = write_source_run(tmp_path, [SFT, RM])
    changed = {**SFT, "substages": [{"data": "sft.jsonl", "epochs": 2}]}
    joint = parse_recipe(recipe([changed, RM, joint_stage(tmp_path)], start_from={"run": str(source), "through": "rm"}))
    with pytest.raises(
        RecipeError, match=r"stage 'sft' differs from this recipe's \(substages\[0\].epochs: 1.0 there, 2.0 here\)"
    ):
        check_source(joint)
    (source / "02-rm" / "stage.json").write_text(json.dumps({"status": "trained"}))
    joint = parse_recipe(recipe([SFT, RM, joint_stage(tmp_path)], start_from={"run": str(source), "through": "rm"}))
    with pytest.raises(RecipeError, match="stage 'rm' has not finished there .*'trained'"):
        check_source(joint)
    missing = parse_recipe(recipe([SFT, RM], start_from={"run": str(tmp_path / "none"), "through": "sft"}))
    with pytest.raises(RecipeError, match="start_from.run: .*none: no recipe.json there"):
        check_source(missing)
    with pytest.raises(RecipeError, match="start_from.through: 'rl' is not a stage of this recipe; stages: sft, rm"):
        parse_recipe(recipe([SFT, RM], start_from={"run": str(source), "through": "rl"}))


# ---------------------------------------------------------------- the shipped pair


def test_tiny_joint_is_the_cascade_s_start_and_rl_compute_in_one_stage():
    """recipes/tiny-joint.yaml starts from tiny.yaml's own SFT and RM stages, evaluates the same
    benchmarks, and trains each domain's prompts at the cascade's rollouts and updates."""
    from cascade_rl.recipe import GRPOStage, load_recipe

    cascade, joint = load_recipe("recipes/tiny.yaml"), load_recipe("recipes/tiny-joint.yaml")
    assert joint.start_from.run == "runs/tiny" and joint.start_from.through == "rm"
    for section in ("model", "world", "runtime"):
        assert getattr(joint, section) == getattr(cascade, section), section
    assert joint.eval.benchmarks == cascade.eval.benchmarks
    assert [s.model_dump() for s in joint.stages[:2]] == [s.model_dump() for s in cascade.stages[:2]]
    rl = [s for s in cascade.stages if isinstance(s, GRPOStage)]
    (stage,) = [s for s in joint.stages if isinstance(s, GRPOStage)]
    steps = {s.name: sum(step.max_steps for step in s.curriculum) for s in rl}
    assert stage.curriculum[0].max_steps == sum(steps.values())
    assert (stage.prompts_per_batch, stage.rollouts_per_prompt) == (8, 8)
    assert {(s.prompts_per_batch, s.rollouts_per_prompt, s.learning_rate) for s in rl} == {(8, 8, stage.learning_rate)}

    # one epoch over the joint prompts = the prompts the cascade's stages drew (SWE: 60 steps of
    # 8 from 192 rows, so every row twice and a seeded half again)
    def epoch(source):
        name = source.path.split("rl_")[1].removesuffix(".jsonl")
        return name, round((source.limit or cascade.world.sizes[f"rl_{name}"]) * source.upsample)

    assert dict(map(epoch, stage.data)) == {name: count * 8 for name, count in steps.items()}
    domains = {s.name: s.domain for s in rl}
    assert {source.domain for source in stage.data} - {None} == {domains["rlhf"], domains["ifrl"]}
    assert stage.thinking == {
        domains["rlhf"]: "half",
        domains["ifrl"]: "no_think",
        "math": "think",
        "code": "think",
        "swe": "think",
    }
    assert [s.thinking for s in rl] == ["half", "no_think", "think", "think", "think"]


def test_the_real_joint_recipe_is_the_cascade_s_sft_and_rl_rollouts_in_one_stage():
    """recipes/smollm2-135m-joint.yaml starts from smollm2-135m.yaml's SFT stage, evaluates the same
    benchmarks, samples as many rollouts as the cascade's RL stages and filters what they filtered."""
    from cascade_rl.recipe import GRPOStage, load_recipe

    cascade, joint = load_recipe("recipes/smollm2-135m.yaml"), load_recipe("recipes/smollm2-135m-joint.yaml")
    assert joint.start_from.run == "runs/smollm2-135m" and joint.start_from.through == "sft"
    for section in ("model", "runtime"):
        assert getattr(joint, section) == getattr(cascade, section), section
    assert joint.eval.benchmarks == cascade.eval.benchmarks
    assert joint.stages[0].model_dump() == cascade.stages[0].model_dump()
    rl = [s for s in cascade.stages if isinstance(s, GRPOStage)]
    (stage,) = [s for s in joint.stages if isinstance(s, GRPOStage)]

    def rollouts(s):
        return sum(step.max_steps for step in s.curriculum) * s.prompts_per_batch * s.rollouts_per_prompt

    cascade_rollouts = sum(rollouts(s) for s in rl)
    assert abs(rollouts(stage) - cascade_rollouts) <= stage.prompts_per_batch * stage.rollouts_per_prompt
    filtered = {s.domain for s in rl if s.prompt_filter is not None}
    assert set(stage.prompt_filter.domains) == filtered == {"code"}
    assert {source.domain for source in stage.data} == {s.domain for s in rl}
    assert {source.format for source in stage.data} == {source.format for s in rl for source in s.data}
    (code,) = [s for s in rl if s.domain == "code"]
    assert [s.format_options for s in stage.data if s.domain == "code"] == [s.format_options for s in code.data]
    assert stage.prompt_filter.samples == code.prompt_filter.samples
