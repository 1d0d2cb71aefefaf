"""Convert a problem in the Kattis problem-package layout (problemtools, DOMjudge, many national
olympiads) into the ``problem.yaml`` format of :mod:`cascade_rl.tts.problem` (SPEC section 8).

What is read::

    <package>/problem.yaml                      name, type (pass-fail | scoring), limits.memory (MiB),
                                                limits.time_limit (seconds, 2023 layout), validation
    <package>/.timelimit                        time limit in seconds (written by problemtools / DOMjudge)
    <package>/problem_statement/problem.en.md   the statement (or statement/, problem.md, any .md, .tex)
    <package>/data/sample/*.in + *.ans          samples
    <package>/data/secret/*.in + *.ans          pass-fail: one subtask worth 100 points
    <package>/data/secret/<group>/*.in + *.ans  scoring: one subtask per test group, in natural order;
    <package>/data/secret/<group>/testdata.yaml its points: accept_score (legacy) or score

Subtasks are all-or-nothing, as Kattis' ``min`` grader scores a group. A package with a custom
output validator cannot be converted as is (Kattis validators use another protocol): pass
``checker`` (a checker in this project's protocol, see :mod:`cascade_rl.tts.judge`). The time
limit comes from ``time_limit`` when given, else ``.timelimit``, else ``limits.time_limit``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from cascade_rl.tts.problem import PROBLEM_FILE, Problem, ProblemError, load_problem

STATEMENT_CANDIDATES = (
    "problem_statement/problem.en.md",
    "statement/problem.en.md",
    "problem_statement/problem.md",
    "statement/problem.md",
)
DEFAULT_MEMORY_MB = 2048  # Kattis' default


def _natural(path: Path) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def _read_yaml(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise ProblemError(f"{path}: not valid YAML ({error})") from None
    if not isinstance(data, dict):
        raise ProblemError(f"{path}: expected a mapping")
    return data


def _statement(package: Path) -> Path:
    for relative in STATEMENT_CANDIDATES:
        if (package / relative).is_file():
            return package / relative
    for folder in ("problem_statement", "statement"):
        found = sorted((package / folder).glob("*.md")) + sorted((package / folder).glob("*.tex"))
        if found:
            return found[0]
    raise ProblemError(f"{package}: no statement (problem_statement/problem.en.md or .tex)")


def _time_limit(package: Path, config: dict, given: float | None) -> float:
    if given is not None:
        return given
    marker = package / ".timelimit"
    if marker.is_file():
        try:
            return float(marker.read_text().split()[0])
        except (ValueError, IndexError):
            raise ProblemError(f"{marker}: expected a number of seconds") from None
    limit = (config.get("limits") or {}).get("time_limit")
    if isinstance(limit, (int, float)) and limit > 0:
        return float(limit)
    raise ProblemError(f"{package}: no time limit (.timelimit or limits.time_limit); pass one (--time-limit)")


def _copy_tests(source: Path, target: Path, owner: Path) -> int:
    inputs = sorted(source.glob("*.in"), key=_natural)
    target.mkdir(parents=True, exist_ok=True)
    for input_file in inputs:
        answer = input_file.with_suffix(".ans")
        if not answer.is_file():
            raise ProblemError(f"{owner}: {input_file} has no .ans file")
        shutil.copyfile(input_file, target / input_file.name)
        shutil.copyfile(answer, target / answer.name)
    return len(inputs)


def _groups(package: Path) -> list[tuple[str, Path, float]]:
    """(name, directory, points) of each secret test group; one 100-point group for pass-fail."""
    secret = package / "data" / "secret"
    directories = sorted((d for d in secret.iterdir() if d.is_dir()), key=_natural) if secret.is_dir() else []
    if not directories:
        return [("1", secret, 100.0)]
    groups = []
    for directory in directories:
        settings = _read_yaml(directory / "testdata.yaml")
        points = settings.get("accept_score", settings.get("score"))
        if not isinstance(points, (int, float)) or points <= 0:
            raise ProblemError(f"{directory / 'testdata.yaml'}: accept_score: a test group needs its points")
        groups.append((directory.name, directory, float(points)))
    return groups


def convert_kattis(
    package: str | Path,
    target: str | Path,
    *,
    problem_id: str | None = None,
    time_limit: float | None = None,
    checker: str | Path | None = None,
    partial_score: bool = False,
) -> Problem:
    """Write ``target/problem.yaml`` (with statement and tests) from a Kattis package; returns
    the converted problem, loaded and validated."""
    package, target = Path(package), Path(target)
    config = _read_yaml(package / "problem.yaml")
    custom = str(config.get("validation", "default")).startswith("custom")
    if custom and checker is None:
        raise ProblemError(
            f"{package / 'problem.yaml'}: validation: custom output validators are not converted; "
            "write a checker (docs/tts.md) and pass it (--checker)"
        )
    target.mkdir(parents=True, exist_ok=True)
    statement = _statement(package)
    shutil.copyfile(statement, target / f"statement{statement.suffix}")
    spec: dict[str, Any] = {
        "id": problem_id or package.resolve().name,
        "title": str(config.get("name") or package.resolve().name),
        "statement": f"statement{statement.suffix}",
        "time_limit_s": _time_limit(package, config, time_limit),
        "memory_mb": int((config.get("limits") or {}).get("memory", DEFAULT_MEMORY_MB)),
    }
    if _copy_tests(package / "data" / "sample", target / "samples", package):
        spec["samples"] = ["samples/*.in"]
    subtasks = []
    for name, directory, points in _groups(package):
        if not _copy_tests(directory, target / "tests" / name, package):
            raise ProblemError(f"{package}: data/secret: test group {name} has no .in files")
        subtasks.append(
            {"name": name, "points": points, "constraints": f"Test group {name}", "tests": [f"tests/{name}/*.in"]}
        )
    spec["subtasks"] = subtasks
    if checker is not None:
        shutil.copyfile(checker, target / "checker.py")
        spec["checker"] = "checker.py"
        spec["partial_score"] = partial_score
    (target / PROBLEM_FILE).write_text(
        f"# converted from the Kattis package {package}\n" + yaml.safe_dump(spec, sort_keys=False), encoding="utf-8"
    )
    return load_problem(target)
