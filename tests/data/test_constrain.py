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
from cascade_rl.data.commands import decontaminate_files
from cascade_rl.data.constrain import draws, files, witness
from cascade_rl.data.constrain import vocabulary as vocab
from cascade_rl.data.loading import rl_normaliser
from cascade_rl.data.rows import DataError
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
POOL = draws.instruction_pool(["ifeval", "iftrain"])


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
            drawn = draws.draw_row(text, random.Random(f"{seed}:{index}"), POOL, counts)
            assert drawn is not None
            yield text, drawn


def run(*args):
    return CliRunner().invoke(app, ["data", *map(str, args)], env={"COLUMNS": "250"})


def test_the_same_seed_builds_the_same_rows_and_a_row_does_not_depend_on_the_others(tmp_path):
    source = write(tmp_path / "train.jsonl", [{"question": q, "answer": a} for q, a in QUESTIONS])
    first, again, other = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    files.constrain_files([source], first, families=["ifeval", "iftrain"], seed=3, prefix="q", progress=False)
    moved = write(tmp_path / "elsewhere" / "train.jsonl", [{"question": q, "answer": a} for q, a in QUESTIONS])
    files.constrain_files([moved], again, families=["ifeval", "iftrain"], seed=3, prefix="q", progress=False)
    files.constrain_files([source], other, families=["ifeval", "iftrain"], seed=4, progress=False)
    assert first.read_text() == again.read_text()
    assert first.read_text() != other.read_text()
    limited = tmp_path / "limited.jsonl"
    files.constrain_files(
        [source], limited, families=["ifeval", "iftrain"], seed=3, limit=2, prefix="q", progress=False
    )
    assert lines(limited) == lines(first)[:2]
    assert [r["id"] for r in lines(first)] == [f"q-{i}-if" for i in range(1, len(QUESTIONS) + 1)]
    assert files.id_prefix("data/gsm8k/train.jsonl") == "gsm8k-train" and files.id_prefix("mbpp/mbpp.jsonl") == "mbpp"


def test_conflicting_instructions_are_never_drawn_together():
    rng = random.Random(0)
    for _ in range(2000):
        ids = draws.draw_ids(rng, draws.draw_count(rng, 1, 5), POOL)
        assert len(set(ids)) == len(ids)
        assert all(draws.compatible(a, b) for a, b in itertools.combinations(ids, 2))
        if len(ids) > 1:
            assert not any(draws.SPECS[i].only_with == draws.ALONE for i in ids)
    contradictions = [
        (vocab.LOWERCASE, vocab.CAPITALS),
        (vocab.LANGUAGE, vocab.LOWERCASE),
        (vocab.LANGUAGE, vocab.EXISTENCE),
        (vocab.WORD_COUNT, vocab.LETTER_COUNT),
        (vocab.END_PHRASE, vocab.LAST_WORD),
        (vocab.PARAGRAPHS, vocab.NTH_PARAGRAPH),
        (vocab.PARAGRAPHS, vocab.TWO_RESPONSES),
        (vocab.JSON, vocab.BULLETS),
        (vocab.JSON, vocab.PARAGRAPHS),
        (vocab.REPEAT_PROMPT, vocab.FORBIDDEN),
        (vocab.REPEAT_PROMPT, vocab.QUOTATION),
        (vocab.CONSTRAINED, vocab.NO_COMMA),
        (vocab.NO_DOT, vocab.POSTSCRIPT),
        (vocab.LETTER_FREQUENCY, vocab.LETTER_FREQUENCY_2),
    ]
    for first, second in contradictions:
        assert not draws.compatible(first, second) and not draws.compatible(second, first), (first, second)
    assert draws.compatible(vocab.NO_COMMA, vocab.TITLE) and draws.compatible(vocab.EXISTENCE, vocab.JSON)


def test_every_drawn_row_has_an_answer_that_scores_one():
    for _, drawn in drawn_rows(counts=(1, 4)):
        response = witness.satisfying_response(drawn.ids, drawn.kwargs)
        assert response is not None
        result = score(response, instruction_id_list=drawn.ids, kwargs=drawn.kwargs, prompt=drawn.prompt)
        assert result.reward == 1.0, (drawn.ids, response)


def test_the_prompt_carries_the_registry_descriptions_and_the_request_to_repeat():
    seen_repeat = False
    for text, drawn in drawn_rows(seeds=range(40)):
        assert drawn.prompt.startswith(text)
        for instruction, kwargs in zip(drawn.ids, drawn.kwargs):
            assert build_description(instruction, kwargs) in drawn.prompt
            if instruction == vocab.REPEAT_PROMPT:  # IFEval's convention: everything before the sentence
                seen_repeat = True
                assert drawn.prompt.startswith(kwargs["prompt_to_repeat"] + " ")
                assert drawn.prompt.endswith(build_description(instruction, kwargs))
    assert seen_repeat


def test_combinations_that_cannot_hold_have_no_answer():
    assert witness.satisfying_response([vocab.LOWERCASE, vocab.CAPITALS], [{}, {}]) is None
    long_request = " ".join(["word"] * 60)
    repeat = {"prompt_to_repeat": long_request}
    limit = {"relation": "less than", "num_words": 40}
    assert witness.satisfying_response([vocab.REPEAT_PROMPT, vocab.WORD_COUNT], [repeat, limit]) is None
    assert (
        witness.satisfying_response([vocab.END_PHRASE, vocab.NO_DOT], [{"end_phrase": "Hope this helps."}, {}]) is None
    )
    assert (
        witness.satisfying_response([vocab.END_PHRASE, vocab.NO_DOT], [{"end_phrase": "Over to you now"}, {}])
        is not None
    )


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
        for instruction in (
            vocab.CAPITALS,
            vocab.QUOTATION,
            vocab.TITLE,
            vocab.JSON,
            vocab.TWO_RESPONSES,
            vocab.POSTSCRIPT,
            vocab.LANGUAGE,
        ):
            if instruction in drawn.ids:
                assert result.reward == 0.0
    assert zero > 40


def test_kwargs_use_the_text_or_the_word_list_and_avoid_each_other():
    for text, drawn in drawn_rows(seeds=range(30)):
        own = set(draws.content_words(text)) | set(vocab.WORDS)
        given = dict(zip(drawn.ids, drawn.kwargs))
        required = list(given.get(vocab.EXISTENCE, {}).get("keywords", []))
        for instruction in (vocab.FREQUENCY, vocab.WORD_ONCE, vocab.WORD_NUMBER):
            if instruction in given:
                required.append(given[instruction]["keyword"])
        banned = list(given.get(vocab.FORBIDDEN, {}).get("forbidden_words", []))
        assert set(required + banned) <= own
        assert not any(b in r or r in b for b in banned for r in required)
        if vocab.WORD_COUNT in given:
            assert 30 <= given[vocab.WORD_COUNT]["num_words"] <= 251
        if vocab.END_PHRASE in given:
            assert given[vocab.END_PHRASE]["end_phrase"] in vocab.END_PHRASES


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
    files.constrain_files([source], output, exclude_ids=["change_case:", vocab.NO_COMMA], progress=False)
    used = {i for row in lines(output) for i in row["instruction_id_list"]}
    assert used <= set(IFEVAL_IDS) - {
        vocab.NO_COMMA,
        vocab.CAPITALS,
        vocab.LOWERCASE,
        vocab.CAPITAL_WORDS,
    }
    with pytest.raises(DataError):
        draws.instruction_pool(["ifbench"])


def test_decontaminate_on_the_request_not_on_the_constraint_templates(tmp_path):
    lowercase = build_description(vocab.LOWERCASE, {})
    benchmark = write(
        tmp_path / "ifeval.jsonl",
        [
            {"key": 1, "prompt": f"Write a short poem about a lighthouse keeper and the sea. {lowercase}"},
            {"key": 2, "prompt": "Tom has 3 boxes with 12 pencils each. He gives them to friends."},
        ],
    )
    source = write(tmp_path / "q.jsonl", [{"question": q} for q, _ in QUESTIONS])
    rows = tmp_path / "rows.jsonl"
    others = [i for i in IFEVAL_IDS if i != vocab.LOWERCASE]
    files.constrain_files([source], rows, constraints="1", exclude_ids=others, progress=False)
    assert all(r["instruction_id_list"] == [vocab.LOWERCASE] for r in lines(rows))
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
