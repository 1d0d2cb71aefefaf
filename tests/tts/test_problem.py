"""The problem format (docs/tts.md): shipped problems load; bad files fail with one line
naming the file and the field."""

from __future__ import annotations

import pytest
from tts_helpers import write_problem

from cascade_rl.tts.problem import ProblemError, load_problem, load_problems, shipped_problems


def test_shipped_problems_load_with_subtasks_limits_and_samples():
    problems = load_problems([str(path) for path in shipped_problems()])
    by_id = {p.id: p for p in problems}
    assert set(by_id) == {"digit-sum", "max-rectangle", "knapsack-ratio"}
    assert all(len(p.subtasks) == 2 and p.max_score == 100 and p.samples for p in problems)
    assert by_id["knapsack-ratio"].partial_score and by_id["knapsack-ratio"].checker
    rectangle = by_id["max-rectangle"]
    assert rectangle.subtasks[0].samples == (0,) and rectangle.subtasks[1].samples == (0, 1)
    digit = by_id["digit-sum"]
    assert {t.name for t in digit.subtasks[0].tests} < {t.name for t in digit.subtasks[1].tests}  # shared tests


def test_globs_pair_inputs_with_out_or_ans_files(tmp_path):
    tests = tmp_path / "p" / "tests"
    tests.mkdir(parents=True)
    (tests / "a.in").write_text("1 1\n")
    (tests / "a.ans").write_text("2\n")
    (tests / "b.in").write_text("2 2\n")
    (tests / "b.out").write_text("4\n")
    problem = load_problem(write_problem(tmp_path / "p", subtasks=[{"points": 5, "tests": ["tests/*.in"]}]))
    assert [(t.name, t.input, t.answer) for t in problem.subtasks[0].tests] == [
        ("tests/a", b"1 1\n", "2\n"),
        ("tests/b", b"2 2\n", "4\n"),
    ]


def _one_line_error(path) -> str:
    with pytest.raises(ProblemError) as caught:
        load_problem(path)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    return message


@pytest.mark.parametrize(
    "fields, expected",
    [
        ({"memory": 512}, "field 'memory'"),  # unknown top-level field
        (
            {"subtasks": [{"points": 10, "tests": [{"input": "1", "output": "1"}], "timelimit": 2}]},
            "subtasks[0]: unknown field 'timelimit'",
        ),
        (
            {"subtasks": [{"points": 10, "tests": [{"input": "1", "outptu": "1"}]}]},
            "subtasks[0].tests[0]: unknown field 'outptu'",
        ),
        ({"subtasks": [{"points": 10, "tests": []}]}, "subtasks[0].tests: List should have at least 1 item"),
        ({"subtasks": [{"points": 10}]}, "subtasks[0].tests: Field required"),
        (
            {"subtasks": [{"points": 10, "tests": ["tests/*.in"]}]},
            "subtasks[0].tests[0]: pattern 'tests/*.in' matches no input",
        ),
        ({"subtasks": []}, "subtasks: List should have at least 1 item"),
        ({"time_limit_s": None}, "time_limit_s: Field required"),
        ({"time_limit_s": -1}, "time_limit_s: Input should be greater than 0"),
        ({"statement": "missing.md"}, "statement: file"),
        ({"partial_score": True}, "partial_score: a partial-score problem needs a checker"),
        ({"id": "a b"}, "id: 'a b' must be"),
        (
            {"subtasks": [{"points": 10, "tests": [{"input": "1", "output": "1"}], "samples": [3]}]},
            "no sample number 3",
        ),
    ],
)
def test_bad_problem_files_fail_with_one_line_naming_the_field(tmp_path, fields, expected):
    message = _one_line_error(write_problem(tmp_path / "p", **fields))
    assert expected in message


def test_missing_expected_output_and_bad_yaml_are_named(tmp_path):
    tests = tmp_path / "p" / "tests"
    tests.mkdir(parents=True)
    (tests / "x.in").write_text("1\n")
    message = _one_line_error(write_problem(tmp_path / "p", subtasks=[{"points": 1, "tests": ["tests/*.in"]}]))
    assert "x.in has no expected output" in message
    broken = tmp_path / "q" / "problem.yaml"
    broken.parent.mkdir()
    broken.write_text("id: q\nsubtasks: [\n")
    assert "not valid YAML" in _one_line_error(broken)


def test_references_resolve_files_directories_and_shipped_ids(tmp_path):
    write_problem(tmp_path / "set" / "one")
    write_problem(tmp_path / "set" / "two")
    assert [p.id for p in load_problems([tmp_path / "set"])] == ["one", "two"]
    assert [p.id for p in load_problems(["digit-sum"])] == ["digit-sum"]
    with pytest.raises(ProblemError, match="also the id of"):
        load_problems([tmp_path / "set" / "one", tmp_path / "set" / "one" / "problem.yaml"])
    with pytest.raises(ProblemError, match="nor a shipped problem"):
        load_problems(["no-such-problem"])
