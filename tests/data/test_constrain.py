"""`cascade data constrain`: IF-RL rows from real texts -- deterministic draws, no conflicting
instructions, a constructed answer that scores 1.0 for every row, the bare answer failing what it
breaks, and decontamination on the request rather than on the shared constraint templates."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cascade_rl.cli import app
from cascade_rl.data import constrain as c
from cascade_rl.data.commands import decontaminate_files
from cascade_rl.data.loading import rl_normaliser
from cascade_rl.rewards.ifeval import IFEVAL_IDS, build_description, check, score

#: word problems and programming tasks written for these tests (GSM8K / MBPP-like shapes)
QUESTIONS = [
    (
        "Maria bakes 24 muffins for a school fair, and she sells three quarters of them in the morning. "
        "How many muffins are left for the afternoon?",
        "Maria sells 24 * 3/4 = 18 muffins, so 24 - 18 = 6 muffins are left.\n#### 6",
    ),
    (
        "A train travels 60 miles in the first hour and 45 miles in the second hour. How far does it travel in total?",
        "The train travels 60 + 45 = 105 miles.\n#### 105",
    ),
    (
        "Tom has 3 boxes with 12 pencils each. He gives 10 pencils to his sister. How many pencils does he keep?",
        "Tom has 3 * 12 = 36 pencils and keeps 36 - 10 = 26.\n#### 26",
    ),
    (
        "A garden has 8 rows of tomato plants with 7 plants in each row, and a gardener removes 5 sick plants. "
        "How many tomato plants remain?",
        "There are 8 * 7 = 56 plants, and 56 - 5 = 51 remain.\n#### 51",
    ),
    (
        "Lena reads 15 pages of her novel every evening. How many pages does she read in two weeks?",
        "Two weeks are 14 evenings, so she reads 15 * 14 = 210 pages.\n#### 210",
    ),
    (
        "A bakery sells cookies for 2 dollars each, and Sam buys 9 cookies with a 20 dollar bill. "
        "How much change does he get?",
        "The cookies cost 9 * 2 = 18 dollars, so the change is 20 - 18 = 2 dollars.\n#### 2",
    ),
]
TASKS = [
    "Write a function to count the vowels in a given string.",
    "Write a python function to find the largest element of a list of numbers.",
    "Write a function to merge two sorted lists into one sorted list.",
]
POOL = c.instruction_pool(["ifeval", "iftrain"])


def write(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def drawn_rows(seeds=range(12), counts=(1, 3)):
    texts = [q for q, _ in QUESTIONS] + TASKS
    for seed in seeds:
        for index, text in enumerate(texts):
            drawn = c.draw_row(text, random.Random(f"{seed}:{index}"), POOL, counts)
            assert drawn is not None
            yield text, drawn


def run(*args):
    return CliRunner().invoke(app, ["data", *map(str, args)], env={"COLUMNS": "250"})


def test_the_same_seed_builds_the_same_rows_and_a_row_does_not_depend_on_the_others(tmp_path):
    source = write(tmp_path / "train.jsonl", [{"question": q, "answer": a} for q, a in QUESTIONS])
    first, again, other = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    c.constrain_files([source], first, families=["ifeval", "iftrain"], seed=3, prefix="q", progress=False)
    moved = write(tmp_path / "elsewhere" / "train.jsonl", [{"question": q, "answer": a} for q, a in QUESTIONS])
    c.constrain_files([moved], again, families=["ifeval", "iftrain"], seed=3, prefix="q", progress=False)
    c.constrain_files([source], other, families=["ifeval", "iftrain"], seed=4, progress=False)
    assert first.read_text() == again.read_text()
    assert first.read_text() != other.read_text()
    limited = tmp_path / "limited.jsonl"
    c.constrain_files([source], limited, families=["ifeval", "iftrain"], seed=3, limit=2, prefix="q", progress=False)
    assert lines(limited) == lines(first)[:2]
    assert [r["id"] for r in lines(first)] == [f"q-{i}-if" for i in range(1, len(QUESTIONS) + 1)]
    assert c.id_prefix("data/gsm8k/train.jsonl") == "gsm8k-train" and c.id_prefix("mbpp/mbpp.jsonl") == "mbpp"


def test_conflicting_instructions_are_never_drawn_together():
    rng = random.Random(0)
    for _ in range(2000):
        ids = c.draw_ids(rng, c.draw_count(rng, 1, 5), POOL)
        assert len(set(ids)) == len(ids)
        assert all(c.compatible(a, b) for a, b in itertools.combinations(ids, 2))
        if len(ids) > 1:
            assert not any(c.SPECS[i].only_with == c.ALONE for i in ids)
    contradictions = [
        (c.LOWERCASE, c.CAPITALS),
        (c.LANGUAGE, c.LOWERCASE),
        (c.LANGUAGE, c.EXISTENCE),
        (c.WORD_COUNT, c.LETTER_COUNT),
        (c.END_PHRASE, c.LAST_WORD),
        (c.PARAGRAPHS, c.NTH_PARAGRAPH),
        (c.PARAGRAPHS, c.TWO_RESPONSES),
        (c.JSON, c.BULLETS),
        (c.JSON, c.PARAGRAPHS),
        (c.REPEAT_PROMPT, c.FORBIDDEN),
        (c.REPEAT_PROMPT, c.QUOTATION),
        (c.CONSTRAINED, c.NO_COMMA),
        (c.NO_DOT, c.POSTSCRIPT),
        (c.LETTER_FREQUENCY, c.LETTER_FREQUENCY_2),
    ]
    for first, second in contradictions:
        assert not c.compatible(first, second) and not c.compatible(second, first), (first, second)
    assert c.compatible(c.NO_COMMA, c.TITLE) and c.compatible(c.EXISTENCE, c.JSON)


def test_every_drawn_row_has_an_answer_that_scores_one():
    for _, drawn in drawn_rows(counts=(1, 4)):
        response = c.satisfying_response(drawn.ids, drawn.kwargs)
        assert response is not None
        result = score(response, instruction_id_list=drawn.ids, kwargs=drawn.kwargs, prompt=drawn.prompt)
        assert result.reward == 1.0, (drawn.ids, response)


def test_the_prompt_carries_the_registry_descriptions_and_the_request_to_repeat():
    seen_repeat = False
    for text, drawn in drawn_rows(seeds=range(40)):
        assert drawn.prompt.startswith(text)
        for instruction, kwargs in zip(drawn.ids, drawn.kwargs):
            assert build_description(instruction, kwargs) in drawn.prompt
            if instruction == c.REPEAT_PROMPT:  # IFEval's convention: everything before the sentence
                seen_repeat = True
                assert drawn.prompt.startswith(kwargs["prompt_to_repeat"] + " ")
                assert drawn.prompt.endswith(build_description(instruction, kwargs))
    assert seen_repeat


def test_combinations_that_cannot_hold_have_no_answer():
    assert c.satisfying_response([c.LOWERCASE, c.CAPITALS], [{}, {}]) is None
    long_request = " ".join(["word"] * 60)
    repeat = {"prompt_to_repeat": long_request}
    limit = {"relation": "less than", "num_words": 40}
    assert c.satisfying_response([c.REPEAT_PROMPT, c.WORD_COUNT], [repeat, limit]) is None
    assert c.satisfying_response([c.END_PHRASE, c.NO_DOT], [{"end_phrase": "Hope this helps."}, {}]) is None
    assert c.satisfying_response([c.END_PHRASE, c.NO_DOT], [{"end_phrase": "Over to you now"}, {}]) is not None


def test_the_bare_answer_scores_zero_when_it_breaks_a_constraint():
    answers = dict(QUESTIONS)
    zero = 0
    for text, drawn in drawn_rows(seeds=range(20)):
        if text not in answers:
            continue
        bare = answers[text]
        kept = [check(bare, i, k) for i, k in zip(drawn.ids, drawn.kwargs)]
        result = score(bare, instruction_id_list=drawn.ids, kwargs=drawn.kwargs)
        assert result.reward == (1.0 if all(kept) else 0.0)
        zero += result.reward == 0.0
        for instruction in (c.CAPITALS, c.QUOTATION, c.TITLE, c.JSON, c.TWO_RESPONSES, c.POSTSCRIPT, c.LANGUAGE):
            if instruction in drawn.ids:
                assert result.reward == 0.0
    assert zero > 40


def test_kwargs_use_the_text_or_the_word_list_and_avoid_each_other():
    for text, drawn in drawn_rows(seeds=range(30)):
        own = set(c.content_words(text)) | set(c.WORDS)
        given = dict(zip(drawn.ids, drawn.kwargs))
        required = list(given.get(c.EXISTENCE, {}).get("keywords", []))
        for instruction in (c.FREQUENCY, c.WORD_ONCE, c.WORD_NUMBER):
            if instruction in given:
                required.append(given[instruction]["keyword"])
        banned = list(given.get(c.FORBIDDEN, {}).get("forbidden_words", []))
        assert set(required + banned) <= own
        assert not any(b in r or r in b for b in banned for r in required)
        if c.WORD_COUNT in given:
            assert 30 <= given[c.WORD_COUNT]["num_words"] <= 251
        if c.END_PHRASE in given:
            assert given[c.END_PHRASE]["end_phrase"] in c.END_PHRASES


def test_cli_writes_rl_rows_and_prints_the_summary(tmp_path):
    mbpp = write(tmp_path / "mbpp" / "mbpp.jsonl", [{"task_id": 600 + i, "text": t} for i, t in enumerate(TASKS)])
    output = tmp_path / "if.jsonl"
    args = ["constrain", mbpp, "-o", output, "--families", "ifeval,iftrain", "--where", "task_id=601..602"]
    result = run(*args, "--constraints", "2-3", "--seed", "1", "-q")
    assert result.exit_code == 0, result.output
    rows = lines(output)
    assert [r["id"] for r in rows] == ["mbpp-601-if", "mbpp-602-if"]
    assert [r["base_text"] for r in rows] == TASKS[1:]
    normalise = rl_normaliser(None)
    for row in rows:
        assert row["domain"] == "ifeval" and 2 <= len(row["instruction_id_list"]) <= 3
        assert normalise(dict(row))["reference"]["instruction_id_list"] == row["instruction_id_list"]
    assert "per instruction" in result.output and "constraints per row" in result.output
    assert "not selected by --where task_id=601..602" in result.output
    summary = json.loads((tmp_path / "if.jsonl.summary.json").read_text())["summary"]
    assert sum(r["rows"] for r in summary["extra"]["constraints per row"]) == 2
    assert "already complete" in run(*args, "--constraints", "2-3", "--seed", "1").output
    bad = run("constrain", mbpp, "-o", tmp_path / "x.jsonl", "--exclude-ids", "keywords:nope", "-q")
    assert bad.exit_code == 2 and "unknown instruction id" in bad.output
    field = run("constrain", mbpp, "-o", tmp_path / "y.jsonl", "--text-field", "missing", "-q")
    assert field.exit_code == 2 and "no text in field 'missing'" in field.output


def test_only_the_ifeval_family_by_default_and_exclusions(tmp_path):
    source = write(tmp_path / "q.jsonl", [{"question": q} for q, _ in QUESTIONS * 4])
    output = tmp_path / "out.jsonl"
    c.constrain_files([source], output, exclude_ids=["change_case:", c.NO_COMMA], progress=False)
    used = {i for row in lines(output) for i in row["instruction_id_list"]}
    assert used <= set(IFEVAL_IDS) - {c.NO_COMMA, c.CAPITALS, c.LOWERCASE, c.CAPITAL_WORDS}
    with pytest.raises(c.DataError):
        c.instruction_pool(["ifbench"])


def test_decontaminate_on_the_request_not_on_the_constraint_templates(tmp_path):
    lowercase = build_description(c.LOWERCASE, {})
    benchmark = write(
        tmp_path / "ifeval.jsonl",
        [
            {"key": 1, "prompt": f"Write a short poem about a lighthouse keeper and the sea. {lowercase}"},
            {"key": 2, "prompt": "Tom has 3 boxes with 12 pencils each. He gives them to friends."},
        ],
    )
    source = write(tmp_path / "q.jsonl", [{"question": q} for q, _ in QUESTIONS])
    rows = tmp_path / "rows.jsonl"
    others = [i for i in IFEVAL_IDS if i != c.LOWERCASE]
    c.constrain_files([source], rows, constraints="1", exclude_ids=others, progress=False)
    assert all(r["instruction_id_list"] == [c.LOWERCASE] for r in lines(rows))
    whole = decontaminate_files([rows], tmp_path / "whole.jsonl", {"ifeval": benchmark}, progress=False)
    assert whole.dropped and whole.kept == 0  # every row shares the template's 9-grams
    request = decontaminate_files(
        [rows], tmp_path / "request.jsonl", {"ifeval": benchmark}, field="base_text", progress=False
    )
    assert request.kept == len(QUESTIONS) - 1  # only the question the benchmark quotes
    assert "Tom has 3 boxes" not in (tmp_path / "request.jsonl").read_text()
    result = run(
        "decontaminate", rows, "-o", tmp_path / "cli.jsonl", "-b", f"ifeval={benchmark}", "--text", "base_text"
    )
    assert result.exit_code == 0 and len(lines(tmp_path / "cli.jsonl")) == len(QUESTIONS) - 1
    missing = run("decontaminate", benchmark, "-o", tmp_path / "m.jsonl", "-b", f"x={benchmark}", "--text", "base_text")
    assert missing.exit_code == 2 and "ifeval.jsonl:1: missing text field 'base_text'" in missing.output
