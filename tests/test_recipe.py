"""Recipes: every shipped YAML validates, the paper's values reach TRL, bad recipes name the field."""

from pathlib import Path

import pytest
import yaml

from cascade_rl.recipe import RecipeError, expand, load_recipe, paper_defaults, parse_recipe
from cascade_rl.train.grpo import grpo_config

RECIPES = sorted((Path(__file__).resolve().parents[1] / "recipes").glob("*.yaml"))


@pytest.mark.parametrize("path", RECIPES, ids=[p.name for p in RECIPES])
def test_every_shipped_recipe_loads_and_starts_with_its_command(path):
    recipe = load_recipe(path)
    assert recipe.stages
    assert path.read_text().splitlines()[0].startswith("# cascade run recipes/")


def test_8b_recipe_resolves_to_the_papers_trl_settings(tmp_path):
    recipe = load_recipe("recipes/nemotron-cascade-8b.yaml")
    stages = {s.name: s for s in recipe.stages}
    config = {
        name: grpo_config(stages[name], stages[name].curriculum[0], recipe.runtime, tmp_path, 0, "bfloat16")
        for name in ("rlhf", "ifrl", "math", "code", "swe")
    }
    for name, args in config.items():
        assert args.beta == 0.0 and args.entropy_coef == 0.0 and args.num_iterations == 1, name
        assert args.loss_type == "dapo" and args.scale_rewards == "group", name
        assert args.steps_per_generation == args.gradient_accumulation_steps, name
        assert args.top_p == 0.95 and args.lr_scheduler_type == "constant", name
        assert args.generation_batch_size == 128 * args.num_generations, name
    assert (
        config["rlhf"].temperature,
        config["rlhf"].learning_rate,
        config["rlhf"].max_completion_length,
        config["rlhf"].mask_truncated_completions,
        config["rlhf"].max_steps,
    ) == (0.6, 2e-6, 12288, False, 800)
    assert stages["rlhf"].thinking == "half" and stages["ifrl"].thinking == "no_think"
    assert (config["ifrl"].top_k, config["ifrl"].max_completion_length) == (20, 8192)
    assert stages["ifrl"].dynamic_filter.enabled and stages["math"].dynamic_filter.enabled
    assert [c.max_response_length for c in stages["math"].curriculum] == [24576, 32768, 40960]
    assert [c.overlong_filter for c in stages["math"].curriculum] == [True, False, False]
    assert config["math"].temperature == 1.0 and config["math"].mask_truncated_completions is True
    assert (config["code"].learning_rate, config["code"].temperature, config["code"].mask_truncated_completions) == (
        4e-6,
        1.0,
        False,
    )
    assert (config["swe"].num_generations, config["swe"].learning_rate, config["swe"].max_completion_length) == (
        16,
        2.5e-6,
        16384,
    )
    assert [c.max_prompt_length for c in stages["swe"].curriculum] == [16384, 24576]
    assert config["math"].model_init_kwargs["dtype"].__str__() == "torch.bfloat16"
    # activation checkpointing only when the recipe asks (TRL's configs default it to on)
    assert recipe.runtime.gradient_checkpointing is True and config["math"].gradient_checkpointing is True
    runtime = recipe.runtime.model_copy(update={"gradient_checkpointing": False})
    assert (
        grpo_config(
            stages["math"], stages["math"].curriculum[0], runtime, tmp_path, 0, "bfloat16"
        ).gradient_checkpointing
        is False
    )


def test_14b_thinking_recipe_uses_the_thinking_model_defaults():
    stages = {s.name: s for s in load_recipe("recipes/nemotron-cascade-14b-thinking.yaml").stages}
    assert stages["rlhf"].thinking == "think"
    assert stages["ifrl"].domain == "if_rm" and stages["ifrl"].reward_options["if_rm"]["reward_model"] == "@rm"
    assert [(c.max_response_length, c.overlong_filter) for c in stages["ifrl"].curriculum] == [
        (8192, True),
        (16384, True),
    ]
    assert [c.max_response_length for c in stages["math"].curriculum] == [28672, 40960]
    assert stages["sft"].substages[1].learning_rate == 5e-5


def test_paper_defaults_fill_only_what_the_recipe_leaves_out():
    recipe = parse_recipe(
        {
            "name": "x",
            "model": {"path": "base"},
            "stages": [{"kind": "grpo", "name": "math", "data": "m.jsonl", "temperature": 0.7}],
        }
    )
    stage = recipe.stages[0]
    assert stage.temperature == 0.7 and stage.learning_rate == 2e-6 and stage.domain == "math"
    assert paper_defaults("custom-name") == {}


@pytest.mark.parametrize(
    "stage, field, message",
    [
        (
            {"kind": "grpo", "name": "math", "data": "m", "thinking": "sometimes"},
            "stages[0] (math).thinking",
            "allowed",
        ),
        ({"kind": "grpo", "name": "g", "data": "m", "curriculum": []}, "stages[0] (g).curriculum", "at least 1"),
        (
            {"kind": "grpo", "name": "g", "data": "m", "curriculum": [{"max_steps": 3}]},
            "stages[0] (g).curriculum[0].max_response_length",
            "required",
        ),
        (
            {"kind": "sft", "substages": [{"data": "a", "epocs": 1}]},
            "stages[0] (sft).substages[0].epocs",
            "unknown field",
        ),
        ({"kind": "grpo", "name": "rlhf", "data": "m"}, "reward_model", "needs a reward model"),
        ({"kind": "reward_model", "data": "p", "learning_rate": -1}, "stages[0] (rm).learning_rate", "greater than 0"),
        ({"kind": "dpo", "name": "x"}, "stages[0] (x)", "does not match"),
    ],
)
def test_bad_recipes_name_the_field(stage, field, message):
    with pytest.raises(RecipeError) as error:
        parse_recipe({"name": "x", "model": {"path": "base"}, "stages": [stage]})
    assert field in str(error.value) and message in str(error.value)


@pytest.mark.parametrize(
    "options, message",
    [
        (
            {"math": {"languge_penalty": -1}},
            "stages[0] (math).reward_options.math.languge_penalty: unknown option; math accepts: language_penalty, "
            "mixing_min_letters, timeout",
        ),
        (
            {"code": {"time_limt": 2}},
            "stages[0] (math).reward_options.code.time_limt: unknown option; code accepts: cpu_limit, "
            "language_penalty, memory_mb, output_bytes, stop_on_failure, time_limit",
        ),
        (
            {"math": {"language_penalty": "abc"}},
            "stages[0] (math).reward_options.math.language_penalty: Input should be a valid number",
        ),
        ({"maths": {}}, "stages[0] (math).reward_options.maths: unknown reward domain 'maths'; known: code,"),
        ({"swe": {"similarity": "exact"}}, "reward_options.swe.similarity: Input should be 'lexical' or 'semantic'"),
    ],
)
def test_reward_options_are_checked_when_the_recipe_loads(options, message):
    """Issue 39: `reward_options: {math: {languge_penalty: -1}}` trained with the default penalty
    without a word; now the recipe is refused, naming the stage, the domain and the option."""
    stage = {"kind": "grpo", "name": "math", "data": "m.jsonl", "reward_options": options}
    with pytest.raises(RecipeError) as error:
        parse_recipe({"name": "x", "model": {"path": "base"}, "stages": [stage]})
    assert message in str(error.value)


def test_reward_option_values_are_read_as_their_types():
    stage = {"kind": "grpo", "name": "math", "data": "m.jsonl", "reward_options": {"math": {"language_penalty": "-1"}}}
    recipe = parse_recipe({"name": "x", "model": {"path": "base"}, "stages": [stage]})
    assert recipe.stages[0].reward_options == {"math": {"language_penalty": -1.0}}
    with pytest.raises(RecipeError, match=r"stages\[0\] \(math\)\.domain: unknown reward domain 'mth'"):
        parse_recipe({"name": "x", "model": {"path": "base"}, "stages": [{**stage, "domain": "mth"}]})


def test_missing_model_and_unknown_benchmark_are_reported(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "x",
                "model": {},
                "stages": [
                    {
                        "kind": "grpo",
                        "name": "g",
                        "data": "m",
                        "curriculum": [{"max_response_length": 8}],
                        "eval": ["nope"],
                    }
                ],
            }
        )
    )
    with pytest.raises(RecipeError) as error:
        load_recipe(path)
    assert "model" in str(error.value) and "exactly one of model.path" in str(error.value)


def test_environment_expansion(monkeypatch):
    monkeypatch.setenv("CASCADE_DATA", "/data")
    assert expand("${CASCADE_DATA}/x.jsonl") == "/data/x.jsonl"
    assert expand("${UNSET_VAR_XYZ:-d}/y") == "d/y"
    with pytest.raises(RecipeError, match="UNSET_VAR_XYZ"):
        expand("${UNSET_VAR_XYZ}/y")


@pytest.mark.parametrize(
    "world, field, message",
    [
        ({"options": {"sft_nearmiss": 0.5}}, "world.options", "unknown WorldOptions field 'sft_nearmiss'"),
        ({"options": {"math_style": "abacus"}}, "world.options", "math_style"),
        ({"options": {"sft_near_miss": 2}}, "world.options", "sft_near_miss"),
        ({"sizes": {"sft_maths": 10}}, "world.sizes", "unknown WorldSizes field 'sft_maths'"),
    ],
)
def test_bad_world_sections_name_the_field(world, field, message):
    stage = {"kind": "sft", "substages": [{"data": "a"}]}
    with pytest.raises(RecipeError) as error:
        parse_recipe({"name": "x", "model": {"tiny": {}}, "world": world, "stages": [stage]})
    assert field in str(error.value) and message in str(error.value)


def eval_recipe(**eval_spec):
    return {"name": "x", "model": {"path": "base"}, "eval": eval_spec, "stages": [{"kind": "eval"}]}


@pytest.mark.parametrize(
    "eval_spec, message",
    [
        (
            {"benchmarks": [{"name": "aime25", "data": "a.jsonl"}], "targets": {"math": "aime24"}},
            "eval.targets.math: unknown benchmark 'aime24'; defined in eval.benchmarks: ['aime25']",
        ),
        (
            {"benchmarks": [{"name": "lcb", "data": "l.jsonl", "since": "2025-05-01", "until": "2024-08-01"}]},
            "eval.benchmarks[0]: since (2025-05-01) is after until (2024-08-01)",
        ),
        ({"benchmarks": [{"name": "lcb", "data": "l.jsonl", "since": "August"}]}, "eval.benchmarks[0].since"),
        ({"benchmarks": [{"name": "b", "data": "b.jsonl", "kind": "judge"}]}, "eval.benchmarks[0].kind"),
        ({"max_concurrency": 0}, "eval.max_concurrency"),
        (
            {"benchmarks": [{"name": "m", "data": "m.jsonl", "domain": "math", "options": {"timout": 2}}]},
            "eval.benchmarks[0].options.timout: unknown option; math accepts: language_penalty, mixing_min_letters, "
            "timeout",
        ),
        (
            {"benchmarks": [{"name": "c", "data": "c.jsonl", "domain": "code", "options": {"time_limit": "two"}}]},
            "eval.benchmarks[0].options.time_limit: Input should be a valid number",
        ),
        (
            {"benchmarks": [{"name": "a", "data": "a.jsonl", "kind": "arena", "options": {"style_contrl": False}}]},
            "eval.benchmarks[0].options.style_contrl: unknown arena option; accepted: style_control",
        ),
        ({"benchmarks": [{"name": "m", "data": "m.jsonl", "domain": "maths"}]}, "unknown reward domain 'maths'"),
    ],
)
def test_bad_eval_sections_name_the_field(eval_spec, message):
    with pytest.raises(RecipeError) as error:
        parse_recipe(eval_recipe(**eval_spec))
    assert message in str(error.value)


def test_eval_targets_and_date_windows_parse():
    spec = parse_recipe(
        eval_recipe(
            benchmarks=[{"name": "lcb-v5", "data": "l.jsonl", "since": "2024-08-01", "until": "2025-02-01"}],
            targets={"code": "lcb-v5"},
            target_gain=2.5,
        )
    ).eval
    assert spec.targets == {"code": "lcb-v5"} and spec.target_gain == 2.5 and spec.forgetting_limit == 5.0
    assert str(spec.benchmarks[0].since) == "2024-08-01" and spec.benchmarks[0].date_field == "contest_date"


def test_target_gain_per_stage_names_only_target_stages():
    spec = parse_recipe(
        eval_recipe(benchmarks=[{"name": "b", "data": "b.jsonl"}], targets={"swe": "b"}, target_gain={"swe": 5})
    ).eval
    assert spec.target_gain == {"swe": 5.0}
    with pytest.raises(RecipeError, match="target_gain.math: not a stage named in eval.targets"):
        parse_recipe(
            eval_recipe(benchmarks=[{"name": "b", "data": "b.jsonl"}], targets={"swe": "b"}, target_gain={"math": 5})
        )


def test_tiny_recipe_declares_the_toy_targets_its_report_checks():
    assert load_recipe("recipes/tiny.yaml").eval.targets == {
        "rlhf": "toy-arena",
        "ifrl": "toy-ifeval",
        "math": "toy-math",
        "code": "toy-code",
        "swe": "toy-swe",
    }


def test_relative_paths_are_read_from_the_recipe_file(tmp_path, monkeypatch):
    """One rule for every input path (docs/recipes.md, "Paths"): relative to the file that
    writes it, like `extends:`; a variable's value from the environment as the shell gives it."""
    (tmp_path / "recipes").mkdir()
    path = tmp_path / "recipes" / "r.yaml"
    stage = {
        "kind": "grpo",
        "name": "math",
        "data": ["data/a.jsonl", {"path": "${CASCADE_TEST_DATA:-../data}/b.jsonl"}, "${world}/c.jsonl"],
        "reward_options": {"swe": {"judge": "local:models/judge"}},
    }
    path.write_text(
        yaml.safe_dump({"name": "x", "model": {"path": "../models/m"}, "output_dir": "runs/x", "stages": [stage]})
    )
    monkeypatch.chdir(tmp_path / "recipes")
    monkeypatch.delenv("CASCADE_TEST_DATA", raising=False)
    recipe = load_recipe(path)
    assert recipe.model.path == str(tmp_path / "models" / "m")
    data = [source.path for source in recipe.stages[0].data]
    assert data == [
        str(path.parent / "data" / "a.jsonl"),
        f"${{CASCADE_TEST_DATA:-{tmp_path / 'data'}}}/b.jsonl",
        "${world}/c.jsonl",
    ]
    assert expand(data[1]) == str(tmp_path / "data" / "b.jsonl")
    monkeypatch.setenv("CASCADE_TEST_DATA", "elsewhere")  # from the shell: relative to where cascade runs
    assert expand(data[1]) == "elsewhere/b.jsonl"
    assert recipe.stages[0].reward_options["swe"]["judge"] == f"local:{path.parent / 'models' / 'judge'}"
    assert recipe.output_dir == "runs/x"  # an output: where cascade runs


# ----------------------------------------------------------------------------- per-sub-stage data (issue 39)
def grpo(**fields) -> dict:
    return {"kind": "grpo", "name": "g", **fields}


def one_stage(stage: dict, kind: str = "unified"):
    return parse_recipe({"name": "x", "model": {"path": "base", "kind": kind}, "stages": [stage]}).stages[0]


def test_a_curriculum_step_may_name_its_own_data_and_the_others_train_the_stages():
    stage = one_stage(
        grpo(
            data="stage.jsonl",
            curriculum=[
                {"max_response_length": 8},
                {"max_response_length": 8, "data": "second.jsonl"},
                {"max_response_length": 8, "data": [{"path": "third.jsonl", "format": "gsm8k", "limit": 5}]},
            ],
        )
    )
    assert [[s.path for s in stage.substage_data(i)] for i in range(3)] == [
        ["stage.jsonl"],
        ["second.jsonl"],
        ["third.jsonl"],
    ]
    assert stage.curriculum[2].data[0].limit == 5
    assert [s.path for s in stage.all_data] == ["stage.jsonl", "second.jsonl", "third.jsonl"]
    own = one_stage(grpo(curriculum=[{"max_response_length": 8, "data": "a"}, {"max_response_length": 8, "data": "b"}]))
    assert own.data == [] and [own.substage_data(i)[0].path for i in (0, 1)] == ["a", "b"]


@pytest.mark.parametrize(
    "stage, message",
    [
        (
            grpo(curriculum=[{"max_response_length": 8, "data": "a"}, {"max_response_length": 8}]),
            "data: Field required",
        ),
        (grpo(data="s", curriculum=[{"max_response_length": 8, "data": "a"}]), "no sub-stage trains it"),
        (
            grpo(data="s", curriculum=[{"max_response_length": 8, "data": {"path": "a", "rejection": {}}}]),
            "only SFT sub-stages sample their own rows",
        ),
        (grpo(data="s", curriculum=[{"max_response_length": 8, "data": {"paht": "a"}}]), "curriculum[0].data[0].paht"),
        (
            grpo(data="s", curriculum=[{"max_response_length": 8, "plateau_window": 0}]),
            "curriculum[0].plateau_window",
        ),
        (
            grpo(
                data="s",
                stabilisers={"reward_shaping": "tanh_z"},
                curriculum=[{"max_response_length": 8, "plateau_window": 5}],
            ),
            "tanh_z centres on 0",
        ),
        (grpo(data={"path": "s", "drop_topics": ["maths"]}, curriculum=[{"max_response_length": 8}]), "drop_topics"),
    ],
)
def test_bad_substage_data_and_stop_rules_name_the_field(stage, message):
    with pytest.raises(RecipeError) as error:
        one_stage(stage)
    assert "stages[0] (g)" in str(error.value) and message in str(error.value)


@pytest.mark.parametrize("kind, lengths", [("unified", [8192, 8192]), ("thinking", [8192, 16384])])
def test_the_ifrl_preset_switches_from_the_ifeval_to_the_ifbench_train_taxonomy(kind, lengths):
    """SPEC 6: IF-RL's two sub-stages of increasing difficulty, IFEval's taxonomy then
    IFBench-train's, each on its own part of the released data, from the previous checkpoint."""
    stage = one_stage({"kind": "grpo", "name": "ifrl", "reward_options": {"if_rm": {"reward_model": "rm"}}}, kind)
    assert stage.data == [] and [c.max_response_length for c in stage.curriculum] == lengths
    parts = [(s.format, s.format_options) for i in (0, 1) for s in stage.substage_data(i)]
    assert parts == [
        ("nemotron-cascade-rl-if", {"taxonomy": "ifeval"}),
        ("nemotron-cascade-rl-if", {"taxonomy": "iftrain"}),
    ]
    # a stage that names its own data trains it in both of the preset's sub-stages
    mine = one_stage(
        {"kind": "grpo", "name": "ifrl", "data": "mine.jsonl", "reward_options": stage.reward_options}, kind
    )
    assert [mine.substage_data(i)[0].path for i in (0, 1)] == ["mine.jsonl", "mine.jsonl"]
    assert [c.max_response_length for c in mine.curriculum] == lengths


@pytest.mark.parametrize("name", ["nemotron-cascade-8b", "nemotron-cascade-14b-thinking"])
def test_the_paper_recipes_switch_if_data_and_swe_context_sets_per_sub_stage(name):
    stages = {s.name: s for s in load_recipe(f"recipes/{name}.yaml").stages}
    assert "ifrl-ifbench" not in stages  # one IF-RL stage, two sub-stages
    ifrl = stages["ifrl"]
    assert [ifrl.substage_data(i)[0].format_options["taxonomy"] for i in (0, 1)] == ["ifeval", "iftrain"]
    swe = stages["swe"]
    limits = [c.max_prompt_length for c in swe.curriculum]
    assert [Path(swe.substage_data(i)[0].path).name for i in (0, 1)] == [f"context-{limit}.jsonl" for limit in limits]
    first = swe.curriculum[0]
    assert (first.plateau_window, first.plateau_tolerance, first.max_steps) == (10, 0.01, 200)
    assert swe.curriculum[1].plateau_window is None
    (rlhf_source,) = stages["rlhf"].data
    assert rlhf_source.drop_topics == ["math", "code"]


def test_the_recipes_topics_are_the_classifiers():
    from typing import get_args

    from cascade_rl.data.topics import TOPICS
    from cascade_rl.recipe import Topic

    assert get_args(Topic) == TOPICS


def test_the_swe_preset_trains_the_set_built_for_each_context_limit_and_switches_on_a_plateau():
    stage = one_stage({"kind": "grpo", "name": "swe"})
    assert [c.max_prompt_length for c in stage.curriculum] == [16384, 24576]
    assert [stage.substage_data(i)[0].path for i in (0, 1)] == [
        "${CASCADE_DATA:-data}/rl/swe/context-16384.jsonl",
        "${CASCADE_DATA:-data}/rl/swe/context-24576.jsonl",
    ]
    assert stage.curriculum[0].plateau_window == 10 and stage.curriculum[0].max_steps == 200


def test_a_grpo_sub_stages_own_data_is_read_from_the_recipe_file_too(tmp_path, monkeypatch):
    (tmp_path / "recipes").mkdir()
    path = tmp_path / "recipes" / "r.yaml"
    steps = [{"max_response_length": 8, "data": "a.jsonl"}, {"max_response_length": 8, "data": {"path": "../b.jsonl"}}]
    stage = {"kind": "grpo", "name": "g", "curriculum": steps}
    path.write_text(yaml.safe_dump({"name": "x", "model": {"path": "m"}, "stages": [stage]}))
    monkeypatch.chdir(tmp_path)
    (loaded,) = load_recipe(path).stages
    assert [loaded.substage_data(i)[0].path for i in (0, 1)] == [
        str(path.parent / "a.jsonl"),
        str(tmp_path / "b.jsonl"),
    ]


@pytest.mark.parametrize(
    "branch_from, message",
    [
        ("later", r"stages\[1\] \(side\)\.branch_from: 'later' is not an earlier policy stage of the main line"),
        ("rm", r"'rm' is not an earlier policy stage"),
        ("other_side", r"'other_side' is not an earlier policy stage of the main line"),
        ("nothing", r"earlier ones: \['sft'\]"),
    ],
)
def test_a_branch_must_start_from_an_earlier_main_line_policy_stage(branch_from, message):
    def grpo(name, **extra):
        return {"kind": "grpo", "name": name, "data": "x.jsonl", "curriculum": [{"max_response_length": 4}], **extra}

    sft = {"kind": "sft", "substages": [{"data": "x.jsonl"}]}
    stages = [sft, grpo("side", branch_from=branch_from), grpo("later")]
    if branch_from == "rm":
        stages.insert(1, {"kind": "reward_model", "name": "rm", "data": "x.jsonl"})
        stages[2]["name"] = "side"
    if branch_from == "other_side":
        stages.insert(1, grpo("other_side", branch_from="sft"))
    with pytest.raises(RecipeError, match=message):
        parse_recipe({"name": "t", "model": {"path": "x"}, "stages": stages})
    stages = [sft, grpo("side", branch_from="sft"), grpo("later")]
    assert parse_recipe({"name": "t", "model": {"path": "x"}, "stages": stages}).stages[1].branch_from == "sft"
