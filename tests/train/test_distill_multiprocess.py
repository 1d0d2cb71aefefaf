"""A distill stage at paper scale on this machine: ``torchrun --nproc_per_node 2`` (gloo, CPU) with
several micro-batches per process against one process. The same prompts in the same modes are
drawn whatever the process count, one writer, per-domain metrics; ``kill -9`` of a process
mid-stage, then ``--resume``, reaches the uninterrupted run's weights."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
import yaml
from child_env import child_environment
from tiny_assets import build_checkpoint

ROOT = Path(__file__).resolve().parents[2]
STEPS = 6
STAGE = "01-mopd"


@pytest.fixture(scope="module")
def stage_recipe(tmp_path_factory, tiny_checkpoint):
    folder = tmp_path_factory.mktemp("distill-mp")
    rows = [{"prompt": f"what is {a} plus {a + 1}?", "domain": ("alpha", "beta", "gamma")[a % 3]} for a in range(12)]
    data = folder / "prompts.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    teacher_a = build_checkpoint(folder / "teacher-a", seed=1)
    teacher_b = build_checkpoint(folder / "teacher-b", hidden=48, seed=2)
    recipe = {
        "name": "distill-mp",
        "seed": 0,
        "model": {"path": str(tiny_checkpoint)},
        "runtime": {"save_steps": 2, "torch_threads": 1, "reward_workers": 1},
        "stages": [
            {
                "kind": "distill",
                "name": "mopd",
                "data": str(data),
                "teachers": {"alpha": str(teacher_a), "beta": str(teacher_b), "gamma": str(teacher_a)},
                "thinking": {"alpha": "think", "beta": "half", "gamma": "no_think"},
                "rollouts_per_prompt": 2,
                "prompts_per_batch": 4,
                "per_device_batch_size": 2,  # 1 process: 4 micro-batches per step; 2 processes: 2 each
                "max_response_length": 4,
                "max_steps": STEPS,
                "learning_rate": 0.01,
            }
        ],
    }
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def command(recipe: Path, out: Path, processes: int, *extra: str) -> list[str]:
    cli = ["-m", "cascade_rl.cli", "run", str(recipe), "--out", str(out), *extra]
    if processes == 1:
        return [sys.executable, *cli]
    launcher = Path(sys.executable).with_name("torchrun")
    port = str(29700 + os.getpid() % 200)
    return [str(launcher), "--nproc_per_node", str(processes), "--master_port", port, *cli]


def environment() -> dict:
    return child_environment()


def run(recipe, out, processes, *extra):
    result = subprocess.run(
        command(recipe, out, processes, *extra), capture_output=True, text=True, timeout=900, env=environment()
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def draws(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / STAGE / "substage-1" / "draws.jsonl").read_text().splitlines()]


def weights(out: Path) -> list[torch.Tensor]:
    from transformers import AutoModelForCausalLM

    return list(AutoModelForCausalLM.from_pretrained(out / STAGE / "model").parameters())


@pytest.fixture(scope="module")
def one_process(stage_recipe, tmp_path_factory):
    out = tmp_path_factory.mktemp("one") / "run"
    run(stage_recipe, out, 1)
    return out


@pytest.fixture(scope="module")
def two_processes(stage_recipe, tmp_path_factory):
    out = tmp_path_factory.mktemp("two") / "run"
    run(stage_recipe, out, 2)
    return out


def test_two_processes_draw_the_same_prompts_in_the_same_modes_as_one(one_process, two_processes):
    single, double = draws(one_process), draws(two_processes)
    assert [d["step"] for d in double] == list(range(1, STEPS + 1))  # each drawn step trained once
    assert [(d["prompts"], d["modes"]) for d in double] == [(d["prompts"], d["modes"]) for d in single]
    for draw in double:
        assert len(draw["schedule_digests"]) == 2 and len(set(draw["schedule_digests"])) == 1
        assert draw["rollouts"] == 4 * 2  # prompts_per_batch x rollouts, over both processes
    metrics = [json.loads(line) for line in (two_processes / STAGE / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(1, STEPS + 1))  # one writer: one line per step
    domains = {key.split("/")[1] for m in metrics for key in m if key.startswith("distill/") and key.count("/") == 2}
    assert domains == {"alpha", "beta", "gamma"}
    assert all("distill/reverse_kl" in m and "time/teacher" in m for m in metrics)
    status = json.loads((two_processes / STAGE / "stage.json").read_text())
    assert status["status"] == "done" and status["processes"] == 2


def test_one_and_two_processes_train_the_same_modes_per_domain(one_process):
    """Each prompt is drawn in its domain's mode (half: both modes, as two prompts)."""
    record = json.loads((one_process / STAGE / "distill.json").read_text())
    assert record["prompts_per_domain"] == {"alpha": 4, "beta": 8, "gamma": 4}
    modes = {mode for draw in draws(one_process) for mode in draw["modes"]}
    assert modes == {"think", "no_think"}


def kill_mid_stage(recipe: Path, out: Path, processes: int) -> None:
    """Start the run, ``kill -9`` one training process once a checkpoint exists and a later step
    was drawn, and check the launcher ends."""
    launcher = subprocess.Popen(
        command(recipe, out, processes),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
        start_new_session=True,
    )
    log = out / STAGE / "substage-1" / "draws.jsonl"
    deadline = time.monotonic() + 600
    while not (log.exists() and len(log.read_text().splitlines()) >= 3):
        assert launcher.poll() is None and time.monotonic() < deadline, "the run ended before it could be killed"
        time.sleep(0.05)
    workers = psutil.Process(launcher.pid).children(recursive=True) if processes > 1 else [psutil.Process(launcher.pid)]
    victim = [w for w in workers if "cascade_rl.cli" in " ".join(w.cmdline())][-1]  # the last rank
    victim.send_signal(signal.SIGKILL)
    try:
        launcher.wait(timeout=180)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
    assert launcher.returncode != 0
    assert not (out / STAGE / "substage-1" / "done").exists()


@pytest.mark.parametrize("processes", [1, 2])
def test_kill_9_mid_stage_then_resume_reaches_the_uninterrupted_weights(
    processes, stage_recipe, one_process, two_processes, tmp_path
):
    reference = one_process if processes == 1 else two_processes
    out = tmp_path / "run"
    kill_mid_stage(stage_recipe, out, processes)
    assert list((out / STAGE / "substage-1" / "trainer").glob("checkpoint-*/cascade.json"))
    run(stage_recipe, out, processes, "--resume")
    assert json.loads((out / STAGE / "substage-1" / "done").read_text())["resumed_from_step"] in (2, 4)
    assert draws(out) == draws(reference)
    for resumed, uninterrupted in zip(weights(out), weights(reference)):
        assert torch.equal(resumed, uninterrupted)
