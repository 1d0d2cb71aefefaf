"""The run directory of ``cascade tts``: what is saved as it happens, so that a run killed at
any moment (``kill -9`` included) resumes without making a generation twice (SPEC section 8).

Per problem, ``<out>/<problem id>/`` holds two append-only logs, the source of truth:

* ``generations.jsonl``: every generation, written (and flushed to the kernel) as soon as it
  arrives: ``round``, ``subtask`` (0-based index), ``index`` (0-based within the round and
  subtask), ``text``, ``confidence``;
* ``steps.jsonl``: one row per (round, subtask) once its candidates were filtered and its
  submission judged (or skipped), with the submission and every verdict;

and files rebuilt from them after every round: ``submissions.jsonl`` (each submission with its
per-subtask and per-test verdicts), ``trajectory.jsonl`` (score, budgets used, after each
round) and ``summary.json``. A line cut short by a kill is dropped on reading (and cut off the
file); a bad line anywhere else is an error naming the file and line. ``<out>/run.json``
records the options and each problem's digest: resuming with a changed problem is refused.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class RunDirError(ValueError):
    """A run directory that cannot be resumed; the message names the file (and line)."""


def read_jsonl(path: Path) -> list[dict]:
    """Rows of an append-only log; a torn last line (a kill mid-write) is cut off the file."""
    if not path.is_file():
        return []
    data = path.read_bytes()
    rows: list[dict] = []
    position = 0
    for number, line in enumerate(data.split(b"\n"), 1):
        end = position + len(line)
        complete = end < len(data)  # followed by a newline
        if line.strip():
            try:
                row = json.loads(line) if complete else None
            except ValueError:
                row = None
            if row is None or not isinstance(row, dict):
                if data[end + 1 :].strip():
                    raise RunDirError(f"{path}:{number}: not a JSON object; the log is damaged")
                with open(path, "r+b") as handle:  # torn tail: drop it so appends stay valid
                    handle.truncate(position)
                break
            rows.append(row)
        position = end + 1
    return rows


def write_atomic(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def jsonl_text(rows: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


class ProblemLog:
    """The files of one problem's run (module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.generations_path = directory / "generations.jsonl"
        self.steps_path = directory / "steps.jsonl"
        self.generations = read_jsonl(self.generations_path)
        self.steps = read_jsonl(self.steps_path)

    def _append(self, path: Path, row: dict) -> None:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            handle.flush()

    def add_generation(self, row: dict) -> None:
        self._append(self.generations_path, row)
        self.generations.append(row)

    def add_step(self, row: dict) -> None:
        self._append(self.steps_path, row)
        self.steps.append(row)

    def generations_for(self, round_number: int, subtask: int) -> list[dict]:
        rows = [g for g in self.generations if g["round"] == round_number and g["subtask"] == subtask]
        return sorted(rows, key=lambda g: g["index"])

    def generations_before(self, round_number: int) -> int:
        return sum(1 for g in self.generations if g["round"] < round_number)

    def write_outputs(self, submissions: list[dict], trajectory: list[dict], summary: dict[str, Any]) -> None:
        write_atomic(self.directory / "submissions.jsonl", jsonl_text(submissions))
        write_atomic(self.directory / "trajectory.jsonl", jsonl_text(trajectory))
        write_atomic(self.directory / "summary.json", json.dumps(summary, indent=2) + "\n")


def check_run_file(out: Path, config: dict[str, Any], digests: dict[str, str]) -> None:
    """Write ``run.json``, or check that a resumed run has the same problems (digests)."""
    path = out / "run.json"
    if path.is_file():
        try:
            previous = json.loads(path.read_text())
        except ValueError as error:
            raise RunDirError(f"{path}: not valid JSON ({error})") from None
        for problem_id, digest in digests.items():
            old = (previous.get("problems") or {}).get(problem_id)
            if old is not None and old != digest:
                raise RunDirError(
                    f"{path}: problems.{problem_id}: the problem changed since this run started "
                    "(its files differ); use a new --out directory"
                )
        digests = {**(previous.get("problems") or {}), **digests}
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({"config": config, "problems": digests}, indent=2) + "\n")
