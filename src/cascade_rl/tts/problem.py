"""Problems with subtasks for the test-time-scaling loop (SPEC section 8): the on-disk format,
its validation, and loading.

A problem is a directory holding ``problem.yaml`` (format in docs/tts.md)::

    id: max-rectangle                  # unique within a run; [A-Za-z0-9_.-]
    title: Maximum Rectangle
    statement: statement.md            # file shown to the model (samples are appended to it)
    time_limit_s: 1.0                  # CPU seconds per test
    memory_mb: 256                     # address space per process
    samples:                           # the statement's examples: candidates must pass them
      - {input: "1 3\\n1 -2 3\\n", output: "3\\n"}
    subtasks:
      - points: 40
        constraints: "N = 1, 1 <= M <= 100000"
        tests: ["tests/1-*.in"]        # globs of input files; expected output: same stem, .out or .ans
        samples: [1]                   # the samples that meet these constraints (default: all)
      - points: 60
        constraints: "1 <= N, M <= 80"
        tests: ["tests/1-*.in", "tests/2-*.in"]   # tests may be shared between subtasks
    checker: checker.py                # optional: a program that scores an output (judge.py)
    partial_score: false               # true: the checker gives fractions; subtask score = points x min

Tests and samples are each either a glob (relative to the problem directory) or an inline
``{input, output}`` pair. Loading checks everything before any compute: an unknown field, a
missing file, a glob that matches nothing or a subtask without tests is one
:class:`ProblemError` line naming the file and the field.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

PROBLEM_FILE = "problem.yaml"
ANSWER_SUFFIXES = (".out", ".ans")
SHIPPED_DIR = Path(__file__).resolve().parent / "problems"
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class ProblemError(ValueError):
    """A problem that cannot be used; the message is one line naming the file and the field."""


# ----------------------------------------------------------------------------- file schema


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InlineTest(_Strict):
    input: str
    output: str


TestSource = str | InlineTest


class SubtaskSpec(_Strict):
    name: str | int | None = Field(None, description="Shown in prompts and reports; default: the 1-based index.")
    points: float = Field(gt=0, description="Points for passing every test of the subtask.")
    constraints: str = Field("", description="The subtask's constraints, shown in its prompt.")
    tests: list[TestSource] = Field(min_length=1, description="Globs of input files or inline {input, output}.")
    samples: list[int] | None = Field(
        None, description="1-based numbers of the problem's samples that meet this subtask's constraints; default all."
    )


class ProblemSpec(_Strict):
    id: str
    title: str = ""
    statement: str = Field(description="Statement file, relative to the problem directory.")
    time_limit_s: float = Field(gt=0, description="CPU seconds per test.")
    memory_mb: int = Field(gt=0, description="Address space per process, MiB.")
    samples: list[TestSource] = Field(default_factory=list, description="The statement's examples.")
    subtasks: list[SubtaskSpec] = Field(min_length=1)
    checker: str | None = Field(None, description="Checker program (Python), relative to the problem directory.")
    partial_score: bool = Field(False, description="The checker awards fractions of a test.")


# ----------------------------------------------------------------------------- loaded problem


@dataclass(frozen=True)
class Test:
    __test__ = False  # not a pytest class

    name: str
    input: bytes
    answer: str


@dataclass(frozen=True)
class Subtask:
    index: int  # 0-based position in the problem
    name: str
    points: float
    constraints: str
    tests: tuple[Test, ...]
    samples: tuple[int, ...]  # 0-based positions of the problem's samples that meet its constraints


@dataclass(frozen=True)
class Problem:
    id: str
    title: str
    statement: str
    time_limit_s: float
    memory_mb: int
    samples: tuple[Test, ...]
    subtasks: tuple[Subtask, ...]
    checker: str | None  # the checker's source
    partial_score: bool
    path: Path  # the problem.yaml
    digest: str  # sha256 over everything the judge and the prompts read

    @property
    def max_score(self) -> float:
        return sum(subtask.points for subtask in self.subtasks)


def _field(location: tuple[Any, ...]) -> str:
    text = ""
    for part in location:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _most_telling(errors: list[dict]) -> dict:
    """An unknown field first, then a missing one; a union's failed ``str`` branch last."""
    for wanted in ("extra_forbidden", "missing"):
        found = next((e for e in errors if e["type"] == wanted), None)
        if found:
            return found
    return next((e for e in errors if "str" not in e["loc"]), errors[0])


def _one_line(error: ValidationError, path: Path) -> ProblemError:
    first = _most_telling(error.errors())
    location = tuple(part for part in first["loc"] if part not in ("str", "InlineTest"))
    if first["type"] == "extra_forbidden":
        known = ", ".join(ProblemSpec.model_fields) if len(location) == 1 else None
        message = f"unknown field '{location[-1]}'" + (f" (known: {known})" if known else "")
        location = location[:-1]
    else:
        message = first["msg"]
    more = len(error.errors()) - 1
    suffix = f" (and {more} more problem(s))" if more else ""
    where = f"{path}: {_field(location)}: " if location else f"{path}: "
    return ProblemError(f"{where}{message}{suffix}")


def _read_text(path: Path, owner: Path, field: str) -> str:
    if not path.is_file():
        raise ProblemError(f"{owner}: {field}: file {path} does not exist")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ProblemError(f"{owner}: {field}: cannot read {path} ({error})") from None


def _answer_file(input_file: Path) -> Path | None:
    return next((input_file.with_suffix(s) for s in ANSWER_SUFFIXES if input_file.with_suffix(s).is_file()), None)


def _load_tests(sources: list[TestSource], root: Path, owner: Path, field: str) -> tuple[Test, ...]:
    tests: list[Test] = []
    for position, source in enumerate(sources):
        where = f"{field}[{position}]"
        if isinstance(source, InlineTest):
            tests.append(Test(f"{field}#{position + 1}", source.input.encode("utf-8"), source.output))
            continue
        matches = sorted(p for p in root.glob(source) if p.is_file() and p.suffix not in ANSWER_SUFFIXES)
        if not matches:
            raise ProblemError(f"{owner}: {where}: pattern {source!r} matches no input file under {root}")
        for input_file in matches:
            answer = _answer_file(input_file)
            if answer is None:
                raise ProblemError(f"{owner}: {where}: {input_file} has no expected output (.out or .ans)")
            name = input_file.relative_to(root).with_suffix("").as_posix()
            tests.append(Test(name, input_file.read_bytes(), _read_text(answer, owner, where)))
    return tuple(tests)


def _sample_positions(numbers: list[int] | None, count: int, owner: Path, index: int) -> tuple[int, ...]:
    if numbers is None:
        return tuple(range(count))
    for number in numbers:
        if not 1 <= number <= count:
            raise ProblemError(
                f"{owner}: subtasks[{index}].samples: no sample number {number} (the problem has {count})"
            )
    return tuple(number - 1 for number in numbers)


def _digest(spec_text: str, statement: str, checker: str | None, groups: list[tuple[Test, ...]]) -> str:
    hasher = hashlib.sha256()
    for part in (spec_text, statement, checker or ""):
        hasher.update(part.encode("utf-8") + b"\0")
    for tests in groups:
        for test in tests:
            hasher.update(test.name.encode() + b"\0" + test.input + b"\0" + test.answer.encode() + b"\0")
    return hasher.hexdigest()


def load_problem(path: str | Path) -> Problem:
    """Read and validate one problem (a ``problem.yaml`` or its directory)."""
    path = Path(path)
    if path.is_dir():
        path = path / PROBLEM_FILE
    if not path.is_file():
        raise ProblemError(f"{path}: no such problem file")
    root = path.parent
    spec_text = _read_text(path, path, "file")
    try:
        raw = yaml.safe_load(spec_text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        raise ProblemError(f"{path}:{line}: not valid YAML ({getattr(error, 'problem', error)})") from None
    if not isinstance(raw, dict):
        raise ProblemError(f"{path}: expected a mapping of fields, got {type(raw).__name__}")
    try:
        spec = ProblemSpec.model_validate(raw)
    except ValidationError as error:
        raise _one_line(error, path) from None
    if not _ID.fullmatch(spec.id):
        raise ProblemError(f"{path}: id: {spec.id!r} must be letters, digits, '_', '.', '-' (a directory name)")
    if spec.partial_score and spec.checker is None:
        raise ProblemError(f"{path}: partial_score: a partial-score problem needs a checker to award fractions")
    statement = _read_text(root / spec.statement, path, "statement")
    checker = _read_text(root / spec.checker, path, "checker") if spec.checker else None
    samples = _load_tests(spec.samples, root, path, "samples")
    subtasks = tuple(
        Subtask(
            index,
            str(sub.name if sub.name is not None else index + 1),
            float(sub.points),
            sub.constraints.strip(),
            _load_tests(sub.tests, root, path, f"subtasks[{index}].tests"),
            _sample_positions(sub.samples, len(samples), path, index),
        )
        for index, sub in enumerate(spec.subtasks)
    )
    names = [subtask.name for subtask in subtasks]
    if len(set(names)) != len(names):
        raise ProblemError(f"{path}: subtasks: names must be unique, got {names}")
    digest = _digest(spec_text, statement, checker, [samples, *(s.tests for s in subtasks)])
    return Problem(
        spec.id,
        spec.title or spec.id,
        statement.strip(),
        float(spec.time_limit_s),
        int(spec.memory_mb),
        samples,
        subtasks,
        checker,
        spec.partial_score,
        path,
        digest,
    )


def shipped_problems() -> list[Path]:
    """The problem files shipped with cascade_rl (docs/tts.md: the demo set)."""
    return sorted(SHIPPED_DIR.glob(f"*/{PROBLEM_FILE}"))


def problem_files(reference: str | Path) -> list[Path]:
    """The problem files a command-line reference names: a ``problem.yaml``, a problem
    directory, a directory of problem directories, or the id of a shipped problem."""
    path = Path(reference)
    if path.is_file():
        return [path]
    if (path / PROBLEM_FILE).is_file():
        return [path / PROBLEM_FILE]
    if path.is_dir():
        found = sorted(path.glob(f"*/{PROBLEM_FILE}"))
        if found:
            return found
        raise ProblemError(f"{path}: no {PROBLEM_FILE} in it or in its sub-directories")
    shipped = SHIPPED_DIR / str(reference) / PROBLEM_FILE
    if shipped.is_file():
        return [shipped]
    known = ", ".join(p.parent.name for p in shipped_problems())
    raise ProblemError(f"{reference}: no such problem file or directory, nor a shipped problem ({known})")


def load_problems(references: list[str | Path]) -> list[Problem]:
    """Every problem the references name, validated; ids must be unique."""
    problems: list[Problem] = []
    seen: dict[str, Path] = {}
    for reference in references:
        for path in problem_files(reference):
            problem = load_problem(path)
            if problem.id in seen:
                raise ProblemError(f"{path}: id: {problem.id!r} is also the id of {seen[problem.id]}")
            seen[problem.id] = path
            problems.append(problem)
    if not problems:
        raise ProblemError("no problems given")
    return problems
