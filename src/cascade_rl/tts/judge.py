"""A local judge with IOI semantics for the test-time-scaling loop (SPEC section 8).

A submission is one Python program. It is first compiled (in the sandbox: the parser of an
untrusted source is untrusted work too); a syntax error is **CE** for every subtask. Then each
subtask runs its tests in the project's sandbox (:mod:`cascade_rl.sandbox`, one pooled
bubblewrap sandbox per worker, one fork per test) and each test gets a verdict:

* **AC** accepted, **WA** wrong answer, **PC** partially correct (a checker's fraction
  strictly between 0 and 1, partial-score problems only);
* **TLE** the CPU time limit (``time_limit_s``, whole seconds as RLIMIT_CPU counts them) or the
  wall-clock cap (twice the limit plus one second, for a loaded machine) was hit;
* **MLE** the address-space limit (``memory_mb``) was hit (``MemoryError`` or the sandbox's
  memory watchdog);
* **RE** the program exited non-zero, died by a signal, or hit another limit (processes,
  output size, file size).

Outputs are compared outside the sandbox with the code reward's rule
(:func:`cascade_rl.rewards.code.outputs_match`: tokens; an expected float within 1e-6, an
expected integer or word only itself),
or, when the problem has a **checker**, by the checker: a Python program run in the sandbox
that reads ``{"input", "output", "answer"}`` as one JSON object on stdin and prints the
test's score in [0, 1] on its first line (anything after it is a message). A checker that
fails or prints no number is the problem's fault: :class:`JudgeError`, nothing is recorded.

Scoring (IOI since 2017): a subtask scores its points times the smallest test fraction, so
with 0/1 tests only when *every* test passes; a submission's score is the sum over subtasks;
a problem's score is the sum over subtasks of the best subtask score over all submissions
(:func:`problem_score`). Like CMS, a subtask stops at its first test that scores 0 (its score
is 0 whatever follows); ``stop_on_failure=False`` runs every test. A test shared by several
subtasks runs once per submission.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from cascade_rl.rewards.code import RECURSION_LIMIT, outputs_match
from cascade_rl.sandbox import Limits, RunResult, SandboxPool
from cascade_rl.tts.problem import Problem, Subtask, Test

VERDICT_NAMES = {
    "AC": "Accepted",
    "PC": "Partially Correct",
    "WA": "Wrong Answer",
    "TLE": "Time Limit Exceeded",
    "MLE": "Memory Limit Exceeded",
    "RE": "Runtime Error",
    "CE": "Compilation Error",
}
COMPILE_CHECK = "import sys\ncompile(sys.stdin.buffer.read(), 'solution.py', 'exec')\n"
COMPILE_LIMITS = Limits(time_s=20.0, memory_mb=1024)
CHECKER_LIMITS = Limits(time_s=30.0, memory_mb=2048)
MESSAGE_CHARS = 300


class JudgeError(RuntimeError):
    """The judge could not judge (a failing checker); the submission is not recorded."""


@dataclass
class TestResult:
    __test__ = False  # not a pytest class

    name: str
    verdict: str
    fraction: float
    seconds: float
    message: str = ""


@dataclass
class SubtaskResult:
    name: str
    points: float
    score: float
    verdict: str  # AC, PC, or the verdict of the first test that scored 0 (else its lowest)
    tests: list[TestResult] = field(default_factory=list)

    @property
    def solved(self) -> bool:
        return self.verdict == "AC"

    @property
    def failed_test(self) -> int | None:
        """1-based position (within the subtask) of the test that decided a non-AC verdict."""
        for position, test in enumerate(self.tests, 1):
            if test.verdict == self.verdict and self.verdict != "AC":
                return position
        return None


@dataclass
class JudgeResult:
    score: float
    max_score: float
    subtasks: list[SubtaskResult]
    compile_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JudgeResult:
        subtasks = [
            SubtaskResult(**{**s, "tests": [TestResult(**t) for t in s.get("tests", [])]}) for s in data["subtasks"]
        ]
        return cls(data["score"], data["max_score"], subtasks, data.get("compile_error"))


def problem_score(problem: Problem, results: Iterable[JudgeResult]) -> tuple[float, list[float]]:
    """The IOI problem score: sum over subtasks of the best score any submission got on it."""
    best = [0.0] * len(problem.subtasks)
    for result in results:
        for index, subtask in enumerate(result.subtasks):
            best[index] = max(best[index], subtask.score)
    return sum(best), best


# ----------------------------------------------------------------------------- one test


def test_limits(problem: Problem) -> Limits:
    """CPU time and memory of the problem; wall clock capped at twice the limit plus 1 s."""
    return Limits(time_s=2 * problem.time_limit_s + 1.0, cpu_s=problem.time_limit_s, memory_mb=problem.memory_mb)


def _tail(data: bytes) -> str:
    lines = data.decode("utf-8", "replace").strip().splitlines()
    return "\n".join(lines[-3:])[-MESSAGE_CHARS:]


def _run_verdict(run: RunResult) -> tuple[str, str] | None:
    """(verdict, message) when the run failed before its output could be compared."""
    if run.timed_out or run.limit in ("time", "cpu"):
        return "TLE", f"limit: {run.limit or 'time'}"
    if run.limit == "memory" or b"MemoryError" in run.stderr[-4096:]:
        return "MLE", _tail(run.stderr) or "limit: memory"
    if run.error or run.limit or run.returncode != 0:
        status = run.error or (f"limit: {run.limit}" if run.limit else f"exit status {run.returncode}")
        return "RE", "\n".join(part for part in (status, _tail(run.stderr)) if part)
    return None


def _checker_fraction(runner: Any, problem: Problem, test: Test, output: bytes) -> tuple[float, str]:
    request = {
        "input": test.input.decode("utf-8", "replace"),
        "output": output.decode("utf-8", "replace"),
        "answer": test.answer,
    }
    run = runner.run_python(
        problem.checker, stdin=json.dumps(request).encode(), limits=CHECKER_LIMITS, filename="checker.py"
    )
    lines = run.stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        fraction = float(lines[0].split()[0]) if run.ok and lines else None
    except ValueError:
        fraction = None
    if fraction is None or not 0.0 <= fraction <= 1.0:
        detail = _tail(run.stderr) or f"stdout {run.stdout[:100]!r}"
        raise JudgeError(f"{problem.path}: checker failed on test {test.name} (exit {run.returncode}): {detail}")
    return fraction, "\n".join(lines[1:])[:MESSAGE_CHARS]


def run_test(runner: Any, problem: Problem, code: str, test: Test) -> TestResult:
    """One test of one program on one sandbox worker."""
    run = runner.run_python(
        code,
        stdin=test.input,
        limits=test_limits(problem),
        filename="solution.py",
        recursion_limit=RECURSION_LIMIT,
        int_max_str_digits=0,
    )
    failed = _run_verdict(run)
    if failed is not None:
        return TestResult(test.name, failed[0], 0.0, round(run.seconds, 4), failed[1])
    if problem.checker is None:
        fraction, message = (1.0 if outputs_match(run.stdout_text, test.answer) else 0.0), ""
    else:
        fraction, message = _checker_fraction(runner, problem, test, run.stdout)
        if not problem.partial_score:
            fraction = 1.0 if fraction >= 1.0 else 0.0
    verdict = "AC" if fraction >= 1.0 else ("PC" if fraction > 0.0 else "WA")
    return TestResult(test.name, verdict, fraction, round(run.seconds, 4), message)


class _SharedTests:
    """Results of tests already run for one submission: a test in several subtasks (the same
    input and answer) runs once."""

    def __init__(self) -> None:
        self._results: dict[tuple[bytes, str], TestResult] = {}
        self._lock = threading.Lock()

    def run(self, runner: Any, problem: Problem, code: str, test: Test) -> TestResult:
        key = (test.input, test.answer)
        with self._lock:
            known = self._results.get(key)
        if known is not None:
            return TestResult(test.name, known.verdict, known.fraction, known.seconds, known.message)
        result = run_test(runner, problem, code, test)
        with self._lock:
            self._results[key] = result
        return result


def run_tests(
    runner: Any,
    problem: Problem,
    code: str,
    tests: Sequence[Test],
    stop_on_failure: bool = True,
    shared: _SharedTests | None = None,
) -> list[TestResult]:
    """Tests in order on one worker, stopping after the first that scores 0 (a pool job)."""
    shared = shared or _SharedTests()
    results = []
    for test in tests:
        result = shared.run(runner, problem, code, test)
        results.append(result)
        if stop_on_failure and result.fraction <= 0.0:
            break
    return results


def _compile_error(runner: Any, code: str) -> str | None:
    run = runner.run_python(COMPILE_CHECK, stdin=code.encode("utf-8", "surrogateescape"), limits=COMPILE_LIMITS)
    if run.ok:
        return None
    if run.timed_out or run.limit:
        return f"compilation stopped (limit: {run.limit or 'time'})"
    return _tail(run.stderr) or f"exit status {run.returncode}"


def subtask_result(subtask_name: str, points: float, tests: list[TestResult]) -> SubtaskResult:
    lowest = min((test.fraction for test in tests), default=0.0)
    failing = next((test for test in tests if test.fraction <= 0.0), None)
    if failing is not None:
        verdict = failing.verdict
    elif lowest < 1.0:
        verdict = "PC"
    else:
        verdict = "AC"
    return SubtaskResult(subtask_name, points, round(points * lowest, 6), verdict, tests)


# ----------------------------------------------------------------------------- the judge


class Judge:
    """Judges programs on problems, on ``pool`` (else its own pool of ``workers`` sandboxes)."""

    def __init__(self, pool: SandboxPool | None = None, *, workers: int | None = None, stop_on_failure: bool = True):
        self._own_pool = pool is None
        self.pool = pool if pool is not None else SandboxPool(workers)
        self.stop_on_failure = stop_on_failure

    def close(self) -> None:
        if self._own_pool:
            self.pool.close()

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _job(self, job: Any, *args: Any) -> Any:
        return await asyncio.wrap_future(self.pool.submit_job(job, *args))

    async def ajudge(self, problem: Problem, code: str) -> JudgeResult:
        """Compile, run every subtask (in parallel on the pool) and score the submission."""
        compile_error = await self._job(_compile_error, code)
        if compile_error is not None:
            subtasks = [SubtaskResult(s.name, s.points, 0.0, "CE") for s in problem.subtasks]
            return JudgeResult(0.0, problem.max_score, subtasks, compile_error)
        shared = _SharedTests()
        runs = await asyncio.gather(
            *(
                self._job(run_tests, problem, code, subtask.tests, self.stop_on_failure, shared)
                for subtask in problem.subtasks
            )
        )
        subtasks = [subtask_result(s.name, s.points, tests) for s, tests in zip(problem.subtasks, runs)]
        return JudgeResult(round(sum(s.score for s in subtasks), 6), problem.max_score, subtasks)

    def judge(self, problem: Problem, code: str) -> JudgeResult:
        """:meth:`ajudge` for synchronous callers."""
        return asyncio.run(self.ajudge(problem, code))

    async def arun_samples(self, problem: Problem, code: str, subtask: Subtask) -> list[TestResult]:
        """The samples that meet the subtask's constraints, in order, stopping at the first
        that scores 0."""
        samples = [problem.samples[i] for i in subtask.samples]
        if not samples:
            return []
        return await self._job(run_tests, problem, code, samples, True)


def passes_samples(problem: Problem, subtask: Subtask, results: Sequence[TestResult]) -> bool:
    """Every sample of the subtask accepted (partial-score problems: every one scores above 0)."""
    if len(results) < len(subtask.samples):
        return False
    if problem.partial_score:
        return all(result.fraction > 0.0 for result in results)
    return all(result.verdict == "AC" for result in results)


def verdict_line(result: SubtaskResult) -> str:
    """The official feedback of one subtask, as the prompt shows it: e.g. 'Wrong Answer on test 3'."""
    name = VERDICT_NAMES.get(result.verdict, result.verdict)
    position = result.failed_test
    return f"{name} on test {position}" if position is not None and result.verdict not in ("CE", "PC") else name
