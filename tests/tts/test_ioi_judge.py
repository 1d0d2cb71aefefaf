"""The local judge (SPEC section 8): hand-written programs get each verdict, IOI scoring."""

from __future__ import annotations

import pytest
from tts_helpers import solution, write_problem

from cascade_rl.tts.judge import JudgeError, problem_score, run_tests
from cascade_rl.tts.problem import load_problem

CORRECT = "print(sum(map(int, input().split())))"
PROGRAMS = {
    "AC": CORRECT,
    "WA": "a, b = map(int, input().split())\nprint(a - b)",
    "TLE": "while True:\n    pass",
    "MLE": "blocks = []\nwhile True:\n    blocks.append(bytearray(50 * 1024 * 1024))",
    "RE": "a, b = map(int, input().split())\nprint(a // (b - b))",
    "CE": "def broken(:\n    return 1",
}


@pytest.fixture(scope="module")
def a_plus_b(tmp_path_factory):
    return load_problem(write_problem(tmp_path_factory.mktemp("p") / "a-plus-b"))


@pytest.mark.parametrize("verdict", sorted(PROGRAMS))
def test_each_verdict_on_a_hand_written_program(judge, a_plus_b, verdict):
    result = judge.judge(a_plus_b, PROGRAMS[verdict])
    assert [s.verdict for s in result.subtasks] == [verdict, verdict]
    assert result.score == (100.0 if verdict == "AC" else 0.0)
    if verdict == "CE":
        assert "SyntaxError" in result.compile_error
    else:
        assert result.compile_error is None


def test_runtime_error_names_the_exception_and_exit_status(judge, a_plus_b):
    result = judge.judge(a_plus_b, "raise SystemExit(3)")
    test = result.subtasks[0].tests[0]
    assert test.verdict == "RE" and "exit status 3" in test.message
    divide = judge.judge(a_plus_b, PROGRAMS["RE"]).subtasks[0].tests[0]
    assert "ZeroDivisionError" in divide.message


def test_a_subtask_scores_only_when_every_test_passes_and_stops_at_the_first_failure(judge, tmp_path):
    tests = [{"input": f"{a} 1\n", "output": f"{a + 1}\n"} for a in range(4)]
    problem = load_problem(write_problem(tmp_path / "p", subtasks=[{"points": 100, "tests": tests}]))
    wrong_on_third = "a, b = map(int, input().split())\nprint(a + b if a != 2 else 0)"
    result = judge.judge(problem, wrong_on_third)
    subtask = result.subtasks[0]
    assert (subtask.score, subtask.verdict, subtask.failed_test) == (0.0, "WA", 3)
    assert [t.verdict for t in subtask.tests] == ["AC", "AC", "WA"]  # the fourth never ran


def test_outputs_compare_by_the_code_reward_rules(judge, tmp_path):
    problem = load_problem(
        write_problem(
            tmp_path / "p", subtasks=[{"points": 10, "tests": [{"input": "", "output": "0.5 1000000007\n2\n"}]}]
        )
    )
    assert judge.judge(problem, "print('0.5000000001   1000000007   ')\nprint(2)\nprint()").score == 10.0
    assert judge.judge(problem, "print('0.5 1000000008')\nprint(2)").score == 0.0  # integers compare exactly


def test_problem_score_is_the_sum_of_best_subtask_scores_over_submissions(judge, a_plus_b):
    small_only = "a, b = map(int, input().split())\nprint(a + b if a >= 0 else 0)"  # subtask 1
    large_only = "a, b = map(int, input().split())\nprint(a + b if a < 0 else 0)"  # subtask 2
    results = [judge.judge(a_plus_b, small_only), judge.judge(a_plus_b, large_only)]
    assert [r.score for r in results] == [40.0, 60.0]
    assert problem_score(a_plus_b, results) == (100.0, [40.0, 60.0])


HALF_CHECKER = """
import json, sys
request = json.load(sys.stdin)
got, want = request["output"].split(), request["answer"].split()
print(1.0 if got == want else (0.5 if got and got[0] == want[0] else 0.0))
print("first token right" if got and got[0] == want[0] else "wrong")
"""


def test_checker_awards_partial_credit_as_points_times_the_smallest_fraction(judge, tmp_path):
    tests = [{"input": "1\n", "output": "1 2\n"}, {"input": "2\n", "output": "2 3\n"}]
    problem = load_problem(
        write_problem(
            tmp_path / "p",
            samples=[],
            subtasks=[{"points": 50, "tests": tests}],
            checker_source=HALF_CHECKER,
            partial_score=True,
        )
    )
    exact = "x = int(input())\nprint(x, x + 1)"
    half_on_second = "x = int(input())\nprint(x, x + 1 if x == 1 else 0)"
    assert judge.judge(problem, exact).subtasks[0].verdict == "AC"
    partial = judge.judge(problem, half_on_second).subtasks[0]
    assert (partial.verdict, partial.score) == ("PC", 25.0)
    assert partial.tests[1].message == "first token right"
    assert judge.judge(problem, "print('nonsense')").subtasks[0].verdict == "WA"


def test_a_checker_that_prints_no_score_is_the_problems_fault(judge, tmp_path):
    problem = load_problem(write_problem(tmp_path / "p", checker_source="print('maybe')"))
    with pytest.raises(JudgeError, match="checker failed on test"):
        judge.judge(problem, CORRECT)


def test_a_test_shared_by_subtasks_runs_once_per_submission(judge, tmp_path):
    shared = {"input": "4 5\n", "output": "9\n"}
    problem = load_problem(
        write_problem(
            tmp_path / "p",
            subtasks=[
                {"points": 30, "tests": [shared]},
                {"points": 70, "tests": [shared, {"input": "1 1\n", "output": "2\n"}]},
            ],
        )
    )

    class CountingRunner:
        def __init__(self, runner):
            self.runner, self.runs = runner, 0

        def run_python(self, source, **options):
            self.runs += 1
            return self.runner.run_python(source, **options)

    def both_subtasks(runner):
        counting = CountingRunner(runner)
        from cascade_rl.tts.judge import _SharedTests

        cache = _SharedTests()
        for subtask in problem.subtasks:
            run_tests(counting, problem, CORRECT, subtask.tests, shared=cache)
        return counting.runs

    assert judge.pool.submit_job(both_subtasks).result() == 2  # not 3


@pytest.mark.parametrize(
    "problem_id, name, score, verdicts",
    [
        ("digit-sum", "positional", 100.0, ["AC", "AC"]),
        ("digit-sum", "brute", 30.0, ["AC", "TLE"]),
        ("max-rectangle", "bands", 100.0, ["AC", "AC"]),
        ("max-rectangle", "one_row", 40.0, ["AC", "WA"]),
        ("knapsack-ratio", "dp", 100.0, ["AC", "AC"]),
        ("knapsack-ratio", "greedy", 30 * 5 / 9 + 70 * 5 / 9, ["PC", "PC"]),
    ],
)
def test_shipped_problems_score_their_reference_solutions(judge, problem_id, name, score, verdicts):
    from cascade_rl.tts.problem import load_problems

    (problem,) = load_problems([problem_id])
    result = judge.judge(problem, solution(problem_id, name))
    assert [s.verdict for s in result.subtasks] == verdicts
    assert result.score == pytest.approx(score, abs=1e-3)
