"""SWE data building from pipeline traces (swe/data.py, `cascade swe build-data`)."""

import json

import pytest
from swe_assets import INTERVALS_FIX, SHAPES_FIX, TEXTKIT_FIX

from cascade_rl.chat import with_mode
from cascade_rl.data.loading import LoadReport
from cascade_rl.rewards.registry import get_domain, score_batch
from cascade_rl.swe.data import DataConfig, build_data, load_tokenizer, prompt_counter
from cascade_rl.train.rl_data import RLData, drop_long_prompts

LIMIT = 100_000
SMALL = DataConfig(min_prompt_tokens=100, context_limits=(LIMIT,))


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
    rows = [json.loads(line) for line in (tmp_path / f"context-{LIMIT}.jsonl").read_text().splitlines()]
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
    assert report.rl_counts[LIMIT] == {"ground_truth": 1, "mixed": 1}
    assert all(row["context_limit"] == LIMIT for row in rows)


# ---- the context curriculum on a repository of eight modules, counted by a real tokenizer ----

HUGE = 1_000_000


@pytest.fixture(scope="module")
def tokenizer(smollm2_tiny):
    return load_tokenizer(smollm2_tiny)


def _shapes(shapes_run, output, tokenizer, **settings):
    config = DataConfig(**{"min_prompt_tokens": 1, "context_limits": (HUGE,), **settings})
    report = build_data(
        shapes_run["traces"],
        shapes_run["rows"],
        shapes_run["checkouts"],
        output,
        config=config,
        count_tokens=prompt_counter(tokenizer),
    )
    return report


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _mixed_tokens(shapes_run, tmp_path, tokenizer, files):
    """Tokens of the mixed prompt of ``files`` files (the gold file and the first noise files)."""
    report = _shapes(shapes_run, tmp_path / f"measure-{files}", tokenizer, max_files=files)
    (mixed,) = [row for row in report.rl[HUGE] if row["form"] == "mixed"]
    assert len(mixed["files"]) == files
    return mixed["tokens"]


def test_one_set_per_context_limit_built_for_that_limit(shapes_run, tokenizer, tmp_path):
    two, three = (_mixed_tokens(shapes_run, tmp_path, tokenizer, n) for n in (2, 3))
    small = (two + three) // 2  # room for the gold file and one noise file, not two
    report = _shapes(shapes_run, tmp_path / "data", tokenizer, context_limits=(small, HUGE))
    at_small, at_huge = (
        _lines(tmp_path / "data" / f"context-{small}.jsonl"),
        _lines(tmp_path / "data" / f"context-{HUGE}.jsonl"),
    )
    assert [r["form"] for r in at_small] == [r["form"] for r in at_huge] == ["ground_truth", "mixed"]
    # the warm-up set holds mixed prompts built for its own limit, not the long set filtered
    assert len(at_small[1]["files"]) == 2 and at_small[1]["tokens"] == two <= small
    # the long set: noise files one by one, capped at five files though eight modules would fit
    ranking = [p for p in shapes_run["traces"][0]["localization"]["fusion"] if p != "shapes/area.py"]
    assert len(ranking) >= 7 and len(at_huge[1]["files"]) == 5
    assert set(at_huge[1]["files"]) == {"shapes/area.py", *ranking[:4]}
    assert set(at_small[1]["files"]) == {"shapes/area.py", ranking[0]}
    for row in at_small + at_huge:
        assert "shapes/area.py" in row["files"] and row["context_limit"] in (small, HUGE)
        assert row["tokens"] <= row["context_limit"]
    assert report.rl_counts[small] == report.rl_counts[HUGE] == {"ground_truth": 1, "mixed": 1}
    summary = json.loads((tmp_path / "data" / "summary.json").read_text())
    assert summary["rl"][str(small)] == {"file": f"context-{small}.jsonl", "rows": 2, "ground_truth": 1, "mixed": 1}
    # rows are valid RL rows of the swe reward
    rewards = score_batch(get_domain("swe"), [{**row, "response": SHAPES_FIX} for row in at_small + at_huge])
    assert [s.reward for s in rewards] == [1.0] * 4


def test_lengths_are_the_trainers_count(shapes_run, tokenizer, tmp_path):
    """The trainer's input-context filter (train/rl_data.drop_long_prompts) keeps every row of a
    set at its limit and drops a row one token over its limit."""
    report = _shapes(shapes_run, tmp_path, tokenizer)
    rows = report.rl[HUGE]
    data = RLData(
        [{"prompt": with_mode(row["prompt"], "think"), "_pidx": i, "_mode": "think"} for i, row in enumerate(rows)],
        len(rows),
        LoadReport(read=len(rows), kept=len(rows)),
    )
    longest = max(row["tokens"] for row in rows)
    assert drop_long_prompts(data, tokenizer, longest).prompts == [0, 1]
    kept = drop_long_prompts(data, tokenizer, longest - 1)
    assert kept.prompts == [i for i, row in enumerate(rows) if row["tokens"] < longest]
    assert kept.report.skipped[f"prompt longer than {longest - 1} tokens"] == 1


def test_no_copy_of_the_ground_truth_row_when_no_noise_file_fits(shapes_run, tokenizer, tmp_path):
    two = _mixed_tokens(shapes_run, tmp_path, tokenizer, 2)
    report = _shapes(shapes_run, tmp_path / "data", tokenizer, context_limits=(two - 1,))
    rows = report.rl[two - 1]
    assert [r["form"] for r in rows] == ["ground_truth"]
    assert report.rl_counts[two - 1]["dropped: mixed, no noise file fits"] == 1
    # one file at most: the gold file alone, no mixed row either
    capped = _shapes(shapes_run, tmp_path / "capped", tokenizer, max_files=1)
    assert [r["form"] for r in capped.rl[HUGE]] == ["ground_truth"]


def test_long_and_short_prompts_are_dropped(shapes_run, tokenizer, tmp_path):
    full = _shapes(shapes_run, tmp_path / "full", tokenizer)
    ground_truth, mixed = full.rl[HUGE]
    # gold files alone over the limit: the instance is left out of that set
    over = _shapes(shapes_run, tmp_path / "over", tokenizer, context_limits=(ground_truth["tokens"] - 1, HUGE))
    assert over.rl[ground_truth["tokens"] - 1] == [] and len(over.rl[HUGE]) == 2
    assert over.rl_counts[ground_truth["tokens"] - 1] == {"dropped: gold files alone exceed the limit": 1}
    # too short: under min_prompt_tokens, each subset on its own
    short = _shapes(shapes_run, tmp_path / "short", tokenizer, min_prompt_tokens=ground_truth["tokens"] + 1)
    assert [r["form"] for r in short.rl[HUGE]] == ["mixed"]
    assert short.rl_counts[HUGE][f"dropped: ground_truth, shorter than {ground_truth['tokens'] + 1} tokens"] == 1


def test_the_short_prompt_threshold_scales_with_the_limits():
    assert DataConfig().context_limits == (16_384, 24_576) and DataConfig().min_tokens == 8_192  # the paper's 8K
    assert DataConfig(context_limits=(2048, 1024)).min_tokens == 512
    assert DataConfig(context_limits=(1024,), min_prompt_tokens=100).min_tokens == 100
    with pytest.raises(ValueError, match="no room under the smallest context limit 1024"):
        DataConfig(context_limits=(1024, 4096), min_prompt_tokens=1024)
    with pytest.raises(ValueError, match="positive"):
        DataConfig(context_limits=())


def test_file_order_is_shuffled_per_instance(shapes_run, tokenizer, tmp_path):
    orders = {
        tuple(_shapes(shapes_run, tmp_path / f"s{seed}", tokenizer, seed=seed).rl[HUGE][1]["files"])
        for seed in range(4)
    }
    assert len(orders) > 1 and all(len(order) == 5 for order in orders)
