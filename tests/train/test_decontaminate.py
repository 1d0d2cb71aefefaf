"""Training rows against the recipe's benchmarks (SPEC 3): dropped while read, counted by benchmark."""

import json

from cascade_rl.data.loading import load_sources, rl_normaliser, screening
from cascade_rl.recipe import DataSource, EvalSpec
from cascade_rl.train.decontaminate import benchmark_screen

SUFFIX = " Please reason step by step, and put your final answer within \\boxed{}."


def write(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def gsm8k_rows(questions):
    return [{"question": q, "answer": f"worked #### {i}"} for i, q in enumerate(questions)]


def test_training_rows_sharing_a_question_with_a_benchmark_are_dropped_and_counted(tmp_path):
    test_questions = [
        "Janet bought stamps at the post office and some of them were for her aunt in Ohio.",
        "A train leaves the station at noon travelling at sixty miles per hour towards the coast.",
        "Every benchmark row of the limit and past it is screened, not only the evaluated ones here.",
    ]
    bench = write(tmp_path / "test.jsonl", gsm8k_rows(test_questions))
    spec = EvalSpec(benchmarks=[{"name": "gsm8k", "data": str(bench), "format": "gsm8k", "domain": "math", "limit": 1}])
    train = write(
        tmp_path / "train.jsonl",
        gsm8k_rows(
            [
                "Mark bought stamps at the post office and some of them were for his cousin.",  # 9 shared words
                "How many eggs does a hen lay in a week if she lays one egg every day?",  # clean
                "Here every benchmark row of the limit and past it is screened, as said.",  # beyond the limit
            ]
        ),
    )
    source = DataSource(path=str(train), format="gsm8k")
    with screening(benchmark_screen(spec)):
        rows, report = load_sources([source], rl_normaliser("math"))
    assert [row["reference"]["answer"] for row in rows] == ["1"]  # only the clean question is left
    assert report.skipped == {"shares a 9-gram with gsm8k": 2}
    assert report.examples["shares a 9-gram with gsm8k"] == "train.jsonl:1"
    # the converted rows of both files end in the same request for a boxed answer: a template, not a match
    assert SUFFIX.strip()[:20] in rows[0]["prompt"][-1]["content"]
    # outside the screen (benchmarks, or a recipe that turns it off) nothing is dropped
    assert len(load_sources([source], rl_normaliser("math"))[0]) == 3
    assert benchmark_screen(spec.model_copy(update={"decontaminate": False})) is None
    # plain overlap (no template): the shared request for a boxed answer drops the clean row too
    with screening(benchmark_screen(spec.model_copy(update={"decontaminate_template": None}))):
        assert load_sources([source], rl_normaliser("math"))[0] == []


def test_the_limit_counts_rows_left_after_the_screen(tmp_path):
    bench = write(tmp_path / "test.jsonl", gsm8k_rows(["one two three four five six seven eight nine ten", "eleven"]))
    spec = EvalSpec(benchmarks=[{"name": "b", "data": str(bench), "format": "gsm8k", "domain": "math"}])
    train = write(
        tmp_path / "train.jsonl",
        gsm8k_rows(["one two three four five six seven eight nine", "clean question one", "clean question two"]),
    )
    with screening(benchmark_screen(spec)):
        rows, report = load_sources([DataSource(path=str(train), format="gsm8k", limit=2)], rl_normaliser("math"))
    assert len(rows) == 2 and report.kept == 2 and sum(report.skipped.values()) == 1


def test_a_source_that_loses_much_to_the_screen_is_said_with_the_n_grams(tmp_path, caplog):
    asked = ["Janet bought stamps at the post office for her aunt in Ohio.", "A train leaves the station at noon."]
    bench = write(tmp_path / "test.jsonl", gsm8k_rows(asked))
    spec = EvalSpec(benchmarks=[{"name": "gsm8k", "data": str(bench), "format": "gsm8k", "domain": "math"}])
    questions = ["Janet bought stamps at the post office for her aunt in Ohio today.", "How many eggs in a week?"]
    train = write(tmp_path / "train.jsonl", gsm8k_rows(questions))
    with caplog.at_level("WARNING"), screening(benchmark_screen(spec)):
        rows, _ = load_sources([DataSource(path=str(train), format="gsm8k")], rl_normaliser("math"))
    assert len(rows) == 1
    assert "dropped 1 of 2 rows of a source (50%), mostly by gsm8k: “janet bought stamps at the post" in caplog.text
