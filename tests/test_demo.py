"""The embedded default (`make demo`, recipes/tiny.yaml), shortened to a few steps per stage:
the whole cascade runs from a fresh directory on CPU and produces the report a user reads, in
one process and under ``torchrun --nproc_per_node 2`` (gloo) with the same prompts; then the
joint-RL baseline (recipes/tiny-joint.yaml) from its SFT and RM checkpoints, and `cascade
compare` of the two."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cascade_rl.llm.vllm_engine import import_problem

ROOT = Path(__file__).resolve().parents[1]
SMALL_WORLD = {
    "sft_general": 24,
    "sft_ifeval": 24,
    "sft_math": 40,
    "sft_code": 24,
    "sft_tool": 8,
    "sft_swe_repair": 8,
    "sft_swe_localization": 4,
    "sft_swe_testgen": 2,
    "rm_pairs": 32,
    "rl_rlhf": 8,
    "rl_ifrl": 8,
    "rl_math": 8,
    "rl_code": 8,
    "rl_swe": 8,
    "bench_arena": 4,
    "bench_ifeval": 4,
    "bench_math": 4,
    "bench_code": 4,
    "bench_swe": 2,
    "bench_tool": 4,
}


def shortened_tiny_recipe() -> dict:
    return shortened_recipe(yaml.safe_load((ROOT / "recipes" / "tiny.yaml").read_text()))


def shortened_recipe(recipe: dict) -> dict:
    """A shipped tiny recipe at toy sizes: a small world and model, a few steps per stage."""
    recipe["world"].setdefault("sizes", {}).update(SMALL_WORLD)
    # head size 32: vLLM's CPU kernels take it, so the shortened cascade samples through vLLM
    recipe["model"]["tiny"].update(hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=64)
    for bench in recipe["eval"]["benchmarks"]:
        bench.update(k=1, max_new_tokens=24)
    for stage in recipe["stages"]:
        if stage["kind"] == "sft":
            for sub in stage["substages"]:
                sub.update(max_steps=3, batch_size=8, per_device_batch_size=8)
        elif stage["kind"] == "reward_model":
            stage.update(max_steps=2, batch_size=8, per_device_batch_size=8)
        elif stage["kind"] == "grpo":
            stage.update(prompts_per_batch=2, rollouts_per_prompt=2)
            if stage["name"] == "math":  # several micro-batches per step (and per process under torchrun)
                stage.update(per_device_batch_size=1)
            for step in stage["curriculum"]:
                step.update(max_steps=1, max_response_length=min(step["max_response_length"], 24))
    return recipe


def run_cascade(recipe: Path, out: Path, processes: int = 1) -> subprocess.CompletedProcess:
    cli = ["-m", "cascade_rl.cli", "run", str(recipe), "--out", str(out)]
    launcher = [
        str(Path(sys.executable).with_name("torchrun")),
        "--nproc_per_node",
        str(processes),
        "--master_port",
        str(29000 + os.getpid() % 1000),
    ]
    result = subprocess.run(
        [sys.executable, *cli] if processes == 1 else [*launcher, *cli],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1", "CASCADE_VLLM": "on"},  # as users run it
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def shortened(tmp_path_factory) -> Path:
    recipe = tmp_path_factory.mktemp("recipe") / "tiny-short.yaml"
    recipe.write_text(yaml.safe_dump(shortened_tiny_recipe()))
    return recipe


@pytest.fixture(scope="module")
def one_process(shortened, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    run_dir = tmp_path_factory.mktemp("one") / "run"
    return run_dir, run_cascade(shortened, run_dir)


def test_shortened_tiny_cascade_runs_end_to_end_and_reports(one_process):
    run_dir, result = one_process
    report = json.loads((run_dir / "report.json").read_text())
    assert [s["stage"] for s in report["stages"]] == ["sft", "rm", "rlhf", "ifrl", "math", "code", "swe"]
    assert [s["kind"] for s in report["stages"]] == ["sft", "reward_model"] + ["grpo"] * 5
    assert report["total_wall_s"] > 0
    benchmarks = {"toy-arena", "toy-ifeval", "toy-math", "toy-code", "toy-swe", "tool-call"}
    for stage in report["stages"]:
        assert stage["wall_s"] > 0
        expected = (
            {"toy-arena"}
            if stage["stage"] == "rm"
            else benchmarks - ({"toy-arena"} if stage["stage"] == "sft" else set())
        )
        assert expected <= set(stage["eval"]), stage
        assert all(v is None or 0.0 <= v <= 100.0 for v in stage["eval"].values())
    markdown = (run_dir / "report.md").read_text()
    assert "toy-math" in markdown and "rlhf" in markdown
    machine = json.loads((run_dir / "machine.json").read_text())
    assert machine["choices"]["use_vllm"] is (import_problem() is None)  # vLLM wherever it is installed
    assert "sampling: vLLM" in result.stderr or import_problem() is not None
    plots = list((run_dir / "plots").glob("*.png"))
    assert len(plots) >= 5 and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in plots)
    assert "report:" in result.stderr


def grpo_draws(run_dir: Path) -> dict[str, list[dict]]:
    return {
        path.parent.parent.name + "/" + path.parent.name: [json.loads(line) for line in path.read_text().splitlines()]
        for path in sorted(run_dir.glob("*/substage-*/draws.jsonl"))
    }


def test_shortened_tiny_cascade_in_two_processes_trains_the_same_prompts(shortened, one_process, tmp_path):
    run_dir = tmp_path / "run"
    run_cascade(shortened, run_dir, processes=2)
    single, double = grpo_draws(one_process[0]), grpo_draws(run_dir)
    assert set(double) == set(single) and len(double) == 6  # rlhf, ifrl, math x2, code, swe
    for name, steps in double.items():
        assert [(d["step"], d["prompts"], d["modes"]) for d in steps] == [
            (d["step"], d["prompts"], d["modes"]) for d in single[name]
        ], name
        for draw in steps:
            assert (
                draw["rollouts"] == 2 * 2
                and len(set(draw["schedule_digests"])) == 1 == len(draw["schedule_digests"]) - 1
            )
    report = json.loads((run_dir / "report.json").read_text())
    assert [s["stage"] for s in report["stages"]] == ["sft", "rm", "rlhf", "ifrl", "math", "code", "swe"]
    for stage_dir in sorted(run_dir.glob("0[1-9]-*")):
        status = json.loads((stage_dir / "stage.json").read_text())
        assert status["status"] == "done" and status["processes"] == 2
        metrics = stage_dir / "metrics.jsonl"
        if metrics.exists():  # one writer: one line per step
            steps = [json.loads(line)["step"] for line in metrics.read_text().splitlines()]
            assert steps == sorted(set(steps))


def test_joint_baseline_starts_from_the_cascade_s_checkpoints_and_compares_with_it(one_process, tmp_path):
    cascade_dir, _ = one_process
    recipe = shortened_recipe(yaml.safe_load((ROOT / "recipes" / "tiny-joint.yaml").read_text()))
    recipe["start_from"]["run"] = str(cascade_dir)
    recipe["stages"][2]["curriculum"][0]["max_steps"] = 3
    path = tmp_path / "tiny-joint-short.yaml"
    path.write_text(yaml.safe_dump(recipe))
    joint_dir = tmp_path / "joint"
    run_cascade(path, joint_dir)

    report, cascade = (json.loads((d / "report.json").read_text()) for d in (joint_dir, cascade_dir))
    assert [s["stage"] for s in report["stages"]] == ["sft", "rm", "joint"]
    assert report["stages"][:2] == cascade["stages"][:2]  # the same SFT and RM, not retrained
    for stage in ("01-sft", "02-rm"):
        assert (joint_dir / stage / "model").resolve() == (cascade_dir / stage / "model").resolve()
    draws = [json.loads(line) for line in (joint_dir / "03-joint" / "substage-1" / "draws.jsonl").open()]
    assert len(draws) == 3
    for draw in draws:  # sources in order, 8 prompts each: rlhf, ifrl (no_think), math, code, swe (think)
        for prompt, mode in zip(draw["prompts"], draw["modes"]):
            assert mode == ("no_think" if 8 <= prompt < 16 else "think" if prompt >= 16 else mode)
    steps = [json.loads(line) for line in (joint_dir / "03-joint" / "metrics.jsonl").open()]
    assert len(steps) == 3 and all(s["rollouts/total"] == 4 for s in steps)

    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("cascade")),
            "compare",
            str(cascade_dir),
            str(joint_dir),
            "--out",
            str(tmp_path / "compare"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "## Gain over SFT" in result.stdout and f"{joint_dir.name} - {cascade_dir.name}" in result.stdout
    assert (tmp_path / "compare" / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
