"""Markdown tables and the text of numbers in them, shared by the run report, the recovery of
distillation stages and the comparison of runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from cascade_rl.eval.runs import StageRecord

_NUMBER_TEXT = re.compile(r"^(\*\*)?[+-]?\d+(\.\d+)?( ± \d+(\.\d+)?)?(\*\*)?( ⚠)?$")


def format_cell(value: Any) -> str:
    """Markdown cell text: None -> '—', floats with one decimal, pipes escaped."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _looks_numeric(cell: Any) -> bool:
    if isinstance(cell, bool):
        return False
    return isinstance(cell, (int, float)) or bool(_NUMBER_TEXT.match(str(cell)))


def format_table(rows: Sequence[Sequence[Any]], columns: Sequence[str]) -> str:
    """A GitHub-markdown table; numeric columns are right-aligned."""
    if any(len(row) != len(columns) for row in rows):
        raise ValueError(f"every row needs {len(columns)} cells ({list(columns)})")

    def numeric(index: int) -> bool:
        cells = [row[index] for row in rows if row[index] is not None]
        return bool(cells) and all(_looks_numeric(cell) for cell in cells)

    aligns = ["---:" if numeric(i) else "---" for i in range(len(columns))]
    lines = ["| " + " | ".join(format_cell(c) for c in columns) + " |", "| " + " | ".join(aligns) + " |"]
    lines += ["| " + " | ".join(format_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def format_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def signed(value: float | None, bold: bool = False, digits: int = 1) -> str | None:
    if value is None:
        return None
    text = f"{value:+.{digits}f}"
    return f"**{text}**" if bold else text


def column_title(benchmark: str, labels: Mapping[str, str]) -> str:
    return f"{benchmark} ({labels[benchmark]})" if benchmark in labels else benchmark


def value_text(record: StageRecord, benchmark: str) -> str | None:
    """``40.2 ± 2.1`` (the value and its standard error over prompts), or the value alone."""
    if benchmark not in record.eval:
        return None
    stderr = record.eval_stderr.get(benchmark)
    return f"{record.eval[benchmark]:.1f}" + (f" ± {stderr:.1f}" if stderr is not None else "")
