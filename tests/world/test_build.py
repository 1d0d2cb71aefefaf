"""build_world: the files of the embedded default, byte-identical for a seed, train and test
splits disjoint (no shared prompt, no shared 9-gram), SFT and RL prompts disjoint, every
benchmark row scorable by its domain."""

import json
from dataclasses import replace

import pytest
from transformers import AutoTokenizer

from cascade_rl.rewards.registry import get_domain, missing_fields
from cascade_rl.text import words as _words
from cascade_rl.world import WorldManifest, WorldOptions, WorldSizes, build_world
from cascade_rl.world.build import BENCHMARKS, scaffolding
from cascade_rl.world.decontam import row_text
from tests.world.conftest import TOOL_CALL_DOMAIN

SMALL = WorldSizes(
    sft_general=20,
    sft_ifeval=20,
    sft_math=40,
    sft_code=20,
    sft_tool=10,
    sft_swe_repair=5,
    sft_swe_localization=3,
    sft_swe_testgen=2,
    rm_pairs=80,
    rl_rlhf=10,
    rl_ifrl=10,
    rl_math=20,
    rl_code=10,
    rl_swe=5,
    bench_arena=8,
    bench_ifeval=8,
    bench_math=8,
    bench_code=8,
    bench_swe=4,
    bench_tool=8,
    vocab_size=600,
)
TRAIN_FILES = (
    "sft.jsonl",
    "rm_pairs.jsonl",
    "rl_rlhf.jsonl",
    "rl_ifrl.jsonl",
    "rl_math.jsonl",
    "rl_code.jsonl",
    "rl_swe.jsonl",
)


def read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The default-size world (what `make demo` trains on)."""
    out = tmp_path_factory.mktemp("world")
    return build_world(out, seed=0)


def test_same_seed_gives_byte_identical_files(tmp_path):
    first = build_world(tmp_path / "a", seed=5, sizes=SMALL)
    build_world(tmp_path / "b", seed=5, sizes=SMALL)
    for name in list(first.sha256) + ["manifest.json", "tokenizer/tokenizer.json"]:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    other = build_world(tmp_path / "c", seed=6, sizes=SMALL)
    assert other.sha256["sft.jsonl"] != first.sha256["sft.jsonl"]


def test_manifest_lists_every_file_with_counts_and_hashes(world):
    loaded = WorldManifest.load(world.out_dir)
    assert loaded.rows == world.rows and loaded.sha256 == world.sha256
    for name, count in world.rows.items():
        assert len(read(world.out_dir / name)) == count
    sizes = world.sizes
    assert world.rows["rl_math.jsonl"] == sizes.rl_math and world.rows["bench_toy-swe.jsonl"] == sizes.bench_swe
    assert set(world.benchmarks) == set(BENCHMARKS)
    assert world.path("toy-math").exists()
    assert len(AutoTokenizer.from_pretrained(str(world.out_dir / "tokenizer"))) <= sizes.vocab_size


def _texts(rows, fixed):
    for row in rows:
        text = row_text(row)
        for piece in sorted(fixed, key=len, reverse=True):
            text = text.replace(piece, "\n")
        yield _words(text)


def test_train_and_test_share_no_prompt_and_no_nine_gram(world):
    fixed = scaffolding()
    test_rows = [row for info in world.benchmarks.values() for row in read(world.out_dir / info.file)]
    test_grams, test_short = set(), set()
    for words in _texts(test_rows, fixed):
        if len(words) >= 9:
            test_grams.update(tuple(words[i : i + 9]) for i in range(len(words) - 8))
        else:
            test_short.add(" ".join(words))
    test_prompts = {json.dumps(r["prompt"]) for r in test_rows}
    for name in TRAIN_FILES:
        rows = read(world.out_dir / name)
        for row, words in zip(rows, _texts(rows, fixed)):
            assert not any(tuple(words[i : i + 9]) in test_grams for i in range(len(words) - 8)), row["id"]
            joined = f" {' '.join(words)} "
            assert not any(f" {short} " in joined for short in test_short), row["id"]
            prompt = row.get("prompt") or [m for m in row["messages"] if m["role"] != "assistant"]
            assert json.dumps([{k: v for k, v in m.items() if k != "mode"} for m in prompt]) not in test_prompts


def test_sft_and_rl_prompts_are_strictly_disjoint(world):
    def user_turns(messages):
        return json.dumps([m["content"] for m in messages if m["role"] == "user"])

    sft = {user_turns(r["messages"]) for r in read(world.out_dir / "sft.jsonl")}
    for name in TRAIN_FILES[2:]:
        rl = [user_turns(r["prompt"]) for r in read(world.out_dir / name)]
        assert len(set(rl)) == len(rl), name
        assert not sft & set(rl), name


def test_sft_rows_cover_every_source_and_both_modes(world):
    rows = read(world.out_dir / "sft.jsonl")
    assert {r["source"] for r in rows} == {"general", "math", "code", "tool", "swe"}
    general = [r for r in rows if r["id"].startswith("general-")]
    assert {r["messages"][0]["mode"] for r in general} == {"think", "no_think"}
    assert all(r["tools"] for r in rows if r["source"] == "tool")


def test_every_rl_and_benchmark_row_is_scorable_by_its_domain(world):
    for name in TRAIN_FILES[2:] + tuple(info.file for info in world.benchmarks.values()):
        for row in read(world.out_dir / name):
            domain = get_domain(TOOL_CALL_DOMAIN if row["domain"] == "tool_call" else row["domain"])
            assert not missing_fields(domain, row), (name, row["id"])
            assert "mode" not in row["prompt"][-1]


def test_rlhf_prompts_come_from_the_reward_model_pairs(world):
    pair_prompts = {json.dumps(r["prompt"]) for r in read(world.out_dir / "rm_pairs.jsonl")}
    rlhf = read(world.out_dir / "rl_rlhf.jsonl")
    assert all(json.dumps(r["prompt"]) in pair_prompts for r in rlhf)
    assert {r["domain"] for r in rlhf} == {"preference"}


def test_unknown_size_field_is_an_error():
    with pytest.raises(ValueError, match="unknown WorldSizes field 'sft_maths'"):
        WorldSizes.from_overrides({"sft_maths": 3})
    with pytest.raises(ValueError, match="non-negative"):
        WorldSizes.from_overrides({"sft_math": -1})


def test_multi_domain_tasks_are_opt_in_and_held_apart(tmp_path):
    plain = build_world(tmp_path / "plain", seed=1, sizes=SMALL)
    assert not {"rl_workplace.jsonl", "rl_structured.jsonl"} & set(plain.rows)
    assert set(plain.benchmarks) == set(BENCHMARKS)
    assert not {"rl_mcqa.jsonl", "bench_toy-mcqa.jsonl"} & set(plain.rows)
    sizes = replace(SMALL, sft_workplace=12, sft_structured=10, rl_workplace=10, rl_structured=8,
                    bench_workplace=6, bench_structured=6, sft_mcqa=10, rl_mcqa=9, bench_mcqa=7)  # fmt: skip
    world = build_world(tmp_path / "multi", seed=1, sizes=sizes)
    assert world.rows["rl_workplace.jsonl"] == 10 and world.rows["rl_structured.jsonl"] == 8
    assert world.benchmarks["toy-workplace"].domain == "workplace" and world.benchmarks["toy-structured"].rows == 6
    assert world.rows["rl_mcqa.jsonl"] == 9 and world.benchmarks["toy-mcqa"].rows == 7
    for name in (
        "rl_workplace.jsonl",
        "rl_structured.jsonl",
        "bench_toy-workplace.jsonl",
        "bench_toy-structured.jsonl",
        "rl_mcqa.jsonl",
        "bench_toy-mcqa.jsonl",
    ):
        for row in read(world.out_dir / name):
            assert not missing_fields(get_domain(row["domain"]), row)
    requests = {
        name: {r["prompt"][-1]["content"] for r in read(world.out_dir / name)}
        for name in (
            "rl_workplace.jsonl",
            "bench_toy-workplace.jsonl",
            "rl_structured.jsonl",
            "bench_toy-structured.jsonl",
        )
    }
    sft = read(world.out_dir / "sft.jsonl")
    sft_requests = {m["content"] for r in sft for m in r["messages"] if m["role"] == "user"}
    assert not requests["rl_workplace.jsonl"] & requests["bench_toy-workplace.jsonl"]
    assert not requests["rl_structured.jsonl"] & requests["bench_toy-structured.jsonl"]
    assert not sft_requests & (requests["bench_toy-workplace.jsonl"] | requests["bench_toy-structured.jsonl"])
    assert not sft_requests & (requests["rl_workplace.jsonl"] | requests["rl_structured.jsonl"])
    assert sum(1 for r in sft if any(m["role"] == "tool" for m in r["messages"])) == 12


def test_the_mcqa_answer_option_changes_only_the_multiple_choice_sft_answers(tmp_path):
    sizes = replace(SMALL, sft_mcqa=10, rl_mcqa=9, bench_mcqa=7)
    letter = build_world(tmp_path / "letter", seed=1, sizes=sizes)
    check = build_world(tmp_path / "check", seed=1, sizes=sizes, options=WorldOptions(mcqa_answer="check"))
    for name in ("rl_mcqa.jsonl", "bench_toy-mcqa.jsonl"):
        assert read(letter.out_dir / name) == read(check.out_dir / name)
    letter_rows, check_rows = ({r["id"]: r for r in read(w.out_dir / "sft.jsonl")} for w in (letter, check))
    assert letter_rows.keys() == check_rows.keys()
    mcqa = [row_id for row_id in letter_rows if row_id.startswith("mcqa-")]
    assert len(mcqa) == 10
    for row_id, row in letter_rows.items():
        if row_id not in mcqa:
            assert check_rows[row_id] == row
            continue
        bare = row["messages"][-1]["content"]
        assert bare.startswith("\\boxed{") and check_rows[row_id]["messages"][-1]["content"].endswith(f"yes\n{bare}")


def test_every_office_set_teaches_and_asks_each_kind_of_request_at_the_recipes_sizes():
    """At recipes/tiny-multi-domain.yaml's sizes (128 benchmark, 160 RL, 256 SFT tasks), each set
    holds the four kinds of request in equal shares and no request is in two sets. (With six task
    and six customer names, the benchmark took every delete request: SFT and RL had none.)"""
    from collections import Counter

    from cascade_rl.world.build import _office_rows
    from cascade_rl.world.office import KINDS

    sizes = WorldSizes(bench_workplace=128, rl_workplace=160, sft_workplace=256)
    sets = _office_rows(0, sizes, WorldOptions())
    kinds = {name: Counter(r.get("kind") for r in rows) for name, rows in sets.items() if name != "sft"}
    kinds["sft"] = Counter(r["messages"][1]["tool_calls"][0]["function"]["name"] for r in sets["sft"])
    assert kinds["bench"] == {kind: 32 for kind in KINDS} and kinds["rl"] == {kind: 40 for kind in KINDS}
    assert sorted(kinds["sft"].values()) == [64] * 4  # one look-up tool per kind
    requests = [{r["prompt"][0]["content"] for r in sets["bench"]}, {r["prompt"][0]["content"] for r in sets["rl"]},
                {r["messages"][0]["content"] for r in sets["sft"]}]  # fmt: skip
    assert sum(map(len, requests)) == len(set().union(*requests)) == 544


def test_multi_domain_near_misses_are_a_share_of_sft_and_their_fixed_phrases_are_scaffolding(tmp_path):
    from cascade_rl.rewards.mcqa import score as mcqa_score
    from cascade_rl.world.choice import SCAFFOLDING as CHOICE_PHRASES
    from cascade_rl.world.structured import SCAFFOLDING as STRUCTURED_PHRASES

    sizes = replace(SMALL, sft_workplace=40, sft_mcqa=60, rl_mcqa=8, bench_mcqa=8, bench_workplace=4)
    options = WorldOptions(sft_near_miss=0.5, near_miss_domains=("mcqa", "workplace"))
    world = build_world(tmp_path / "w", seed=2, sizes=sizes, options=options)
    sft = read(world.out_dir / "sft.jsonl")
    office = [r for r in sft if any(m["role"] == "tool" for m in r["messages"])]
    calls = [sum(len(m.get("tool_calls") or ()) for m in r["messages"]) for r in office]
    look_ups_only = sum(count == 1 for count in calls)  # every office task needs a look-up and a write
    assert len(office) == 40 and 8 <= look_ups_only <= 32 and min(calls) == 1 and max(calls) >= 2
    choice_answers = [r["messages"][-1]["content"] for r in sft if "\nWhere does " in r["messages"][0]["content"]]
    unboxed = [a for a in choice_answers if "\\boxed{" not in a]
    assert len(choice_answers) >= 60 and 15 <= len(unboxed) <= 45 and all(a.startswith("Answer: ") for a in unboxed)
    # the RL prompts and benchmarks keep their gold references: a boxed letter scores 1 on each
    for row in read(world.out_dir / "bench_toy-mcqa.jsonl") + read(world.out_dir / "rl_mcqa.jsonl"):
        reference = {"options": row["options"], "expected_answer": row["expected_answer"]}
        assert mcqa_score(f"\\boxed{{{row['expected_answer']}}}", **reference).reward == 1.0
    fixed = scaffolding()
    assert set(CHOICE_PHRASES) | set(STRUCTURED_PHRASES) <= set(fixed)
    # not named, the families stay gold at the same share: the near misses are opt-in per domain
    plain = build_world(tmp_path / "plain", seed=2, sizes=sizes, options=WorldOptions(sft_near_miss=0.5))
    plain_sft = read(plain.out_dir / "sft.jsonl")
    assert all(sum(len(m.get("tool_calls") or ()) for m in r["messages"]) >= 2 for r in plain_sft
               if any(m["role"] == "tool" for m in r["messages"]))  # fmt: skip
    assert not any(r["messages"][-1]["content"].startswith("Answer: ") for r in plain_sft)
