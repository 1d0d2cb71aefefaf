"""LoRA stages (``lora:`` on an SFT, GRPO or distill stage): adapters train, the checkpoint the
stage hands over is a plain model with the adapters merged in float32, in one process and in two."""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml
from child_env import child_environment
from transformers import AutoModelForCausalLM

from cascade_rl.recipe import parse_recipe
from cascade_rl.train.common import merged_adapters, peft_config
from cascade_rl.train.context import StageContext
from cascade_rl.train.grpo import run_grpo_stage

ROOT = Path(__file__).resolve().parents[2]
LORA = {"r": 4, "alpha": 8}


def rl_rows(path: Path) -> Path:
    rows = [{"prompt": f"what is {a} plus {a + 1}?", "answer": str(2 * a + 1)} for a in range(8)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def grpo_recipe(data: Path, model: Path, **stage: object) -> dict:
    return {
        "name": "lora",
        "seed": 0,
        "model": {"path": str(model)},
        "runtime": {"torch_threads": 1, "reward_workers": 1, "save_steps": None},
        "stages": [
            {
                "kind": "grpo",
                "name": "toy",
                "data": str(data),
                "domain": "tiny_assets:first_char_parity",
                "thinking": "think",
                "rollouts_per_prompt": 4,
                "prompts_per_batch": 2,
                "per_device_batch_size": 2,  # 4 micro-batches per step
                "learning_rate": 0.05,
                "lora": LORA,
                "curriculum": [{"max_response_length": 6, "max_steps": 2}],
                **stage,
            }
        ],
    }


def parameters(path: Path) -> dict[str, torch.Tensor]:
    return dict(AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).named_parameters())


def check_merged(base: Path, trained: Path) -> None:
    """A plain checkpoint (no adapter files) in float32; the adapted linear layers moved, the
    embeddings and norms (no adapters) did not."""
    assert not list(trained.glob("adapter_*")), "adapters must be merged, not saved beside the model"
    assert json.loads((trained / "config.json").read_text())["dtype"] == "float32"
    before, after = parameters(base), parameters(trained)
    assert before.keys() == after.keys()
    assert torch.equal(before["model.embed_tokens.weight"], after["model.embed_tokens.weight"])
    assert torch.equal(before["model.norm.weight"], after["model.norm.weight"])
    moved = [name for name in before if "proj" in name and not torch.equal(before[name], after[name])]
    assert moved, "no adapted layer changed"


def test_grpo_stage_with_lora_hands_over_a_plain_merged_checkpoint(tiny_checkpoint, tmp_path):
    recipe = parse_recipe(grpo_recipe(rl_rows(tmp_path / "rl.jsonl"), tiny_checkpoint))
    stage = recipe.stages[0]
    model = run_grpo_stage(
        stage,
        StageContext.settle(policy=tiny_checkpoint, stage_dir=tmp_path / "01-toy", runtime=recipe.runtime, seed=0),
    )
    check_merged(tiny_checkpoint, model)
    metrics = [json.loads(line) for line in (tmp_path / "01-toy" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]


def test_the_merge_keeps_updates_smaller_than_a_bfloat16_step(tiny_checkpoint):
    """Adapters over bfloat16 weights are merged in float32: an update of 1e-6 survives (added
    to the bfloat16 weights it would round away)."""
    from peft import get_peft_model

    base = AutoModelForCausalLM.from_pretrained(tiny_checkpoint, dtype=torch.bfloat16)
    original = base.model.layers[0].mlp.up_proj.weight.detach().float().clone()
    model = get_peft_model(base, peft_config(SimpleNamespace(r=4, alpha=4.0, dropout=0.0, target_modules="all-linear")))
    layer = model.base_model.model.model.layers[0].mlp.up_proj
    with torch.no_grad():
        layer.lora_A["default"].weight.fill_(1.0)
        layer.lora_B["default"].weight.fill_(1e-6 / 4)  # B @ A = 1e-6 everywhere (scale alpha / r = 1)
    naive = (original.bfloat16() + 1e-6).float()  # what a merge into bfloat16 weights would leave
    assert (naive == original).float().mean() > 0.9  # the update rounds away from most weights
    trainer = SimpleNamespace(model=model, accelerator=SimpleNamespace(unwrap_model=lambda m: m))
    merged = merged_adapters(trainer)
    weight = merged.model.layers[0].mlp.up_proj.weight
    assert weight.dtype == torch.float32
    assert torch.allclose(weight - original, torch.full_like(original, 1e-6), atol=1e-8)


def test_sft_stage_with_lora_trains_and_merges(tiny_checkpoint, tmp_path):
    from cascade_rl.train.sft import run_sft_stage

    rows = [
        {
            "messages": [
                {"role": "user", "content": f"what is {a} plus 1?"},
                {"role": "assistant", "content": f"{a + 1}"},
            ]
        }
        for a in range(8)
    ]
    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    stage = {
        "kind": "sft",
        "lora": LORA,
        "substages": [
            {"data": str(data), "max_length": 128, "batch_size": 4, "per_device_batch_size": 2, "learning_rate": 0.05}
        ],
    }
    recipe = parse_recipe({"name": "s", "model": {"path": str(tiny_checkpoint)}, "stages": [stage]})
    model = run_sft_stage(
        recipe.stages[0],
        StageContext.settle(policy=tiny_checkpoint, stage_dir=tmp_path / "01-sft", runtime=recipe.runtime, seed=0),
    )
    check_merged(tiny_checkpoint, model)


def test_lora_stage_in_two_processes(tiny_checkpoint, tmp_path):
    """torchrun --nproc_per_node 2 (gloo): the same stage trains, one process writes, and the
    checkpoint is the merged plain model."""
    recipe = grpo_recipe(rl_rows(tmp_path / "rl.jsonl"), tiny_checkpoint, prompts_per_batch=4)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    out = tmp_path / "run"
    launcher = Path(sys.executable).with_name("torchrun")
    port = str(29400 + os.getpid() % 1000)
    cli = ["-m", "cascade_rl.cli", "run", str(path), "--out", str(out)]
    env = child_environment()
    result = subprocess.run(
        [str(launcher), "--nproc_per_node", "2", "--master_port", port, *cli],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    status = json.loads((out / "01-toy" / "stage.json").read_text())
    assert status["status"] == "done" and status["processes"] == 2
    draws = [json.loads(line) for line in (out / "01-toy" / "substage-1" / "draws.jsonl").read_text().splitlines()]
    assert [d["step"] for d in draws] == [1, 2]  # one writer, each step once
    assert all(len(set(d["schedule_digests"])) == 1 and d["rollouts"] == 16 for d in draws)
    check_merged(tiny_checkpoint, out / "01-toy" / "model")


@pytest.mark.parametrize("kind", ["sft", "grpo", "distill"])
def test_lora_fields_are_validated(kind):
    from cascade_rl.recipe import RecipeError

    stage = {
        "sft": {"kind": "sft", "substages": [{"data": "x.jsonl"}]},
        "grpo": {"kind": "grpo", "name": "g", "data": "x.jsonl", "curriculum": [{"max_response_length": 8}]},
        "distill": {"kind": "distill", "data": "x.jsonl", "teachers": {"math": "t"}, "max_response_length": 8},
    }[kind]
    with pytest.raises(RecipeError, match=r"lora\.r"):
        parse_recipe({"name": "v", "model": {"path": "m"}, "stages": [{**stage, "lora": {"r": 0}}]})
