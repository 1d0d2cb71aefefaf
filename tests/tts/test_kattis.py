"""The Kattis problem-package converter: test groups become subtasks with their points."""

from __future__ import annotations

import pytest
from tts_helpers import solution

from cascade_rl.tts.kattis import convert_kattis
from cascade_rl.tts.problem import ProblemError


def kattis_package(root, *, validation="default"):
    (root / "problem_statement").mkdir(parents=True)
    (root / "problem_statement" / "problem.en.md").write_text("Sum the digit sums of 1..N.\n")
    (root / "problem.yaml").write_text(
        f"name: Digit Sum\ntype: scoring\nlimits:\n  memory: 512\nvalidation: {validation}\n"
    )
    (root / ".timelimit").write_text("2\n")
    sample = root / "data" / "sample"
    sample.mkdir(parents=True)
    (sample / "1.in").write_text("12\n")
    (sample / "1.ans").write_text("51\n")
    for group, points, cases in (("group1", 30, [(9, 45), (10, 46)]), ("group2", 70, [(10**18, 81000000000000000001)])):
        directory = root / "data" / "secret" / group
        directory.mkdir(parents=True)
        (directory / "testdata.yaml").write_text(f"grading: default\ngrader_flags: min\naccept_score: {points}\n")
        for number, (n, answer) in enumerate(cases, 1):
            (directory / f"{number}.in").write_text(f"{n}\n")
            (directory / f"{number}.ans").write_text(f"{answer}\n")
    return root


def test_a_kattis_package_converts_to_a_judgeable_problem(tmp_path, judge):
    problem = convert_kattis(kattis_package(tmp_path / "digitsum"), tmp_path / "converted")
    assert (problem.id, problem.title, problem.time_limit_s, problem.memory_mb) == ("digitsum", "Digit Sum", 2.0, 512)
    assert [(s.name, s.points, len(s.tests)) for s in problem.subtasks] == [("group1", 30.0, 2), ("group2", 70.0, 1)]
    assert problem.samples[0].answer == "51\n"
    assert judge.judge(problem, solution("digit-sum", "positional")).score == 100.0
    assert judge.judge(problem, solution("digit-sum", "brute")).score == 30.0


def test_custom_validation_needs_a_checker(tmp_path):
    with pytest.raises(ProblemError, match="validation: custom output validators are not converted"):
        convert_kattis(kattis_package(tmp_path / "p", validation="custom"), tmp_path / "out")
