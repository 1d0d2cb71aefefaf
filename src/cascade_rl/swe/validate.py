"""Patch validation (SPEC section 7.3 a-b): regression and reproduction tests, and the gold
tests for pass@k, all run in the sandbox in throw-away copies of the repository.

* The repository tree at the base commit is exported once (``git archive``) into a scratch
  directory; every job copies it, applies its patches with ``git apply`` and runs its
  programs in a bubblewrap sandbox (:mod:`cascade_rl.sandbox`) that sees only that copy. Jobs
  run on a bounded :class:`~cascade_rl.sandbox.SandboxPool`; the user's checkout is never
  touched and the scratch directory (in the system's temporary directory unless
  ``scratch_root`` says otherwise) is removed at the end.
* **Regression**: the repository's own test suite (``python -m pytest`` with the current
  interpreter, so pure-Python repositories whose dependencies are installed) runs once on the
  unpatched copy; the tests that pass there are run on every candidate, and a candidate that
  fails any of them "breaks regression".
* **Reproduction**: generated test scripts (appendix C.2 prompt) run on the unpatched copy;
  those printing "Issue reproduced" are kept and run on every candidate, where printing
  "Issue resolved" counts as passing.
* **Gold** (where the instance has FAIL_TO_PASS / PASS_TO_PASS): the candidate plus the
  instance's ``test_patch``; resolved iff every listed test passes. Gold results never feed
  the selection, only pass@k and the report.

Test outcomes come from pytest's ``-rA`` summary lines; PASSED and XFAIL count as passing, a
test without a line (not run, crashed run, timeout) as failing. Identical patches are run once.
"""

from __future__ import annotations

import ast
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cascade_rl.chat import split_thinking
from cascade_rl.sandbox import Limits, RunResult, SandboxError, SandboxPool, SandboxServer
from cascade_rl.swe.repo import Repository, RepositoryError, apply_patch_to_tree, copy_tree

REPRODUCED, RESOLVED, OTHER = "Issue reproduced", "Issue resolved", "Other issues"
PYTEST_ARGS = ("-m", "pytest", "-rA", "-p", "no:cacheprovider", "--color=no", "-q")
PASSING = frozenset({"PASSED", "XFAIL"})
SCRIPT_NAME = "_cascade_reproduction_test.py"
_SUMMARY_RE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS) (\S.*?)(?: - .*)?$")
_PYTHON_BLOCK_RE = re.compile(r"```python[^\n]*\n(.*?)```", re.S)
_TAIL = 2000  # characters of program output kept in traces


def parse_pytest_summary(output: str) -> dict[str, str]:
    """{test id: status} from the ``-rA`` short summary of a pytest run."""
    statuses = {}
    for line in output.splitlines():
        match = _SUMMARY_RE.match(line.strip())
        if match:
            statuses[match.group(2)] = match.group(1)
    return statuses


@dataclass
class TestRun:
    """One pytest run: per-test statuses and how the run ended."""

    statuses: dict[str, str] = field(default_factory=dict)
    returncode: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    error: str | None = None

    def passing(self) -> set[str]:
        return {test for test, status in self.statuses.items() if status in PASSING}

    def failing(self, tests: Iterable[str]) -> list[str]:
        passing = self.passing()
        return [test for test in tests if test not in passing]


@dataclass
class ReproductionTest:
    """A generated reproduction test and what it did on the unpatched repository."""

    index: int
    response: str
    code: str | None
    status: str  # kept | unparseable | not_reproducing | failed_to_run
    output: str = ""
    error: str | None = None

    @property
    def kept(self) -> bool:
        return self.status == "kept"


@dataclass
class CandidateValidation:
    """The tests one patch went through (lists of test ids that failed)."""

    patch: str
    regression_failed: list[str] = field(default_factory=list)
    regression_total: int = 0
    reproduction_resolved: list[bool] = field(default_factory=list)
    gold_failed: list[str] | None = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def regression_ok(self) -> bool:
        return self.error is None and not self.regression_failed

    @property
    def pass_rate(self) -> float:
        """(regression tests passed + reproduction tests resolved) / all of them."""
        total = self.regression_total + len(self.reproduction_resolved)
        if self.error is not None or total == 0:
            return 0.0
        passed = self.regression_total - len(self.regression_failed) + sum(self.reproduction_resolved)
        return passed / total

    @property
    def resolved(self) -> bool | None:
        return None if self.gold_failed is None else (self.error is None and not self.gold_failed)

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "regression_ok": self.regression_ok,
            "pass_rate": self.pass_rate,
            "resolved": self.resolved,
        }


def extract_test_script(response: str) -> str | None:
    """The last ```python block of a reproduction-test answer, if it parses as Python."""
    split = split_thinking(response)
    blocks = _PYTHON_BLOCK_RE.findall(split.answer) if split.finished else []
    if not blocks:
        return None
    try:
        ast.parse(blocks[-1])
    except (SyntaxError, ValueError):
        return None
    return blocks[-1]


class Validator:
    """Runs tests for one repository commit in sandboxed throw-away copies (module docstring).

    Use as a context manager (or call :meth:`close`) so the scratch directory is removed.
    """

    def __init__(
        self,
        repo: Repository,
        *,
        pool: SandboxPool | None = None,
        workers: int = 2,
        test_limits: Limits = Limits(time_s=300, memory_mb=4096, processes=128),
        script_limits: Limits = Limits(time_s=60, memory_mb=4096, processes=128),
        scratch_root: Path | None = None,
        python: str = sys.executable,
    ):
        self.repo = repo
        self.test_limits, self.script_limits, self.python = test_limits, script_limits, python
        self._own_pool = pool is None
        self.pool = pool or SandboxPool(workers)
        self.scratch = Path(tempfile.mkdtemp(prefix="cascade-swe-", dir=scratch_root))
        self.base = repo.export(self.scratch / "base")

    def close(self) -> None:
        if self._own_pool:
            self.pool.close()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> Validator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- jobs

    def _fresh_copy(self, patches: Sequence[str]) -> Path:
        copy = copy_tree(self.base, Path(tempfile.mkdtemp(dir=self.scratch)) / "repo")
        for patch in patches:
            apply_patch_to_tree(copy, patch)
        return copy

    def _job(self, patches: Sequence[str], work: Callable[[SandboxServer, Path], object]) -> Future:
        """Run ``work(server, copy)`` on a pool worker in a fresh patched copy, with one
        sandbox that sees only that copy; the copy is removed afterwards. The future's value
        is ``(work's result, seconds the job took)``."""

        def job(_runner) -> tuple[object, float]:
            start = time.perf_counter()
            copy = self._fresh_copy(patches)
            try:
                with SandboxServer(limits=self.test_limits, workdir=copy) as server:
                    return work(server, copy), time.perf_counter() - start
            finally:
                shutil.rmtree(copy.parent, ignore_errors=True)

        return self.pool.submit_job(job)

    def _pytest(self, server: SandboxServer, tests: Sequence[str] | None) -> TestRun:
        if tests is not None and not tests:
            return TestRun(returncode=0)
        result = server.run([self.python, *PYTEST_ARGS, *(tests or [])], limits=self.test_limits)
        return TestRun(
            parse_pytest_summary(result.stdout_text), result.returncode, result.timed_out, result.seconds, result.error
        )

    def _script(self, server: SandboxServer, copy: Path, code: str) -> RunResult:
        (copy / SCRIPT_NAME).write_text(code)
        return server.run([self.python, SCRIPT_NAME], limits=self.script_limits)

    # -- the three kinds of validation

    def baseline_tests(self) -> Future:
        """Future of (the :class:`TestRun` of the whole suite on the unpatched copy, seconds)."""
        return self._job([], lambda server, copy: self._pytest(server, None))

    def check_reproduction_tests(self, responses: Sequence[str]) -> list[ReproductionTest]:
        """Run each generated test on the unpatched copy; keep those that reproduce the issue."""
        tests = []
        futures: dict[int, Future] = {}
        for index, response in enumerate(responses):
            code = extract_test_script(response)
            tests.append(ReproductionTest(index, response, code, "unparseable" if code is None else "pending"))
            if code is not None:
                futures[index] = self._job([], lambda s, c, code=code: self._script(s, c, code))
        for index, future in futures.items():
            test = tests[index]
            try:
                result, _ = future.result()
            except (RepositoryError, SandboxError, OSError) as error:
                test.status, test.error = "failed_to_run", str(error)
                continue
            test.output = (result.stdout_text + result.stderr_text)[-_TAIL:]
            if result.timed_out or result.error:
                test.status, test.error = "failed_to_run", result.error or "timed out"
            else:
                test.status = "kept" if REPRODUCED in result.stdout_text else "not_reproducing"
        return tests

    def validate(
        self,
        patches: Sequence[str],
        regression: Sequence[str],
        reproduction: Sequence[str],
        *,
        test_patch: str | None = None,
        gold_tests: Sequence[str] | None = None,
    ) -> dict[str, CandidateValidation]:
        """Validate each distinct patch: ``regression`` test ids, ``reproduction`` scripts and,
        when ``gold_tests`` are given, the gold tests with ``test_patch`` applied. Returns
        {patch: CandidateValidation}; all jobs run concurrently on the pool."""
        distinct = list(dict.fromkeys(p for p in patches if p))
        checks = {p: self._job([p], lambda s, c: self._check(s, c, regression, reproduction)) for p in distinct}
        golds = (
            {p: self._job([p, test_patch or ""], lambda s, c: self._pytest(s, list(gold_tests))) for p in distinct}
            if gold_tests
            else {}
        )
        results = {}
        for patch in distinct:
            validation = CandidateValidation(patch, regression_total=len(regression))
            try:
                (run, resolved), seconds = checks[patch].result()
                validation.regression_failed = run.failing(regression)
                validation.reproduction_resolved = resolved
                validation.seconds = round(seconds, 3)
            except (RepositoryError, SandboxError) as error:
                validation.error = str(error)
                validation.regression_failed = list(regression)
            if patch in golds:
                validation.gold_failed = _gold_failures(golds[patch], gold_tests or [])
            results[patch] = validation
        return results

    def _check(
        self, server: SandboxServer, copy: Path, regression: Sequence[str], reproduction: Sequence[str]
    ) -> tuple[TestRun, list[bool]]:
        run = self._pytest(server, list(regression))
        resolved = []
        for code in reproduction:
            result = self._script(server, copy, code)
            resolved.append(RESOLVED in result.stdout_text and REPRODUCED not in result.stdout_text)
        return run, resolved


def _gold_failures(future: Future, gold_tests: Sequence[str]) -> list[str]:
    """The gold tests a candidate fails (all of them when its run could not happen, e.g. the
    test patch does not apply on top of it)."""
    try:
        run, _ = future.result()
    except (RepositoryError, SandboxError):
        return list(gold_tests)
    return run.failing(gold_tests)
