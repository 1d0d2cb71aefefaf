"""The judge-row family of the toy world (world/judge.py): opt-in, both orders of each preference
pair, the prompt the ``genrm`` scorer sends and the answer its parser reads."""

import json
from dataclasses import replace

import pytest

from cascade_rl.rewards.genrm import Comparison, aggregate, judge_messages, parse_judgement
from cascade_rl.world import WorldSizes, build_world
from cascade_rl.world.judge import JUDGE_TEMPLATE, judge_rows, verdict
from tests.world.test_build import SMALL


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def worlds(tmp_path_factory):
    root = tmp_path_factory.mktemp("judge-world")
    plain = build_world(root / "plain", seed=3, sizes=SMALL)
    judged = build_world(root / "judged", seed=3, sizes=replace(SMALL, sft_judge=30))
    return plain, judged


def test_judge_rows_are_opt_in_and_change_no_other_file(worlds):
    plain, judged = worlds
    assert "sft_judge.jsonl" not in plain.rows and not (plain.out_dir / "sft_judge.jsonl").exists()
    assert judged.rows["sft_judge.jsonl"] == 60  # both orders of 30 pairs
    others = {name: sha for name, sha in judged.sha256.items() if name != "sft_judge.jsonl"}
    assert others == plain.sha256  # every other file, byte for byte
    tokenizers = [(w.out_dir / "tokenizer" / "tokenizer.json").read_bytes() for w in worlds]
    assert tokenizers[0] == tokenizers[1]


def test_each_pair_is_judged_in_both_orders_the_gold_answer_always_the_better(worlds):
    _, judged = worlds
    pairs = read(judged.out_dir / "rm_pairs.jsonl")[:30]
    rows = read(judged.out_dir / "sft_judge.jsonl")
    assert len(rows) == 2 * len(pairs)
    for pair, first, second in zip(pairs, rows[::2], rows[1::2]):
        chosen, rejected = pair["chosen"][0]["content"], pair["rejected"][0]["content"]
        expected = [judge_messages(pair["prompt"], a, b, prompt=JUDGE_TEMPLATE, principle=None)[0]["content"]
                    for a, b in ((chosen, rejected), (rejected, chosen))]  # fmt: skip
        assert [first["messages"][0]["content"], second["messages"][0]["content"]] == expected
        (s1, s2, r1), (t1, t2, r2) = (parse_judgement(row["messages"][1]["content"]) for row in (first, second))
        assert s1 == t2 == 5 and s2 == t1 < 5 and r1 <= 3 < r2 and r1 + r2 == 7
        means = aggregate([Comparison(0, 1, s1, s2, r1), Comparison(1, 0, t1, t2, r2)], 2)
        assert means[0] > means[1]  # the gold answer wins the pair under NVIDIA's aggregation


def test_the_judge_reads_the_request_without_the_policys_thinking_flag():
    pair = {"id": "rm-00000-off_topic", "prompt": [{"role": "user", "content": "Tell me about owls."}],
            "chosen": [{"role": "assistant", "content": "Owls hunt at night."}],
            "rejected": [{"role": "assistant", "content": "Bees make honey."}]}  # fmt: skip
    (row, _) = judge_rows([pair])
    for flagged in ("Tell me about owls. /think", "Tell me about owls. /no_think"):
        sent = judge_messages([{"role": "user", "content": flagged}], "Owls hunt at night.", "Bees make honey.",
                              prompt=JUDGE_TEMPLATE, principle=None)  # fmt: skip
        assert sent == [row["messages"][0]]
    assert row["messages"][0]["content"].endswith(" /no_think")  # the judge answers without thinking


@pytest.mark.parametrize(
    ("scores", "ranking"), [((5, 1), 1), ((5, 2), 1), ((5, 3), 2), ((4, 3), 3), ((3, 4), 4), ((3, 5), 5), ((1, 5), 6)]
)
def test_the_ranking_follows_the_score_gap(scores, ranking):
    assert json.loads(verdict(*scores)) == {"score_1": scores[0], "score_2": scores[1], "ranking": ranking}


def test_bad_sizes_and_unknown_rejected_kinds_are_refused():
    with pytest.raises(ValueError, match="sft_judge"):
        WorldSizes.from_overrides({"rm_pairs": 10, "sft_judge": 11})
    with pytest.raises(ValueError, match="unknown rejected kind 'rude'"):
        judge_rows(
            [{"id": "rm-00000-rude", "prompt": [], "chosen": [{"content": "a"}], "rejected": [{"content": "b"}]}]
        )


def test_the_cascade2_recipe_asks_its_judge_with_the_template_the_rows_were_written_with():
    from pathlib import Path

    from cascade_rl.recipe import load_recipe

    recipe = load_recipe(Path(__file__).resolve().parents[2] / "recipes" / "tiny-cascade2.yaml")
    judged = [stage for stage in recipe.stages if getattr(stage, "domain", None) == "genrm"]
    assert [stage.name for stage in judged] == ["rlhf_teacher", "rlhf"]  # MOPD's chat teacher, and RLHF
    assert all(stage.reward_options["genrm"]["prompt"] == JUDGE_TEMPLATE for stage in judged)
    assert recipe.world.sizes["sft_judge"] > 0
    sft = recipe.stages[0].substages[0]
    assert any(source.path.endswith("sft_judge.jsonl") for source in sft.data)
