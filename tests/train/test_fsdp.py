"""Sharded training under ``accelerate launch`` with 2 CPU processes: FSDP2
(configs/accelerate/fsdp2_cpu_test.yaml, gloo) and, when deepspeed is installed, DeepSpeed
ZeRO-3 (configs/accelerate/deepspeed_zero3_cpu_test.yaml). An SFT stage and a GRPO stage train
sharded and write sharded trainer checkpoints (one shard per process, model and optimizer);
each stage hands over a whole model that the next stage loads; a run killed mid-stage resumes
from its sharded checkpoint to the uninterrupted run's weights, bit for bit.

accelerate does not run FSDP on CPU processes (it silently wraps them in DDP); the FSDP2 launch
goes through tests/fsdp_on_cpu.py, which lifts only that check (its docstring, docs/scale.md).
ZeRO-3 needs no help: DeepSpeed falls back to its CPU accelerator."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from child_env import child_environment
from transformers import AutoModelForCausalLM

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs" / "accelerate"
# name -> (accelerate config, what the launched processes run, the files of a sharded checkpoint per process)
LAUNCHES = {
    "fsdp2": (
        CONFIGS / "fsdp2_cpu_test.yaml",
        [str(ROOT / "tests" / "fsdp_on_cpu.py")],
        ["pytorch_model_fsdp_0/__{rank}_0.distcp", "optimizer_0/__{rank}_0.distcp"],
    ),
    "zero3": (
        CONFIGS / "deepspeed_zero3_cpu_test.yaml",
        ["-m", "cascade_rl.cli"],
        [
            "global_step2/zero_pp_rank_{rank}_mp_rank_00_model_states.pt",
            "global_step2/zero_pp_rank_{rank}_mp_rank_00_optim_states.pt",
        ],
    ),
}
NO_DEEPSPEED = importlib.util.find_spec("deepspeed") is None


@pytest.fixture(
    params=["fsdp2", pytest.param("zero3", marks=pytest.mark.skipif(NO_DEEPSPEED, reason="no deepspeed"))],
    scope="module",
)
def setup(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def recipe(tmp_path_factory, tiny_checkpoint) -> Path:
    folder = tmp_path_factory.mktemp("sharded")
    sft = [
        {
            "messages": [
                {"role": "user", "content": f"what is {a} plus {b}?"},
                {"role": "assistant", "content": f"<think>{a}+{b}={a + b}</think>{a + b}"},
            ]
        }
        for a in range(6)
        for b in range(4)
    ]
    (folder / "sft.jsonl").write_text("".join(json.dumps(row) + "\n" for row in sft))
    rl = [{"prompt": f"what is {a} plus {a + 1}?", "answer": str(2 * a + 1)} for a in range(12)]
    (folder / "rl.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rl))
    recipe = {
        "name": "sharded",
        "seed": 0,
        "model": {"path": str(tiny_checkpoint)},
        "runtime": {"save_steps": 2, "torch_threads": 1, "reward_workers": 1},
        "stages": [
            {
                "kind": "sft",
                "name": "sft",
                "substages": [
                    {
                        "name": "s1",
                        "data": str(folder / "sft.jsonl"),
                        "max_length": 256,
                        "batch_size": 8,
                        "per_device_batch_size": 2,  # 2 micro-batches per process per step
                        "learning_rate": 3e-3,
                        "max_steps": 2,
                    }
                ],
            },
            {
                "kind": "grpo",
                "name": "toy",
                "data": str(folder / "rl.jsonl"),
                "domain": "tiny_assets:kill_once",  # first-character parity: a gradient from a random model
                "thinking": "half",
                "rollouts_per_prompt": 2,
                "prompts_per_batch": 4,
                "per_device_batch_size": 2,
                "learning_rate": 0.01,
                "curriculum": [{"max_response_length": 6, "max_steps": 3}],
            },
        ],
    }
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def launch(setup: str, recipe: Path, out: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    config, program, _ = LAUNCHES[setup]
    accelerate = str(Path(sys.executable).with_name("accelerate"))
    port = str(29300 + os.getpid() % 1000)
    command = [accelerate, "launch", "--config_file", str(config), "--main_process_port", port, *program]
    environment = child_environment(**(env or {}))
    return subprocess.run(
        [*command, "run", str(recipe), "--out", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=600,
        env=environment,
    )


def weights(model: Path) -> list[torch.Tensor]:
    return [p.detach() for p in AutoModelForCausalLM.from_pretrained(model).parameters()]


@pytest.fixture(scope="module")
def uninterrupted(setup, recipe, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp(setup) / "run"
    result = launch(setup, recipe, out)
    assert result.returncode == 0, result.stderr[-4000:]
    return out


def test_sft_and_grpo_train_sharded_and_hand_over_whole_models(uninterrupted, tiny_checkpoint):
    for stage in ("01-sft", "02-toy"):
        status = json.loads((uninterrupted / stage / "stage.json").read_text())
        assert status["status"] == "done" and status["processes"] == 2
    base = weights(tiny_checkpoint)
    sft, grpo = weights(uninterrupted / "01-sft" / "model"), weights(uninterrupted / "02-toy" / "model")
    assert [b.shape for b in base] == [s.shape for s in sft] == [g.shape for g in grpo]  # whole, not shards
    assert any(not torch.equal(b, s) for b, s in zip(base, sft))  # SFT trained
    assert any(not torch.equal(s, g) for s, g in zip(sft, grpo))  # GRPO trained on from the SFT model
    draws = (uninterrupted / "02-toy" / "substage-1" / "draws.jsonl").read_text().splitlines()
    assert [json.loads(line)["rollouts"] for line in draws] == [8] * 3


def test_kill_9_mid_grpo_then_resume_from_the_sharded_checkpoint(setup, recipe, uninterrupted, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    for finished in ("recipe.json", "01-sft"):  # the SFT stage is done; the GRPO stage starts from its model
        copy = shutil.copytree if (uninterrupted / finished).is_dir() else shutil.copy
        copy(uninterrupted / finished, out / finished)
    checkpoint = out / "02-toy" / "substage-1" / "trainer" / "checkpoint-2"
    flag = tmp_path / "kill.flag"
    flag.write_text("")
    kill = {"CASCADE_TEST_KILL_FLAG": str(flag), "CASCADE_TEST_KILL_AFTER": str(checkpoint / "cascade.json")}
    killed = launch(setup, recipe, out, "--resume", env=kill)
    assert killed.returncode != 0 and not flag.exists()  # a process killed itself in step 3
    for pattern in LAUNCHES[setup][2]:  # one shard of the model and one of the optimizer per process
        assert all((checkpoint / pattern.format(rank=rank)).is_file() for rank in (0, 1)), pattern
    resumed = launch(setup, recipe, out, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert json.loads((out / "02-toy" / "substage-1" / "done").read_text())["resumed_from_step"] == 2
    for got, expected in zip(weights(out / "02-toy" / "model"), weights(uninterrupted / "02-toy" / "model")):
        assert torch.equal(got, expected)
