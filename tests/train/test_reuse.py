"""A run that starts from a released intermediate checkpoint (recipe ``start_from.checkpoint``;
train/reuse.py): the stages the checkpoint stands for are not trained, the next one trains from
the checkpoint, and what those stages would have left behind (a reward model) is refused before
any compute. The run-directory form of ``start_from`` is tested in tests/train/test_joint.py."""

import json
from pathlib import Path

import pytest

from cascade_rl.recipe import RecipeError, load_recipe, parse_recipe
from cascade_rl.train.reuse import check_source

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
SFT = {"kind": "sft", "substages": [{"data": "missing/sft.jsonl"}]}
RM = {"kind": "reward_model", "name": "rm", "data": "missing/pairs.jsonl"}
RLHF = {
    "kind": "grpo",
    "name": "rlhf",
    "data": "missing/rlhf.jsonl",
    "curriculum": [{"max_response_length": 5, "max_steps": 1}],
}


def test_the_8b_recipe_starts_after_rlhf_and_the_14b_one_cannot_lose_its_reward_model():
    recipe = load_recipe(ROOT / "recipes" / "nemotron-cascade-8b.yaml").model_dump(mode="json")
    start = {"checkpoint": "${CASCADE_MODELS:-models}/Nemotron-Cascade-8B-Intermediate-ckpts/Nemotron-Cascade-8B-RLHF"}
    parsed = parse_recipe({**recipe, "start_from": {**start, "through": "rlhf"}})
    assert parsed.start_from.checkpoint.endswith("Nemotron-Cascade-8B-RLHF") and parsed.start_from.run is None
    thinking = load_recipe(ROOT / "recipes" / "nemotron-cascade-14b-thinking.yaml").model_dump(mode="json")
    with pytest.raises(RecipeError) as error:
        parse_recipe({**thinking, "start_from": {**start, "through": "rlhf"}})
    assert "stages[3] (ifrl).reward_options.if_rm.reward_model: '@rm' is taken over from start_from.checkpoint" in str(
        error.value
    )
    served = {"if_rm": {"reward_model": "http://rm-node:8001#rm", "max_length": 16384}}
    thinking["stages"][3]["reward_options"] = served
    assert parse_recipe({**thinking, "start_from": {**start, "through": "rlhf"}}).stages[3].reward_options == served


def test_start_from_takes_a_run_or_a_checkpoint_and_the_checkpoint_must_be_one(tmp_path):
    stages = [SFT, RM]
    with pytest.raises(RecipeError, match="give exactly one of run .* and checkpoint"):
        parse_recipe({"name": "x", "model": {"path": "m"}, "stages": stages, "start_from": {"through": "rm"}})
    both = {"run": "runs/x", "checkpoint": "ckpt", "through": "rm"}
    with pytest.raises(RecipeError, match="give exactly one of run"):
        parse_recipe({"name": "x", "model": {"path": "m"}, "stages": stages, "start_from": both})
    (tmp_path / "empty").mkdir()
    recipe = parse_recipe(
        {
            "name": "x",
            "model": {"path": "m"},
            "stages": stages,
            "start_from": {"checkpoint": str(tmp_path / "empty"), "through": "sft"},
        }
    )
    with pytest.raises(
        RecipeError, match=r"start_from.checkpoint: .*empty: not a checkpoint directory \(no config.json"
    ):
        check_source(recipe)


def released_checkpoint(path: Path) -> Path:
    """A tiny checkpoint shipped as a released one is: its own weights and its own chat template."""
    from tiny_assets import build_checkpoint
    from transformers import AutoTokenizer

    build_checkpoint(path, seed=3)
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.chat_template = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    tokenizer.save_pretrained(path)
    return path


def test_a_run_starts_from_a_released_checkpoint_and_trains_only_the_later_stages(tmp_path, monkeypatch):
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    from cascade_rl.chat import chat_template
    from cascade_rl.train.cascade import Cascade

    monkeypatch.syspath_prepend(str(TESTS))
    released = released_checkpoint(tmp_path / "ckpts" / "Nemotron-Cascade-8B-RLHF")
    questions = [(a, b) for a in range(2) for b in range(2)]
    toy = tmp_path / "toy.jsonl"
    toy.write_text(
        "".join(json.dumps({"prompt": f"what is {a} plus {b}?", "answer": str(a + b)}) + "\n" for a, b in questions)
    )
    recipe = {
        "name": "from-rlhf",
        "model": {"path": "/nowhere/Qwen3-8B-Base"},  # not needed: the run starts from the checkpoint
        "runtime": {"reward_workers": 1},
        "eval": {
            "decontaminate": False,
            "benchmarks": [
                {
                    "name": "toy-sum",
                    "data": str(toy),
                    "domain": "tiny_assets:contains_answer",
                    "k": 1,
                    "max_new_tokens": 4,
                }
            ],
        },
        "stages": [
            SFT,  # the data of the stages taken over is neither read nor needed
            RM,
            RLHF,
            {
                "kind": "grpo",
                "name": "toy",
                "data": str(toy),
                "domain": "tiny_assets:contains_answer",
                "thinking": "no_think",
                "rollouts_per_prompt": 2,
                "prompts_per_batch": 2,
                "learning_rate": 1e-3,
                "curriculum": [{"max_response_length": 5, "max_steps": 1}],
            },
        ],
        "start_from": {"checkpoint": str(released), "through": "rlhf"},
    }
    lines: list[str] = []
    report = Cascade(parse_recipe(recipe), tmp_path / "run", echo=lines.append).run()
    run = tmp_path / "run"
    for index, name in enumerate(["sft", "rm", "rlhf"], start=1):
        status = json.loads((run / f"{index:02d}-{name}" / "stage.json").read_text())
        assert status["status"] == "done" and status["reused_from"] == str(released.resolve())
        assert not (run / f"{index:02d}-{name}" / "model").exists()
    assert sum("finished earlier, skipped" in line for line in lines) == 3
    toy_status = json.loads((run / "04-toy" / "stage.json").read_text())
    assert toy_status["status"] == "done" and toy_status["policy"].endswith("04-toy/model")
    # the run's starting model is the checkpoint's weights with the recipe's chat template
    base = run / "00-base" / "model"
    assert (base / "model.safetensors").resolve() == (released / "model.safetensors").resolve()
    assert AutoTokenizer.from_pretrained(base).chat_template == chat_template()
    assert AutoTokenizer.from_pretrained(released).chat_template != chat_template()  # the user's copy untouched
    # and the toy stage trained from it: one step from the checkpoint, far from any other model
    from tiny_assets import build_checkpoint

    other = load_file(build_checkpoint(tmp_path / "other", seed=0) / "model.safetensors")
    start, trained = (
        load_file(released / "model.safetensors"),
        load_file(run / "04-toy" / "model" / "model.safetensors"),
    )

    def distance(a, b):
        return max((a[k].float() - b[k].float()).abs().max().item() for k in a)

    assert distance(trained, start) < distance(other, start) / 5
    assert (run / "04-toy" / "metrics.jsonl").read_text().count("\n") == 1  # one GRPO step
    assert [s["stage"] for s in json.loads(report.with_suffix(".json").read_text())["stages"]][-1] == "toy"
