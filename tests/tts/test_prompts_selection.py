"""The appendix C.3 prompt and the selection heuristics (Tail-10 confidence, first, shortest)."""

from __future__ import annotations

import pytest

from cascade_rl.tts.problem import load_problems
from cascade_rl.tts.prompts import AcceptedCode, PastSubmission, build_prompt
from cascade_rl.tts.selection import (
    Candidate,
    needs_confidence,
    resolve_heuristic,
    tail10,
    tail_confidence,
    token_confidence,
)


@pytest.fixture(scope="module")
def rectangle():
    return load_problems(["max-rectangle"])[0]


def test_first_round_prompt_is_instruction_statement_samples_and_the_subtask(rectangle):
    prompt = build_prompt(rectangle, rectangle.subtasks[1])
    assert prompt.startswith(
        "Write Python code to solve the problem. Please place the solution code in the following format:"
    )
    assert "# Maximum Rectangle" in prompt and "### Sample input 2\n```\n2 3\n1 -9 2\n3 -1 5\n```" in prompt
    assert prompt.rstrip().endswith(
        "## You are solving: Subtask 2 (60 points)\n1 <= N <= 100, 1 <= M <= 100\n\n"
        "Time limit: 3 s per test. Memory limit: 256 MB."
    )
    assert "Accepted Code" not in prompt and "Incorrect Code" not in prompt


def test_insight_and_history_use_the_appendix_wording(rectangle):
    accepted = [AcceptedCode(("Subtask 1 (40 points): N = 1",), "print(1)")]
    history = [PastSubmission("print(2)", "Wrong Answer on test 1", 0.0, 60.0)]
    prompt = build_prompt(rectangle, rectangle.subtasks[1], accepted, history)
    insight = (
        "Below you are provided the accepted correct solutions but with different input constraints. "
        "You may use them as a reference for your insights.\n=======================\n"
        "## Different Constraints (for reference only):\nSubtask 1 (40 points): N = 1\n"
        "### Accepted Code:\n```python\nprint(1)\n```\n======================="
    )
    past = (
        "your submission history containing **incorrect** code and their corresponding official judgement "
        "verdicts as reference - Official judgement verdicts and problem statement/conditions are 100% reliable. "
        "You should make improvements from them if they could help:\n=======================\n"
        "### Incorrect Code\n```python\nprint(2)\n```\nJudgement Verdict: Wrong Answer on test 1, Score: 0 / 60\n"
        "======================="
    )
    assert insight in prompt and past in prompt
    assert prompt.index(insight) < prompt.index(past)


def candidate(index, confidence, code="print(0)"):
    return Candidate(index, f"```python\n{code}\n```", code, confidence)


def test_token_and_tail_confidence_follow_deepconf():
    assert token_confidence([-0.1, -5.1, -10.1]) == pytest.approx(5.1)
    assert tail_confidence([1.0, 2.0, 3.0, 10.0], tail_tokens=2) == pytest.approx(6.5)  # the last two only
    assert tail_confidence([]) is None


def test_tail10_submits_the_most_confident_candidate():
    assert tail10([candidate(0, 3.0), candidate(1, 7.5), candidate(2, 7.0)]) == 1
    assert tail10([candidate(0, None), candidate(1, 0.5)]) == 1  # a confidence beats none
    assert tail10([candidate(0, None), candidate(1, None)]) == 0  # none at all: the earliest


def test_other_heuristics_and_plugging_one_in():
    candidates = [candidate(0, 1.0, "print(10)  # long"), candidate(1, 0.0, "print(1)")]
    assert resolve_heuristic("first")(candidates) == 0
    assert resolve_heuristic("shortest")(candidates) == 1
    plugged = resolve_heuristic("cascade_rl.tts.selection:shortest")
    assert plugged(candidates) == 1 and not needs_confidence(plugged) and needs_confidence(tail10)
    with pytest.raises(ValueError, match="unknown selection heuristic"):
        resolve_heuristic("best")
    with pytest.raises(ValueError, match="cannot be imported"):
        resolve_heuristic("cascade_rl.tts.selection:nothing")
