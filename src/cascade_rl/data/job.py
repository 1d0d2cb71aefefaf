"""The machinery every ``cascade data`` command shares (SPEC sections 3-6: data built and filtered
row by row): read the input files in order, hand rows to the command in batches, append what it
keeps to the output JSONL, count what it drops and why, show a progress bar, and make the work
resumable.

**Resumable output.** Beside ``OUT.jsonl`` the job keeps ``OUT.jsonl.summary.json``: how many
input rows are done, how many bytes of the output they produced, the counts so far, and a
fingerprint of the command, its options and its inputs (path, size, modification time). It is
rewritten (atomically) after every batch. Run again after an interruption -- ``kill -9``
included -- the job cuts the output back to the recorded size (dropping a half-written line),
skips the rows already done and goes on; a finished job only reprints its summary. A summary
from other options or changed inputs is an error (``--overwrite`` starts again).

**Malformed rows** (invalid JSON, a row the command cannot read) stop the job with
:class:`~cascade_rl.data.rows.DataError` naming the file and line; with ``skip_malformed`` they
are counted under ``malformed: <reason>`` with an example location instead -- never skipped
silently. Commands that load models validate every row first (:func:`prevalidate`), so a bad
row fails before any compute.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cascade_rl.data.rows import DataError, Row, RowError, count_rows, iter_rows

STATE_SUFFIX = ".summary.json"


@dataclass
class Keep:
    """The command keeps the row as these output rows (usually one)."""

    rows: list[dict]


@dataclass
class Drop:
    """The command drops the row; ``reason`` is counted in the summary."""

    reason: str


Outcome = Keep | Drop
#: a command: a batch of rows in, one outcome per row out (RowError for a malformed row)
Process = Callable[[Sequence[Row]], Sequence[Outcome | RowError]]


@dataclass
class Summary:
    """What a job read, kept and dropped (and why), plus command-specific tables in ``extra``."""

    read: int = 0
    kept: int = 0
    written: int = 0
    dropped: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    done: bool = False
    seconds: float = 0.0

    def drop(self, reason: str, where: str) -> None:
        self.dropped[reason] += 1
        self.examples.setdefault(reason, where)

    def as_dict(self) -> dict:
        return {
            "read": self.read,
            "kept": self.kept,
            "written": self.written,
            "dropped": dict(self.dropped.most_common()),
            "examples": self.examples,
            "extra": self.extra,
            "done": self.done,
            "seconds": round(self.seconds, 3),
        }

    @classmethod
    def from_dict(cls, data: dict) -> Summary:
        return cls(
            data["read"],
            data["kept"],
            data["written"],
            Counter(data["dropped"]),
            dict(data["examples"]),
            dict(data.get("extra") or {}),
            bool(data["done"]),
            float(data.get("seconds", 0.0)),
        )

    def text(self) -> str:
        """One line: kept of read, then each drop reason with its count and an example."""
        line = f"{self.kept} of {self.read} rows kept ({self.written} written)"
        if self.dropped:
            reasons = "; ".join(
                f"{count} {reason} (e.g. {self.examples.get(reason, '?')})"
                for reason, count in self.dropped.most_common()
            )
            line += f"; dropped: {reasons}"
        return line


def fingerprint(command: str, options: dict[str, Any], inputs: Sequence[Path]) -> str:
    """Identity of a job: command, options and each input's path, size and modification time."""
    files = [(str(Path(p).resolve()), Path(p).stat().st_size, Path(p).stat().st_mtime_ns) for p in inputs]
    text = json.dumps([command, options, files], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def state_path(output: Path) -> Path:
    return output.with_name(output.name + STATE_SUFFIX)


def prevalidate(inputs: Sequence[Path], check: Callable[[dict], Any], *, skip_malformed: bool) -> int:
    """Run ``check`` on every row before any compute: the first malformed row raises
    :class:`DataError` naming its file and line (unless ``skip_malformed``). Returns the row count."""
    total = 0
    for path in inputs:
        for row in iter_rows(path, skip_malformed=skip_malformed):
            total += 1
            if row.error:
                continue
            try:
                check(row.data)
            except RowError as error:
                if not skip_malformed:
                    raise DataError(f"{row.where}: {error}") from None
    return total


def run_job(
    command: str,
    inputs: Sequence[Path],
    output: Path,
    process: Process,
    *,
    options: dict[str, Any] | None = None,
    batch_size: int = 256,
    skip_malformed: bool = False,
    overwrite: bool = False,
    warm: Callable[[dict], None] | None = None,
    total: int | None = None,
    progress: bool = True,
    extra: Callable[[], dict] | None = None,
) -> Summary:
    """Run ``process`` over the rows of ``inputs`` into ``output`` (module docstring).

    ``warm`` sees every row already in the output when a job resumes (dedup rebuilds its set of
    seen keys); ``extra`` returns the command's own tables for the summary after each batch."""
    inputs = [Path(p) for p in inputs]
    output = Path(output)
    if output.resolve() in {p.resolve() for p in inputs}:
        raise DataError(f"{output}: the output must not be one of the inputs")
    print_ = _Printer(progress)
    key = fingerprint(command, options or {}, inputs)
    summary, skip = _resume(output, key, overwrite, warm)
    if summary.done:
        print_(f"{output}: already complete ({summary.text()})")
        return summary
    output.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic() - summary.seconds
    bar = _bar(command, total if total is not None else sum(count_rows(p) for p in inputs), summary.read, progress)
    with open(output, "ab") as sink:
        for batch in _batches(_rows_after(inputs, skip), batch_size):
            lines = _apply(process, batch, summary, skip_malformed)
            sink.write(lines)
            sink.flush()
            summary.seconds = time.monotonic() - started
            if extra:
                summary.extra = extra()
            _save(output, key, summary, sink.tell())
            bar.update(len(batch))
        summary.done = True
        summary.seconds = time.monotonic() - started
        if extra:
            summary.extra = extra()
        _save(output, key, summary, sink.tell())
    bar.close()
    return summary


def _apply(process: Process, batch: list[Row], summary: Summary, skip_malformed: bool) -> bytes:
    """Outcomes of one batch folded into ``summary``; returns the output lines to append."""
    readable = [row for row in batch if not row.error]
    outcomes = iter(process(readable) if readable else [])
    out = []
    for row in batch:
        summary.read += 1
        outcome = RowError(row.error) if row.error else next(outcomes)
        if isinstance(outcome, RowError):
            if not skip_malformed:
                raise DataError(f"{row.where}: {outcome}")
            summary.drop(f"malformed: {outcome}", row.where)
        elif isinstance(outcome, Drop):
            summary.drop(outcome.reason, row.where)
        else:
            summary.kept += 1
            summary.written += len(outcome.rows)
            out += [json.dumps(data, ensure_ascii=False) + "\n" for data in outcome.rows]
    return "".join(out).encode("utf-8")


def _resume(output: Path, key: str, overwrite: bool, warm: Callable[[dict], None] | None) -> tuple[Summary, int]:
    """The summary to continue from and how many input rows to skip."""
    state_file = state_path(output)
    if overwrite or not state_file.exists():
        output.unlink(missing_ok=True)
        state_file.unlink(missing_ok=True)
        return Summary(), 0
    state = json.loads(state_file.read_text())
    if state.get("fingerprint") != key:
        raise DataError(
            f"{state_file}: written by another command, other options or other inputs; "
            "pass --overwrite to start again, or choose another output"
        )
    with open(output, "ab") as handle:  # drop whatever was written after the last saved batch
        handle.truncate(state["output_bytes"])
    summary = Summary.from_dict(state["summary"])
    if warm and not summary.done:
        with open(output, encoding="utf-8") as handle:
            for line in handle:
                warm(json.loads(line))
    return summary, summary.read


def _save(output: Path, key: str, summary: Summary, output_bytes: int) -> None:
    state = {"fingerprint": key, "output": str(output), "output_bytes": output_bytes, "summary": summary.as_dict()}
    target = state_path(output)
    temporary = target.with_name(target.name + ".tmp")
    temporary.write_text(json.dumps(state, indent=1, ensure_ascii=False))
    os.replace(temporary, target)


def _rows_after(inputs: Sequence[Path], skip: int) -> Iterator[Row]:
    """Rows after the first ``skip``; unreadable ones carry ``error`` (reported in order)."""
    seen = 0
    for path in inputs:
        for row in iter_rows(path, skip_malformed=True):
            seen += 1
            if seen > skip:
                yield row


def _batches(rows: Iterable[Row], size: int) -> Iterator[list[Row]]:
    batch: list[Row] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _bar(command: str, total: int, done: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, initial=done, desc=command, unit="row", disable=not enabled, file=sys.stderr)


class _Printer:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str) -> None:
        if self.enabled:
            print(text, file=sys.stderr)
