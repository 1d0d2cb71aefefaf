"""The generation prompt of the test-time-scaling loop (SPEC section 8; seed appendix C.3).

One prompt per unsolved subtask, in the words of appendix C.3:

1. the instruction to write Python in a ```python block, then ``{problem_statement}``: the
   problem's statement, its samples, and the subtask being solved with its points and
   constraints (the appendix shows the placeholder only; we put the targeted subtask last so
   the model knows which constraints its code must meet);
2. **cross-subtask insight**: for every *other* subtask already solved, its constraints and the
   accepted code ("Below you are provided the accepted correct solutions but with different
   input constraints ..."); one block per distinct program, listing every subtask it solved;
3. **submission history**: earlier submissions for this subtask with the official verdict and
   score ("From here, you are also given your submission history containing **incorrect**
   code ..."): the last 5 incorrect ones (classic problems) or the 3 best-scoring ones
   (partial-score problems), chosen by :mod:`cascade_rl.tts.loop`.

A section with nothing to show is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cascade_rl.tts.problem import Problem, Subtask

SEPARATOR = "======================="
INSTRUCTION = (
    "Write Python code to solve the problem. Please place the solution code in the following format:\n"
    "```python\n# Your solution code here\n```"
)
INSIGHT_HEADER = (
    "Below you are provided the accepted correct solutions but with different input constraints. "
    "You may use them as a reference for your insights."
)
HISTORY_HEADER = (
    "From here, you are also given your submission history containing **incorrect** code and their "
    "corresponding official judgement verdicts as reference - Official judgement verdicts and problem "
    "statement/conditions are 100% reliable. You should make improvements from them if they could help:"
)


@dataclass(frozen=True)
class AcceptedCode:
    """A program that solved other subtasks, with those subtasks' constraints."""

    constraints: tuple[str, ...]
    code: str


@dataclass(frozen=True)
class PastSubmission:
    """A submission for this subtask as the prompt shows it."""

    code: str
    verdict: str  # e.g. "Wrong Answer on test 3"
    score: float
    points: float


def _fenced(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def _number(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def subtask_heading(subtask: Subtask) -> str:
    return f"Subtask {subtask.name} ({_number(subtask.points)} points)"


def problem_statement(problem: Problem, subtask: Subtask) -> str:
    """``{problem_statement}``: statement, samples, and the targeted subtask's constraints."""
    parts = [problem.statement]
    for number, sample in enumerate(problem.samples, 1):
        parts.append(
            f"### Sample input {number}\n```\n{sample.input.decode('utf-8', 'replace').rstrip()}\n```\n"
            f"### Sample output {number}\n```\n{sample.answer.rstrip()}\n```"
        )
    limits = f"Time limit: {_number(problem.time_limit_s)} s per test. Memory limit: {problem.memory_mb} MB."
    parts.append(f"## You are solving: {subtask_heading(subtask)}\n{subtask.constraints}\n\n{limits}".rstrip())
    return "\n\n".join(parts)


def _insight(accepted: Sequence[AcceptedCode]) -> str:
    blocks = [
        f"## Different Constraints (for reference only):\n{chr(10).join(item.constraints)}\n"
        f"### Accepted Code:\n{_fenced(item.code)}"
        for item in accepted
    ]
    return "\n".join([INSIGHT_HEADER, SEPARATOR, *(f"{block}\n{SEPARATOR}" for block in blocks)])


def _history(submissions: Sequence[PastSubmission]) -> str:
    blocks = [
        f"### Incorrect Code\n{_fenced(item.code)}\n"
        f"Judgement Verdict: {item.verdict}, Score: {_number(item.score)} / {_number(item.points)}"
        for item in submissions
    ]
    return "\n".join([HISTORY_HEADER, SEPARATOR, *(f"{block}\n{SEPARATOR}" for block in blocks)])


def build_prompt(
    problem: Problem,
    subtask: Subtask,
    accepted: Sequence[AcceptedCode] = (),
    history: Sequence[PastSubmission] = (),
) -> str:
    """The user message for one subtask in one round (module docstring)."""
    sections = [INSTRUCTION, problem_statement(problem, subtask)]
    if accepted:
        sections.append(_insight(accepted))
    if history:
        sections.append(_history(history))
    return "\n\n".join(sections)
