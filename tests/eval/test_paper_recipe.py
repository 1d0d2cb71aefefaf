"""recipes/eval-paper.yaml: the paper's main-table benchmarks with its inference settings, and
`cascade eval` running every one of them on public-format samples (tests/eval/data/paper)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from eval_assets import ANSWER_C

from cascade_rl.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "eval-paper.yaml"
SAMPLES = Path(__file__).resolve().parent / "data" / "paper"
MAIN_TABLE = [
    "mmlu",
    "mmlu-pro",
    "gpqa-diamond",
    "arena-hard",
    "ifeval",
    "ifbench",
    "aime24",
    "aime25",
    "lcb-v5",
    "lcb-v6",
    "lcb-pro-2025q1",
    "lcb-pro-2025q2",
    "bfcl",
]


def test_the_paper_recipe_has_the_main_table_and_its_inference_settings():
    benchmarks = {b.name: b for b in load_recipe(RECIPE).eval.benchmarks}
    assert list(benchmarks) == MAIN_TABLE
    for bench in benchmarks.values():
        assert (bench.temperature, bench.top_p, bench.max_new_tokens, bench.metric) == (0.6, 0.95, 65536, "avg@k")
    k = {name: bench.k for name, bench in benchmarks.items()}
    assert k["lcb-v5"] == k["lcb-v6"] == k["lcb-pro-2025q1"] == k["lcb-pro-2025q2"] == 8  # stated by the seed
    assert k["aime24"] == k["aime25"] == 64
    assert all(4 <= value <= 64 for value in k.values())
    windows = {name: (str(b.since), str(b.until)) for name, b in benchmarks.items() if b.since}
    assert windows == {
        "lcb-v5": ("2024-08-01", "2025-02-01"),
        "lcb-v6": ("2024-08-01", "2025-05-01"),
        "lcb-pro-2025q1": ("2025-01-01", "2025-04-01"),
        "lcb-pro-2025q2": ("2025-04-01", "2025-07-01"),
    }
    assert benchmarks["arena-hard"].kind == "arena" and benchmarks["arena-hard"].judge == "${CASCADE_JUDGE}"
    assert {b.mode for name, b in benchmarks.items() if name.startswith("if")} == {"no_think"}


def cascade_eval(*args, env=None):
    command = [str(Path(sys.executable).with_name("cascade")), "eval", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=900)


@pytest.mark.slow
def test_every_paper_benchmark_runs_on_public_format_samples(answer_c_model, first_position_judge, tmp_path):
    out = tmp_path / "eval-out"
    env = {"CASCADE_EVAL_DATA": str(SAMPLES), "COLUMNS": "200"}
    result = cascade_eval(answer_c_model, "--recipe", RECIPE, "--judge", first_position_judge, "--out", out, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads((out / "eval.json").read_text())
    assert list(results) == MAIN_TABLE
    prompts = {name: r["prompts"] for name, r in results.items()}
    # the date windows pick the LiveCodeBench problems of their months
    assert prompts["lcb-v5"] == 2 and prompts["lcb-v6"] == 3
    assert prompts["lcb-pro-2025q1"] == prompts["lcb-pro-2025q2"] == 1
    value = {name: r["value"] for name, r in results.items()}
    # the model answers "Answer: C" to everything
    assert value["mmlu"] == 50.0 and value["mmlu-pro"] == 50.0  # gold C and B; C and H
    assert value["gpqa-diamond"] in (0.0, 100.0) and value["aime24"] == value["aime25"] == 0.0
    assert value["arena-hard"] == pytest.approx(50.0)  # a judge biased to position A, cancelled by the swap
    assert value["bfcl"] == 50.0  # the irrelevance row: no call, rightly
    assert set(results["ifeval"]["extra"]) >= {"prompt_strict", "prompt_loose", "instruction_strict"}
    assert results["aime24"]["k"] == 64
    samples = [json.loads(line) for line in (out / "eval-samples" / "mmlu.jsonl").read_text().splitlines()]
    assert len(samples) == 8 and {s["response"] for s in samples} == {ANSWER_C}
    assert "mmlu-pro" in result.stdout and "50.0" in result.stdout


def test_the_arena_judge_must_be_named_before_anything_runs(answer_c_model, tmp_path):
    env = {"CASCADE_EVAL_DATA": str(SAMPLES)}
    os.environ.pop("CASCADE_JUDGE", None)
    result = cascade_eval(
        answer_c_model, "--recipe", RECIPE, "-b", "mmlu", "-b", "arena-hard", "--out", tmp_path, env=env
    )
    assert result.returncode == 2 and "${CASCADE_JUDGE} is not set" in result.stderr
    assert not (tmp_path / "eval-samples" / "mmlu.progress.jsonl").exists()


def test_model_and_generator_are_one_or_the_other(answer_c_model, tmp_path):
    both = cascade_eval(answer_c_model, "--generator", "http://127.0.0.1:9/v1#m", "--recipe", RECIPE, "--out", tmp_path)
    neither = cascade_eval("--recipe", RECIPE, "--out", tmp_path)
    for result in (both, neither):
        assert result.returncode == 2 and "MODEL_DIR or --generator" in result.stderr
    missing = cascade_eval(
        tmp_path / "no-model", "--recipe", RECIPE, "-b", "mmlu", env={"CASCADE_EVAL_DATA": str(SAMPLES)}
    )
    assert missing.returncode == 2 and "neither a checkpoint directory nor a server spec" in missing.stderr


def test_cascade_eval_through_a_served_model(answer_c_model, transformers_server, tmp_path):
    env = {"CASCADE_EVAL_DATA": str(SAMPLES), "COLUMNS": "200"}
    generator = f"{transformers_server}#{answer_c_model}"
    args = ["--generator", generator, "--recipe", RECIPE, "-b", "mmlu", "-b", "mmlu-pro", "--concurrency", "2"]
    result = cascade_eval(*args, "--out", tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads((tmp_path / "eval.json").read_text())
    assert results["mmlu"]["value"] == results["mmlu-pro"]["value"] == 50.0
    assert "mmlu-pro" in result.stdout and "50.0" in result.stdout
