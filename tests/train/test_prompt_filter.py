"""The hard-but-not-hopeless prompt filter of a GRPO stage (SPEC section 6, SWE RL): verdicts by
hand, a stage that trains only the kept prompts with the same verdicts in 1 and 2 processes, and a
filter that keeps nothing stopping the stage before it trains, naming the field."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from child_env import child_environment

from cascade_rl.recipe import PromptFilter, RecipeError
from cascade_rl.train.context import StageContext
from cascade_rl.train.prompt_filter import verdict

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("rewards", "expected"),
    [
        ([1, 1, 1, 1, -1, -1, -1, -1], "too easy"),  # 4 of 8 above 0.5: the paper drops it
        ([1, 1, 1, -1, -1, -1, -1, -1], "keep"),  # 3 of 8
        ([0.6, 0.7, 0.9, 0.0, -1, -1, -1, -1], "keep"),  # similarity above 0.5 counts as solved
        ([0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], "keep"),  # exactly 0.5 is not above it
        ([-1] * 8, "hopeless"),
        ([0, 0, -1, -1, -1, -1, -1, -1], "hopeless"),  # no-op edits (0) are not above zero
        ([0.1, -1, -1, -1, -1, -1, -1, -1], "keep"),
    ],
)
def test_verdicts_follow_the_paper_s_swe_rule(rewards, expected):
    assert verdict(rewards, PromptFilter()) == expected


def test_hopeless_prompts_stay_when_asked_and_the_easy_share_is_an_option():
    assert verdict([-1] * 8, PromptFilter(drop_hopeless=False)) == "keep"
    assert verdict([1, 1, -1, -1], PromptFilter(drop_solved_at_or_above=0.75)) == "keep"
    assert verdict([1, 1, 1, -1], PromptFilter(drop_solved_at_or_above=0.75)) == "too easy"
    exact_fixes_only = PromptFilter(solved_above=0.99, hopeless_at_or_below=0.99)  # keep 1-3 exact fixes of 8
    assert verdict([0.9] * 8, exact_fixes_only) == "hopeless"
    assert verdict([1.0, 0.9, 0.9, 0.9, -1, -1, -1, -1], exact_fixes_only) == "keep"
    assert verdict([1.0] * 4 + [-1] * 4, exact_fixes_only) == "too easy"


ANSWERS = [3, 4, 5, 6, 7, 8, 9, 10, 11]  # by answer % 3: too easy, hopeless, kept (tiny_assets.answer_band)
EXPECTED = ["too easy", "hopeless", "keep"] * 3


def stage_recipe(folder: Path, tiny_checkpoint: Path, answers=ANSWERS) -> Path:
    rows = [{"prompt": f"what is {a - 1} plus 1?", "answer": str(a)} for a in answers]
    data = folder / "rl.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    recipe = {
        "name": "pf",
        "seed": 0,
        "model": {"path": str(tiny_checkpoint)},
        "runtime": {"torch_threads": 1, "reward_workers": 1},
        "stages": [
            {
                "kind": "grpo",
                "name": "toy",
                "data": str(data),
                "domain": "tiny_assets:answer_band",
                "rollouts_per_prompt": 2,
                "prompts_per_batch": 2,
                "per_device_batch_size": 2,
                "learning_rate": 0.01,
                "prompt_filter": {"samples": 4},
                "curriculum": [{"max_response_length": 4, "max_steps": 3}],
            }
        ],
    }
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def run(recipe: Path, out: Path, processes: int) -> subprocess.CompletedProcess:
    cli = ["-m", "cascade_rl.cli", "run", str(recipe), "--out", str(out)]
    if processes == 1:
        command = [sys.executable, *cli]
    else:
        launcher = Path(sys.executable).with_name("torchrun")
        port = str(28500 + os.getpid() % 1000)
        command = [str(launcher), "--nproc_per_node", str(processes), "--master_port", port, *cli]
    return subprocess.run(command, capture_output=True, text=True, timeout=900, env=child_environment())


@pytest.mark.parametrize("processes", [1, 2])
def test_the_stage_trains_only_the_prompts_that_are_hard_but_not_hopeless(processes, tiny_checkpoint, tmp_path):
    out = tmp_path / "run"
    result = run(stage_recipe(tmp_path, tiny_checkpoint), out, processes)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "prompt filter kept 3 of 9 prompts (too easy 3, hopeless 3)" in result.stdout

    stage_dir = out / "01-toy"
    report = json.loads((stage_dir / "prompt_filter.json").read_text())
    assert report["verdicts"] == EXPECTED
    assert [len(rewards) for rewards in report["rewards"]] == [4] * 9
    assert len((stage_dir / "prompt_filter.progress.jsonl").read_text().splitlines()) == 9  # one writer
    draws = [json.loads(line) for line in (stage_dir / "substage-1" / "draws.jsonl").read_text().splitlines()]
    assert len(draws) == 3
    trained = {prompt for draw in draws for prompt in draw["prompts"]}
    assert trained <= {0, 1, 2} and len(trained) == 3  # the three kept prompts, nothing else
    metrics = [json.loads(line) for line in (stage_dir / "metrics.jsonl").read_text().splitlines()]
    assert [round(m["reward/mean"], 6) for m in metrics] == [0.3] * 3  # only kept prompts were scored


def test_a_filter_that_keeps_nothing_stops_before_training_and_names_the_field(tiny_checkpoint, tmp_path):
    from cascade_rl.recipe import load_recipe
    from cascade_rl.train.grpo import run_grpo_stage

    recipe = load_recipe(stage_recipe(tmp_path, tiny_checkpoint, answers=[3, 6, 9]))
    stage_dir = tmp_path / "stage"
    with pytest.raises(RecipeError, match=r"stages \(toy\).prompt_filter dropped every one of the 3 prompts"):
        run_grpo_stage(
            recipe.stages[0],
            StageContext.settle(policy=tiny_checkpoint, stage_dir=stage_dir, runtime=recipe.runtime, seed=0),
        )
    assert json.loads((stage_dir / "prompt_filter.json").read_text())["too easy"] == 3
    assert not (stage_dir / "substage-1").exists()  # nothing trained


def test_an_interrupted_filter_resumes_without_sampling_again(tiny_checkpoint, tmp_path):
    """A run killed after sampling (the verdicts not yet written) measures from the samples it kept."""
    from cascade_rl.recipe import load_recipe
    from cascade_rl.train.prompt_filter import PROGRESS_FILE, RESULT_FILE, kept_prompts
    from cascade_rl.train.rl_data import load_rl_prompts

    stage = load_recipe(stage_recipe(tmp_path, tiny_checkpoint)).stages[0]
    prompts, _ = load_rl_prompts(stage, seed=0)
    stage_dir = tmp_path / "stage"

    def measure() -> list[int]:
        return kept_prompts(stage, prompts, model=tiny_checkpoint, stage_dir=stage_dir, seed=0, reward_options={})

    assert measure() == [2, 5, 8]
    progress = (stage_dir / PROGRESS_FILE).read_text()
    lines = progress.splitlines()
    (stage_dir / RESULT_FILE).unlink()  # as if killed before the verdicts were written
    (stage_dir / PROGRESS_FILE).write_text("\n".join(lines[:5]) + "\n" + lines[5][:20])  # and mid-line
    assert measure() == [2, 5, 8]
    resumed = (stage_dir / PROGRESS_FILE).read_text().splitlines()
    assert resumed[:5] == lines[:5] and len(resumed) == 9  # 4 prompts sampled again, the cut line dropped
    assert sorted(json.loads(line)["index"] for line in resumed) == list(range(9))


def test_a_filter_limited_to_some_domains_keeps_the_other_prompts_unsampled(tiny_checkpoint, tmp_path):
    """A joint stage filters only the domains its cascade stages filtered."""
    from cascade_rl.recipe import load_recipe
    from cascade_rl.train.grpo import run_grpo_stage

    recipe_file = stage_recipe(tmp_path, tiny_checkpoint)
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps({"prompt": f"say {a}", "answer": str(a)}) + "\n" for a in (3, 6)))
    data = yaml.safe_load(recipe_file.read_text())
    stage = data["stages"][0]
    stage["data"] = [{"path": stage["data"]}, {"path": str(other), "domain": "tiny_assets:contains_answer"}]
    stage["prompt_filter"]["domains"] = ["tiny_assets:answer_band"]
    recipe_file.write_text(yaml.safe_dump(data))
    recipe = load_recipe(recipe_file)
    stage_dir = tmp_path / "stage"
    run_grpo_stage(
        recipe.stages[0],
        StageContext.settle(policy=tiny_checkpoint, stage_dir=stage_dir, runtime=recipe.runtime, seed=0),
    )
    report = json.loads((stage_dir / "prompt_filter.json").read_text())
    assert report["verdicts"] == [*EXPECTED, "keep", "keep"]  # the two prompts of the other domain stay
    assert report["measured"] == 9 and report["rewards"][9:] == [None, None]
    assert len((stage_dir / "prompt_filter.progress.jsonl").read_text().splitlines()) == 9  # never sampled


def test_the_filter_samples_with_the_stage_s_top_k(tiny_checkpoint, tmp_path):
    """The verdicts are about the rollouts' distribution: a stage's top-k reaches the filter's
    samples (top-k 1 at temperature 1 draws one answer per prompt; without it they differ)."""
    from cascade_rl.recipe import load_recipe
    from cascade_rl.train.prompt_filter import PROGRESS_FILE, kept_prompts
    from cascade_rl.train.rl_data import load_rl_prompts

    def filter_samples(top_k: int | None) -> list[list[str]]:
        data = yaml.safe_load(stage_recipe(tmp_path, tiny_checkpoint).read_text())
        data["stages"][0] |= {"temperature": 1.0, "top_p": 1.0, "top_k": top_k}
        (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(data))
        stage = load_recipe(tmp_path / "recipe.yaml").stages[0]
        prompts, _ = load_rl_prompts(stage, seed=0)
        stage_dir = tmp_path / f"stage-{top_k}"
        kept_prompts(stage, prompts, model=tiny_checkpoint, stage_dir=stage_dir, seed=0, reward_options={})
        lines = (stage_dir / PROGRESS_FILE).read_text().splitlines()
        return [json.loads(line)["samples"] for line in lines]

    assert any(len(set(samples)) > 1 for samples in filter_samples(None))
    assert all(len(set(samples)) == 1 for samples in filter_samples(1))
