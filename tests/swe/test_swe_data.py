"""SWE data building from pipeline traces (swe/data.py, `cascade swe build-data`)."""

import json

from conftest import INTERVALS_FIX, TEXTKIT_FIX

from cascade_rl.rewards.registry import get_domain, score_batch
from cascade_rl.swe.data import DataConfig, build_data

SMALL = DataConfig(min_prompt_tokens=100, max_prompt_tokens=100_000)


def _build(evaluated_run, output, config=SMALL):
    return build_data(
        evaluated_run["report"].traces, evaluated_run["rows"], evaluated_run["checkouts"], output, config=config
    )


def test_sft_rows_by_kind(evaluated_run, tmp_path):
    report = _build(evaluated_run, tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert len(rows) == len(report.sft)
    by_kind = {}
    for row in rows:
        by_kind.setdefault((row["instance_id"].split("__")[1], row["task"]), []).append(row)
        assert row["source"] == "swe" and row["messages"][-1]["role"] == "assistant"
    # localisation at recall 1: both textkit and intervals rollouts list the gold file, the
    # inventory rollouts miss cart.py
    assert len(by_kind[("textkit-1", "localization")]) == 2
    assert len(by_kind[("intervals-1", "localization")]) == 2
    assert ("inventory-1", "localization") not in by_kind
    # repair SFT: textkit has 4 exact fixes and 2 near fixes (similarity 0.92) of 8 samples
    repair = by_kind[("textkit-1", "repair")]
    assert len(repair) == 6 and {r["messages"][-1]["content"] for r in repair} >= {TEXTKIT_FIX}
    assert repair[0]["messages"][0]["content"].startswith("We are currently solving the following issue")
    # test generation: tests that parsed and ran (the unparseable one is dropped)
    assert len(by_kind[("textkit-1", "test_generation")]) == 1
    assert len(by_kind[("intervals-1", "test_generation")]) == 2
    assert report.counts["repair"] == 6
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["dropped"] == {"fixtures__inventory-1": "hopeless: no sample with non-zero similarity"}


def test_rl_prompts_in_two_forms(evaluated_run, tmp_path):
    report = _build(evaluated_run, tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "rl.jsonl").read_text().splitlines()]
    # only intervals is hard but not hopeless: 2 of 8 samples above 0.5
    assert {r["id"] for r in rows} == {"fixtures__intervals-1:ground_truth", "fixtures__intervals-1:mixed"}
    ground_truth, mixed = sorted(rows, key=lambda r: r["form"] != "ground_truth")
    assert list(ground_truth["files"]) == ["intervals/merge.py"]
    # every source file of the fixture (4; its tests are never localised, so never distractors)
    assert len(mixed["files"]) == 4 and "intervals/merge.py" in mixed["files"]
    assert mixed["tokens"] > ground_truth["tokens"]
    for row in rows:
        assert row["domain"] == "swe" and row["golden_patch"] == evaluated_run["rows"][1]["patch"]
        for path in row["files"]:
            assert f"### {path}\n" in row["prompt"][0]["content"]
    # the rows are valid RL rows: the reward scores the golden fix 1 on both forms
    rewards = score_batch(get_domain("swe"), [{**row, "response": INTERVALS_FIX} for row in rows])
    assert [s.reward for s in rewards] == [1.0, 1.0]
    assert report.counts["rl_ground_truth"] == report.counts["rl_mixed"] == 1


def test_mixed_prompts_stop_before_the_limit_and_are_shuffled(evaluated_run, tmp_path):
    full = _build(evaluated_run, tmp_path / "full")
    ground_truth = next(r for r in full.rl if r["form"] == "ground_truth")
    limit = ground_truth["tokens"] + 60  # room for the gold file and very little else
    tight = _build(evaluated_run, tmp_path / "tight", DataConfig(min_prompt_tokens=100, max_prompt_tokens=limit))
    mixed = next(r for r in tight.rl if r["form"] == "mixed")
    assert "intervals/merge.py" in mixed["files"] and len(mixed["files"]) < 5
    assert mixed["tokens"] <= limit
    # gold files alone over the limit: both forms dropped
    none = _build(evaluated_run, tmp_path / "none", DataConfig(min_prompt_tokens=1, max_prompt_tokens=50))
    assert none.rl == [] and none.counts["rl_ground_truth_dropped_length"] == 1
    # too short (the paper drops prompts under 8K tokens): dropped
    short = _build(evaluated_run, tmp_path / "short", DataConfig())
    assert short.rl == [] and short.counts["rl_mixed_dropped_length"] == 1
    orders = {
        tuple(
            next(
                r
                for r in _build(
                    evaluated_run,
                    tmp_path / f"s{seed}",
                    DataConfig(min_prompt_tokens=100, max_prompt_tokens=100_000, seed=seed),
                ).rl
                if r["form"] == "mixed"
            )["files"]
        )
        for seed in range(4)
    }
    assert len(orders) > 1
