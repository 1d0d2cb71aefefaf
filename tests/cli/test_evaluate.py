"""`cascade eval` for a small evaluation in one command (issue 42, item 4), and `cascade report`
refusing a directory that is not a run (item 7)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
GSM8K = ROOT / "tests" / "data" / "samples" / "gsm8k.jsonl"


def cascade(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "cascade_rl.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", "CASCADE_VLLM": "off"},
    )


def test_a_small_evaluation_of_a_public_file_in_one_command(tiny_checkpoint, tmp_path):
    """No recipe: the file, its public format and the settings on the command line."""
    out = tmp_path / "eval"
    result = cascade(
        "eval",
        tiny_checkpoint,
        "-b",
        f"gsm8k={GSM8K}:gsm8k",
        "--limit",
        2,
        "--max-new-tokens",
        8,
        "-k",
        2,
        "--temperature",
        0,
        "--mode",
        "no_think",
        "--batch-size",
        2,
        "--out",
        out,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    [gsm8k] = json.loads((out / "eval.json").read_text()).values()
    assert (gsm8k["prompts"], gsm8k["k"], gsm8k["metric"]) == (2, 2, "avg@k")
    samples = [json.loads(line) for line in (out / "eval-samples" / "gsm8k.jsonl").read_text().splitlines()]
    assert sorted(row["prompt_index"] for row in samples) == [0, 0, 1, 1]  # 2 prompts x k = 2


def test_an_evaluation_only_recipe_needs_no_stage_nor_model(tiny_checkpoint, tmp_path):
    """`stages: Field required`, then `at least 1 item`, until a dummy stage was added."""
    recipe = tmp_path / "eval.yaml"
    benchmarks = [{"name": "gsm8k", "data": str(GSM8K), "format": "gsm8k", "k": 1, "max_new_tokens": 8}]
    recipe.write_text(yaml.safe_dump({"name": "evaluation", "eval": {"benchmarks": benchmarks}}))
    result = cascade("eval", tiny_checkpoint, "--recipe", recipe, "--limit", 1, "--out", tmp_path / "eval")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((tmp_path / "eval" / "eval.json").read_text())["gsm8k"]["prompts"] == 1
    run = cascade("run", recipe, "--dry-run")
    assert run.returncode == 2 and "cascade eval MODEL --recipe RECIPE" in run.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["-b", f"gsm8k={GSM8K}:gsmk8"], "unknown format 'gsmk8'"),
        (["-b", f"gsm8k={GSM8K}:gsm8k", "--mode", "thinking"], "--mode thinking: mode: Input should be 'think' or"),
        (["-b", "gsm8k=missing.jsonl:gsm8k"], "eval.benchmarks[0] (gsm8k).data: data file not found"),
        (["-b", "gsm8k"], "--benchmark gsm8k: not a benchmark of the recipe"),
        ([], "name a benchmark: -b NAME=FILE[:FORMAT]"),
    ],
)
def test_bad_benchmark_settings_are_refused_before_a_model_loads(tmp_path, args, message):
    result = cascade("eval", tmp_path / "no-model-needed", *args, "--out", tmp_path / "eval")
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert not (tmp_path / "eval").exists()


def test_options_of_the_rows_own_domains_are_checked_before_sampling(tiny_checkpoint, tmp_path):
    recipe = tmp_path / "eval.yaml"
    bench = {"name": "gsm8k", "data": str(GSM8K), "format": "gsm8k", "options": {"languge_penalty": -1}}
    recipe.write_text(yaml.safe_dump({"name": "e", "eval": {"benchmarks": [bench]}}))
    result = cascade("eval", tiny_checkpoint, "--recipe", recipe, "--out", tmp_path / "eval")
    assert result.returncode == 2
    assert "benchmark gsm8k: options.languge_penalty: unknown option; math accepts" in result.stderr


def test_report_refuses_a_directory_that_is_not_a_run_and_writes_nothing(tmp_path):
    """`cascade report` on any directory exited 0 with "0 stage(s)" and wrote report files into it."""
    (tmp_path / "notes.txt").write_text("not a run")
    result = cascade("report", tmp_path)
    assert result.returncode == 2 and "not a run directory" in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_judge_given_on_the_command_line_stands_for_the_recipes(tmp_path):
    arena = tmp_path / "arena.jsonl"
    arena.write_text(json.dumps({"prompt": "Write a haiku."}) + "\n")
    recipe = tmp_path / "eval.yaml"
    bench = {"name": "arena", "data": str(arena), "kind": "arena", "judge": "${CASCADE_TEST_UNSET_JUDGE}"}
    recipe.write_text(yaml.safe_dump({"name": "e", "eval": {"benchmarks": [bench]}}))
    unset = cascade("eval", tmp_path / "no-model", "--recipe", recipe)
    assert unset.returncode == 2 and "CASCADE_TEST_UNSET_JUDGE" in unset.stderr
    given = cascade("eval", tmp_path / "no-model", "--recipe", recipe, "--judge", "http://127.0.0.1:9/v1#judge")
    assert "CASCADE_TEST_UNSET_JUDGE" not in given.stderr  # checked past the judge: the model is what is missing
    bad = cascade("eval", tmp_path / "no-model", "--recipe", recipe, "--judge", "judges/none")
    assert bad.returncode == 2 and "--judge: " in bad.stderr and "is neither a model directory" in bad.stderr
