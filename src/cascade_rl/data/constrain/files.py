"""``cascade data constrain`` over files, and the ``constrain`` converter (``format: constrain``
on a recipe's data source): base texts in, ``ifeval`` RL rows out (:mod:`cascade_rl.data.constrain`)."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cascade_rl.chat import last_user_text
from cascade_rl.data.constrain.draws import draw_row, instruction_pool
from cascade_rl.data.constrain.vocabulary import FAMILIES
from cascade_rl.data.job import Drop, Keep, Summary, run_job, state_path
from cascade_rl.data.rows import DataError, Row, RowError, check_input, pluck, prompt_messages


# ------------------------------------------------------------------------------ the command
def base_text(data: Mapping[str, Any], text_field: str | None = None) -> str:
    """The text constraints are added to: ``text_field`` (a string, or chat messages whose
    last user turn is taken), else the last user turn of the row's prompt / question
    (:func:`prompt_messages`), else its ``text`` (MBPP)."""
    if text_field is not None:
        value = pluck(data, text_field)
        if isinstance(value, list):
            value = last_user_text(prompt_messages({"prompt": value})) or None
        if not isinstance(value, str) or not value.strip():
            raise RowError(f"no text in field {text_field!r}")
        return value.strip()
    text = last_user_text(prompt_messages(data))
    if not text.strip() and isinstance(data.get("text"), str):
        text = data["text"]
    if not text.strip():
        raise RowError("no text found (prompt, question, text, ...); pass --text-field")
    return text.strip()


def parse_counts(text: str) -> tuple[int, int]:
    """``"2"`` or ``"1-3"`` -> (low, high)."""
    low, _, high = text.partition("-")
    try:
        counts = int(low), int(high or low)
    except ValueError:
        raise DataError(f"--constraints: expected N or LOW-HIGH, got {text!r}") from None
    if not 1 <= counts[0] <= counts[1] <= 6:
        raise DataError(f"--constraints: expected 1 <= LOW <= HIGH <= 6, got {text!r}")
    return counts


def parse_where(text: str | None) -> Callable[[Mapping[str, Any]], bool] | None:
    """``FIELD=LOW..HIGH`` (numbers, inclusive) or ``FIELD=VALUE``."""
    if text is None:
        return None
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise DataError(f"--where: expected FIELD=LOW..HIGH or FIELD=VALUE, got {text!r}")
    if ".." in value:
        low_text, _, high_text = value.partition("..")
        try:
            low, high = float(low_text), float(high_text)
        except ValueError:
            raise DataError(f"--where: {value!r} is not a range of numbers") from None

        def in_range(data: Mapping[str, Any]) -> bool:
            found = pluck(data, name)
            return isinstance(found, (int, float)) and not isinstance(found, bool) and low <= found <= high

        return in_range
    return lambda data: str(pluck(data, name)) == value


def _source(row: Row, data: Mapping[str, Any]) -> tuple[str, str]:
    """(file, the row's own id or its line number) of an input row."""
    path, _, line = row.where.rpartition(":")
    for key in ("id", "task_id", "key"):
        if isinstance(data.get(key), (str, int)) and not isinstance(data.get(key), bool):
            return path, str(data[key])
    return path, line.replace("row ", "")


def id_prefix(path: str) -> str:
    """``gsm8k/train.jsonl`` -> ``gsm8k-train``; ``mbpp/mbpp.jsonl`` -> ``mbpp``."""
    file = Path(path)
    parent, stem = file.parent.name, file.stem
    return stem if not parent or parent == stem else f"{parent}-{stem}"


def constrained_row(
    text: str, pool: Sequence[str], counts: tuple[int, int], *, seed: int, rejected: Counter | None = None
) -> dict | None:
    """The ``ifeval`` RL row for one base text (its constraints drawn from ``(seed, text)``
    alone), or None when no satisfiable combination was drawn."""
    drawn = draw_row(text, random.Random(f"{seed}:{text}"), pool, counts, rejected)
    if drawn is None:
        return None
    return {
        "prompt": [{"role": "user", "content": drawn.prompt}],
        "domain": "ifeval",
        "instruction_id_list": drawn.ids,
        "kwargs": drawn.kwargs,
        "base_text": text,
    }


def constrain(
    row: Mapping[str, Any],
    suffix: str = "",
    text_field: str | None = None,
    constraints: str = "1-3",
    families: str | Sequence[str] = "ifeval",
    exclude_ids: str | Sequence[str] = (),
    seed: int = 0,
    where: str | None = None,
) -> dict | Drop:
    """The converter view of ``cascade data constrain`` (``format: constrain`` on a recipe's data
    source): one row in, its IF-RL row out, the same row the command writes for it; ``where``
    (``FIELD=LOW..HIGH`` or ``FIELD=VALUE``) keeps only the rows it selects."""
    del suffix  # the constraints are the row's instruction
    select = parse_where(where)
    if select is not None and not select(row):
        return Drop(f"not selected by where {where}")
    pool = instruction_pool(_names(families), _names(exclude_ids))
    data = constrained_row(base_text(row, text_field), pool, parse_counts(constraints), seed=seed)
    if data is None:
        return Drop("no satisfiable combination drawn")
    source = next((row[k] for k in ("id", "task_id", "key") if isinstance(row.get(k), (str, int))), None)
    return {"id": f"{source}-if", **data} if source is not None else data


def _names(value: str | Sequence[str]) -> list[str]:
    """``"a,b"`` or ``["a", "b"]`` -> ``["a", "b"]``."""
    return [v for v in value.split(",") if v] if isinstance(value, str) else list(value)


def constrain_files(
    inputs: Sequence[Path],
    output: Path,
    *,
    text_field: str | None = None,
    constraints: str = "1-3",
    families: Sequence[str] = ("ifeval",),
    exclude_ids: Sequence[str] = (),
    seed: int = 0,
    limit: int | None = None,
    where: str | None = None,
    prefix: str | None = None,
    **job: Any,
) -> Summary:
    """Build one ``ifeval`` RL row per input text (module docstring); ids are
    ``PREFIX-SOURCE-if``, SOURCE the row's ``id`` / ``task_id`` / ``key`` or its line, PREFIX
    ``prefix`` or :func:`id_prefix` of its file. ``extra`` of the summary: rows per instruction
    (with redrawn combinations) and per constraint count."""
    for path in inputs:
        check_input(Path(path))
    counts = parse_counts(constraints)
    rows = ConstrainedRows(
        instruction_pool(families, exclude_ids),
        counts,
        text_field=text_field,
        seed=seed,
        limit=limit,
        where=where,
        prefix=prefix,
        rejected=_previous_rejections(output, job.get("overwrite", False)),
    )
    if limit is not None and limit < 1:
        raise DataError("--limit must be at least 1")
    options = {
        "text_field": text_field,
        "constraints": list(counts),
        "families": list(families),
        "exclude_ids": sorted(exclude_ids),
        "seed": seed,
        "limit": limit,
        "where": where,
        "prefix": prefix,
    }
    return run_job("constrain", inputs, output, rows.process, options=options, warm=rows.count, extra=rows.extra, **job)


class ConstrainedRows:
    """The rows of one ``cascade data constrain`` run: what each input row becomes (a
    constrained row, or why it is dropped), and the tallies of the summary -- rows per
    instruction and per constraint count, combinations drawn again per instruction."""

    def __init__(
        self,
        pool: Sequence[str],
        counts: tuple[int, int],
        *,
        text_field: str | None,
        seed: int,
        limit: int | None,
        where: str | None,
        prefix: str | None,
        rejected: Counter,
    ) -> None:
        self.pool, self.counts, self.text_field, self.seed = pool, counts, text_field, seed
        self.limit, self.where, self.select, self.prefix = limit, where, parse_where(where), prefix
        self.rejected = rejected
        self.per_id: Counter = Counter()
        self.per_count: Counter = Counter()

    def process(self, rows: Sequence[Row]) -> list:
        return [self.outcome(row) for row in rows]

    def outcome(self, row: Row) -> Keep | Drop | RowError:
        """What one input row becomes (rows are counted as they are kept: ``--limit``)."""
        if self.select is not None and not self.select(row.data):
            return Drop(f"not selected by --where {self.where}")
        if self.limit is not None and sum(self.per_count.values()) >= self.limit:
            return Drop("beyond --limit")
        try:
            text = base_text(row.data, self.text_field)
        except RowError as error:
            return error
        path, source = _source(row, row.data)
        data = constrained_row(text, self.pool, self.counts, seed=self.seed, rejected=self.rejected)
        if data is None:
            return Drop("no satisfiable combination drawn")
        row_id = f"{self.prefix or id_prefix(path)}-{source}-if"
        data = {"id": row_id, **data, "base_id": f"{Path(path).name}:{source}"}
        self.count(data)
        return Keep([data])

    def count(self, data: dict) -> None:
        """Tally a row made (now, or by the interrupted run being resumed)."""
        self.per_id.update(data["instruction_id_list"])
        self.per_count[len(data["instruction_id_list"])] += 1

    def extra(self) -> dict:
        """The summary's tables: rows per instruction (and redraws), rows per constraint count."""
        total = sum(self.per_count.values()) or 1
        family_of = {i: name for name, ids in FAMILIES.items() for i in ids}
        table = [
            {
                "instruction": instruction,
                "family": family_of[instruction],
                "rows": self.per_id[instruction],
                "% of rows": f"{100 * self.per_id[instruction] / total:.1f}",
                "redrawn": self.rejected[instruction],
            }
            for instruction in self.pool
        ]
        table.sort(key=lambda r: (-r["rows"], r["instruction"]))
        low, high = self.counts
        return {
            "per instruction": table,
            "constraints per row": [{"constraints": c, "rows": self.per_count[c]} for c in range(low, high + 1)],
        }


def _previous_rejections(output: Path, overwrite: bool) -> Counter:
    """The redraw counts of an interrupted run being resumed (its rows are counted again by
    ``warm``; redraws leave no trace in the rows)."""
    state = state_path(Path(output))
    if overwrite or not state.exists():
        return Counter()
    try:
        table = json.loads(state.read_text())["summary"]["extra"]["per instruction"]
        return Counter({r["instruction"]: int(r["redrawn"]) for r in table})
    except (ValueError, KeyError, TypeError):
        return Counter()
