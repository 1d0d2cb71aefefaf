"""Reading stage data: local JSONL / JSON / Parquet rows (a file, a directory of them or a glob
pattern), validated per stage kind (SPEC 3-6).

Malformed rows never crash a stage: each is counted with its reason and skipped, and the
stage prints a summary (:class:`LoadReport`). Upsampling factors of the recipe are applied
here (SPEC 3: SWE data 3x, science 2x in SFT stage 2).

Rows are normalised into the shapes of docs/data-formats.md: chat prompts become message
lists; HelpSteer3-style preference rows become (prompt, chosen, rejected) with ties dropped.
An RL or benchmark row's ``tools`` are written into its prompt's system message
(:func:`cascade_rl.chat.with_tools`), so the model sees them however the prompt is rendered;
SFT rows keep ``tools`` as a column, which the template renders the same way.

A source's ``drop_topics`` leaves out the rows whose prompt is of those topics (math, code:
:mod:`cascade_rl.data.topics`, the rule of ``cascade data classify``; SPEC 6 keeps math and
competitive programming out of RLHF prompts), each counted as ``topic math`` / ``topic code``.

Training data can be screened while it is read (:func:`screening`): the cascade drops every
training row that shares an n-gram with one of the recipe's benchmarks (SPEC 3,
:mod:`cascade_rl.train.decontaminate`); each dropped row is counted in the report like a
malformed one. Benchmarks themselves are read unscreened.
"""

from __future__ import annotations

import contextvars
import json
import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cascade_rl.chat import with_tools
from cascade_rl.data.formats import converted
from cascade_rl.data.rows import count_rows, data_files, json_list, prompt_text, rename_fields
from cascade_rl.data.shapes import ROLES, as_messages, normalise_preference, normalise_sft
from cascade_rl.data.topics import classify
from cascade_rl.recipe import DataSource, expand
from cascade_rl.rewards.registry import check_row, get_domain

__all__ = [
    "ROLES",
    "LoadReport",
    "as_messages",
    "load_source",
    "load_sources",
    "normalise_preference",
    "normalise_sft",
    "read_rows",
    "resolve_path",
    "rl_normaliser",
    "screening",
    "upsample",
]


@dataclass
class LoadReport:
    """How many rows each source gave and why the others were skipped."""

    read: int = 0
    kept: int = 0
    skipped: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def skip(self, reason: str, where: str) -> None:
        self.skipped[reason] += 1
        self.examples.setdefault(reason, where)

    def merge(self, other: LoadReport) -> None:
        self.read += other.read
        self.kept += other.kept
        self.skipped.update(other.skipped)
        for reason, where in other.examples.items():
            self.examples.setdefault(reason, where)

    def summary(self) -> str:
        text = f"{self.kept} of {self.read} rows kept"
        if self.skipped:
            reasons = "; ".join(
                f"{count} {reason} (e.g. {self.examples[reason]})" for reason, count in self.skipped.most_common()
            )
            text += f", skipped: {reasons}"
        return text


def resolve_path(path: str, variables: dict[str, str] | None = None) -> Path:
    return Path(expand(path, variables)).expanduser()


def read_rows(path: Path, report: LoadReport) -> Iterator[tuple[str, Any]]:
    """Yield ``(where, row)`` from the JSONL / JSON / Parquet files ``path`` names (a file, a
    directory of them or a glob pattern: :func:`cascade_rl.data.rows.data_files`); invalid JSON
    lines are reported."""
    files = data_files(path)
    if not files or not files[0].exists():
        raise FileNotFoundError(f"data file not found: {path}")
    for file in files:
        yield from _file_rows(file, report)


def _file_rows(path: Path, report: LoadReport) -> Iterator[tuple[str, Any]]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        for index, row in enumerate(pq.read_table(path).to_pylist(), start=1):
            report.read += 1
            yield f"{path.name}:{index}", row
        return
    listed = json_list(path)
    if listed is not None:
        for index, row in enumerate(listed, start=1):
            report.read += 1
            yield f"{path.name}:{index}", row
        return
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            report.read += 1
            where = f"{path.name}:{number}"
            try:
                yield where, json.loads(line)
            except json.JSONDecodeError:
                report.skip("invalid JSON", where)


def load_source(
    source: DataSource, normalise: Callable[[dict], dict], *, seed: int = 0, variables: dict[str, str] | None = None
) -> tuple[list[dict], LoadReport]:
    """Read one source, rename its fields, convert each row from the source's public ``format``
    (if any), normalise it (a ``ValueError`` skips the row with that reason), then apply
    ``limit`` and ``upsample``."""
    report = LoadReport()
    rows = []
    normalise = converted(
        source.format,
        source.format_options,
        normalise,
        where=f"data source {source.path}",
        resolve=lambda path: resolve_path(path, variables),
    )
    wheres = []
    for where, row in read_rows(resolve_path(source.path, variables), report):
        if not isinstance(row, dict):
            report.skip("row is not a JSON object", where)
            continue
        rename_fields(row, source.fields)
        try:
            rows.append(normalise(row))
            wheres.append(where)
        except ValueError as error:
            report.skip(str(error), where)
    if source.drop_topics:
        rows, wheres = _off_topics(rows, wheres, source.drop_topics, report)
    screen = _SCREEN.get()
    if screen is not None:
        rows = _screened(rows, wheres, screen, report)
    if source.limit is not None:
        rows = rows[: source.limit]
    rows = upsample(rows, source.upsample, seed)
    report.kept = len(rows)
    return rows, report


# (rows) -> per row, why it must not be trained on (None: keep it)
Screen = Callable[[Sequence[dict]], list[str | None]]
_SCREEN: contextvars.ContextVar[Screen | None] = contextvars.ContextVar("training_screen", default=None)


@contextmanager
def screening(screen: Screen | None) -> Iterator[None]:
    """Every source read inside the block is screened by ``screen`` before ``limit`` applies,
    so a source's ``limit`` still counts rows that may be trained on."""
    token = _SCREEN.set(screen)
    try:
        yield
    finally:
        _SCREEN.reset(token)


def _screened(rows: list[dict], wheres: list[str], screen: Screen, report: LoadReport) -> list[dict]:
    kept = []
    for row, where, reason in zip(rows, wheres, screen(rows)):
        if reason is None:
            kept.append(row)
        else:
            report.skip(reason, where)
    return kept


def _off_topics(
    rows: list[dict], wheres: list[str], topics: Sequence[str], report: LoadReport
) -> tuple[list[dict], list[str]]:
    """``rows`` (and where each was read) without those whose prompt is of one of ``topics``
    (:func:`cascade_rl.data.topics.classify`), each left out counted as ``topic NAME``."""
    kept, kept_wheres = [], []
    for row, where in zip(rows, wheres):
        topic = classify(prompt_text(row)).topic
        if topic in topics:
            report.skip(f"topic {topic}", where)
        else:
            kept.append(row)
            kept_wheres.append(where)
    return kept, kept_wheres


def load_sources(
    sources: Iterable[DataSource],
    normalise: Callable[[dict], dict],
    *,
    seed: int = 0,
    variables: dict[str, str] | None = None,
) -> tuple[list[dict], LoadReport]:
    return load_routed_sources(sources, lambda _: normalise, seed=seed, variables=variables)


def load_routed_sources(
    sources: Iterable[DataSource],
    normaliser_of: Callable[[DataSource], Callable[[dict], dict]],
    *,
    seed: int = 0,
    variables: dict[str, str] | None = None,
) -> tuple[list[dict], LoadReport]:
    """As :func:`load_sources`, each source's rows normalised by ``normaliser_of(source)`` (e.g.
    routed to the source's own ``domain``), one report over them all."""
    total = LoadReport()
    rows: list[dict] = []
    for source in sources:
        part, report = load_source(source, normaliser_of(source), seed=seed, variables=variables)
        rows.extend(part)
        total.merge(report)
    return rows, total


def count_source_rows(sources: Sequence[DataSource], variables: dict[str, str]) -> str:
    """Rows across ``sources`` (every file a path names: a file, a directory, a glob) after
    ``limit`` and upsampling, or why they cannot be counted yet (the plan of a run)."""
    total = 0
    for source in sources:
        if "${world}" in source.path:
            return "built at run time"
        try:
            path = Path(expand(source.path, variables))
        except ValueError as error:
            return str(error)
        files = data_files(path)
        if not files or not files[0].exists():
            return f"missing: {path}"
        try:
            rows = sum(count_rows(file) for file in files)
        except OSError as error:  # unreadable: the run's checks name it (train/preflight.py)
            return f"unreadable: {path} ({error.strerror or error})"
        rows = min(rows, source.limit or rows)
        total += math.floor(rows * source.upsample)
    return str(total)


def upsample(rows: list[dict], factor: float, seed: int) -> list[dict]:
    """Repeat rows ``floor(factor)`` times, plus a seeded sample for the fractional part."""
    whole = math.floor(factor)
    out = rows * whole
    extra = round((factor - whole) * len(rows))
    if extra:
        out += random.Random(seed).sample(rows, extra)
    return out


# ----------------------------------------------------------------------------- normalisers
def rl_normaliser(default_domain: str | None) -> Callable[[dict], dict]:
    """Normaliser for RL prompt rows: prompt messages, a known reward domain and the
    reference fields that domain needs (DESIGN convention 3)."""

    def normalise(row: dict) -> dict:
        prompt = as_messages(row.get("prompt") if "prompt" in row else row.get("messages"), "prompt")
        while prompt and prompt[-1]["role"] == "assistant":  # chat rows may carry their answer
            prompt = prompt[:-1]
        if not prompt or prompt[-1]["role"] not in ("user", "tool"):
            raise ValueError("prompt does not end with a user turn")
        domain_name = default_domain or row.get("domain")
        if not domain_name:
            raise ValueError("missing field 'domain' (and the stage sets no domain)")
        try:
            domain = get_domain(str(domain_name))
        except KeyError:
            raise ValueError(f"unknown reward domain {domain_name!r}") from None
        check_row(domain, row)  # a reference field missing or unreadable: the row is skipped with the reason
        reference = {k: v for k, v in row.items() if k not in ("prompt", "messages", "domain")}
        if row.get("tools"):
            try:  # the model must see the row's tools: into the system message (chat.with_tools)
                prompt = with_tools(prompt, row["tools"])
            except (ValueError, json.JSONDecodeError) as error:
                raise ValueError(f"tools: {error}") from None
        return {"prompt": prompt, "domain": domain.name, "reference": reference, "id": row.get("id")}

    return normalise
