"""Rows of the ``cascade data`` commands (SPEC sections 3-6): reading JSONL / JSON / Parquet files
row by row with each row's location, and finding the prompt of a row in any layout the project reads.

* :func:`iter_rows` yields :class:`Row` (``where`` = ``path:line`` for JSONL, ``path:row N`` for
  Parquet and for a ``.json`` file holding one JSON list, as NVIDIA's RL-Math set is released; a
  ``.json`` file that is not a list is read as JSON Lines). A line that is not JSON, or not a JSON
  object, raises :class:`DataError` naming the file and line, unless the caller asked to skip
  malformed rows (then it is yielded with ``error`` set, for the caller to count).
* :func:`data_files` lists the files a data path names: the file, every data file under a
  directory (a downloaded dataset's folder, e.g. ``math/`` of ``math_1.jsonl``, ``math_2.jsonl``),
  or the matches of a glob pattern.
* :func:`prompt_messages` finds the prompt of a row: the project's RL / preference ``prompt``,
  the turns of an SFT ``messages`` list before its last assistant reply, HelpSteer's
  ``context``, NeMo Gym's ``responses_create_params.input``, or the question field of a public
  benchmark (``question``, ``problem``, ``question_content``, ``Question``, ``prompt``...).
  :func:`prompt_text` joins its user / system text; :func:`row_text` adds every reply.
* :func:`pluck` reads a dotted field path (``verifier_metadata.unit_tests``); recipes and
  ``cascade data convert --rename`` use it to rename nested fields.
"""

from __future__ import annotations

import glob
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUFFIXES = (".jsonl", ".json", ".parquet")
#: question fields of public datasets, in the order they are tried
QUESTION_FIELDS = ("question_content", "question", "problem", "Problem", "Question", "instruction", "input")
_FLAG = re.compile(r"\s/(think|no_think)\s*$")


class DataError(ValueError):
    """Bad input for a data command; the message names the file (and line) and the problem."""


class RowError(ValueError):
    """A malformed row; the command adds the row's location to the message."""


@dataclass
class Row:
    where: str
    data: dict
    error: str | None = None


def check_input(path: Path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    if path.suffix not in SUFFIXES:
        raise DataError(f"{path}: expected a .jsonl, .json or .parquet file")
    return path


def data_files(path: Path | str) -> list[Path]:
    """The data files (``.jsonl``, ``.json``, ``.parquet``) a path names, in a fixed order: a
    file itself (whatever it exists); every data file under a directory, sorted, hidden entries
    (``.cache/`` of a download) skipped; or the matches of a glob pattern (``*``, ``?``, ``[``),
    sorted, each directory among them expanded the same way. Empty when nothing matches."""
    text = str(path)
    if any(char in text for char in "*?["):
        found: list[Path] = []
        for match in sorted(glob.glob(text, recursive=True)):
            found += _under(Path(match)) if Path(match).is_dir() else [Path(match)]
        return [p for p in found if p.suffix in SUFFIXES]
    path = Path(path)
    return _under(path) if path.is_dir() else [path]


def _under(directory: Path) -> list[Path]:
    return sorted(
        p
        for p in directory.rglob("*")
        if p.is_file()
        and p.suffix in SUFFIXES
        and not any(part.startswith(".") for part in p.relative_to(directory).parts)
    )


def json_list(path: Path) -> list | None:
    """The rows of a ``.json`` file that holds one JSON list (a dataset released as one JSON
    document), or None for any other file (JSON Lines under any name)."""
    if path.suffix != ".json":
        return None
    with open(path, encoding="utf-8") as handle:
        head = handle.read(4096).lstrip()
        if not head.startswith("["):
            return None
        handle.seek(0)
        try:
            rows = json.load(handle)
        except json.JSONDecodeError as error:
            raise DataError(f"{path}: not a JSON list ({error.msg} at line {error.lineno})") from None
    return rows


def count_rows(path: Path) -> int:
    """Rows in a file without parsing them (non-empty lines; Parquet metadata; a JSON list's length)."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    rows = json_list(path)
    if rows is not None:
        return len(rows)
    count = 0
    with open(path, "rb") as handle:
        for line in handle:
            count += bool(line.strip())
    return count


def iter_rows(path: Path, *, skip_malformed: bool = False) -> Iterator[Row]:
    """Every row of one JSONL / JSON / Parquet file, in order (module docstring)."""
    path = check_input(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        number = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
            for data in batch.to_pylist():
                number += 1
                yield Row(f"{path}:row {number}", data)
        return
    listed = json_list(path)
    if listed is not None:
        for number, data in enumerate(listed, start=1):
            problem = None if isinstance(data, dict) else f"a row must be a JSON object, got {type(data).__name__}"
            if problem and not skip_malformed:
                raise DataError(f"{path}:row {number}: {problem}")
            yield Row(f"{path}:row {number}", data if isinstance(data, dict) else {}, problem)
        return
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                data = json.loads(line)
                problem = None if isinstance(data, dict) else f"a row must be a JSON object, got {type(data).__name__}"
            except json.JSONDecodeError as error:
                data, problem = {}, f"invalid JSON ({error.msg} at column {error.colno})"
            if problem and not skip_malformed:
                raise DataError(f"{where}: {problem}")
            yield Row(where, data if isinstance(data, dict) else {}, problem)


def pluck(row: Mapping[str, Any], path: str, default: Any = None) -> Any:
    """The value at a dotted field path (``a.b.c``), or ``default`` when a step is missing. A
    key that itself contains dots is found first."""
    if path in row:
        return row[path]
    value: Any = row
    for step in path.split("."):
        if not isinstance(value, Mapping) or step not in value:
            return default
        value = value[step]
    return value


def rename_fields(row: dict, fields: Mapping[str, str]) -> dict:
    """``row`` with ``{ours: theirs}`` renames applied (``theirs`` may be a dotted path)."""
    for ours, theirs in fields.items():
        value = pluck(row, theirs, _MISSING)
        if value is not _MISSING:
            row.pop(theirs, None)
            row[ours] = value
    return row


_MISSING = object()


def message_text(content: Any) -> str:
    """Text of a message content: a string, or a list of parts (OpenAI ``{"type": "text",
    "text"}`` / Responses ``{"type": "input_text", "text"}``)."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(part.get("text") or "" for part in content if isinstance(part, Mapping))
    return ""


def prompt_messages(row: Mapping[str, Any]) -> list[dict]:
    """The prompt turns of a row in any layout the project reads (module docstring); empty when
    the row has none."""
    for field in ("prompt", "context", "responses_create_params.input", "messages"):
        value = pluck(row, field)
        if value is None:
            continue
        if isinstance(value, str):
            return [{"role": "user", "content": value}] if field != "messages" else []
        if isinstance(value, list) and all(isinstance(m, Mapping) for m in value):
            messages = [{"role": m.get("role"), "content": message_text(m.get("content"))} for m in value]
            if field == "messages":
                while messages and messages[-1]["role"] == "assistant":
                    messages.pop()
            return messages
    for field in QUESTION_FIELDS:
        if isinstance(row.get(field), str) and row[field].strip():
            return [{"role": "user", "content": row[field]}]
    return []


def prompt_text(row: Mapping[str, Any]) -> str:
    """The user and system text of a row's prompt, turns joined by blank lines, without
    ` /think` / ` /no_think` flags."""
    turns = [m for m in prompt_messages(row) if m["role"] in ("user", "system", "developer")]
    return "\n\n".join(_FLAG.sub("", m["content"]) for m in turns)


def row_text(row: Mapping[str, Any]) -> str:
    """All text of a row: its prompt and every reply (SFT turns, chosen / rejected answers,
    HelpSteer responses)."""
    parts = [prompt_text(row)]
    for field in ("messages", "chosen", "rejected"):
        value = row.get(field)
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, list):
            parts += [message_text(m.get("content")) for m in value if isinstance(m, Mapping)]
    parts += [row[f] for f in ("response", "response1", "response2", "response_1", "response_2") if f in row]
    return "\n\n".join(p for p in parts if isinstance(p, str) and p)


def prompt_key(row: Mapping[str, Any]) -> str:
    """What makes two rows the same prompt for exact dedup: every prompt turn's role and
    whitespace-collapsed text, and the thinking mode of each user turn (parallel think /
    no_think samples of one prompt are different rows, SPEC section 3)."""
    raw = pluck(row, "messages") if "prompt" not in row else None
    modes = []
    if isinstance(raw, list):
        modes = [m.get("mode") for m in raw if isinstance(m, Mapping) and m.get("role") == "user"]
    turns = [[m["role"], " ".join(m["content"].split())] for m in prompt_messages(row)]
    return json.dumps([turns, modes], ensure_ascii=False)


def normal_text(text: str) -> str:
    """Case-folded, whitespace-collapsed text (prompt identity across stages)."""
    return " ".join(text.casefold().split())
