"""SEARCH/REPLACE edits: parse them, apply them, turn them into git-style unified diffs.

This is the answer format of the SWE repair step (SPEC section 7.2, seed appendix C.2) and the
input of the SWE reward (SPEC section 6); it lives beside the reward, below the SWE pipeline and
the toy world, so all three share it without an import loop (DESIGN.md, "Layers"; formerly
``cascade_rl.swe.edits``). A repair answer holds one or more edits::

    ```diff
    ### path/to/file.py
    <<<<<<< SEARCH
    lines to find (exactly, with their indentation)
    =======
    lines to put in their place
    >>>>>>> REPLACE
    ```

Parsing rules (:func:`parse_edits`):

* The answer may be wrapped in ``<solution>...</solution>`` (the appendix repair prompt asks
  for it); when a ``<solution>`` tag is present only the text inside solution blocks is read
  (an unclosed block runs to the end of the text).
* Fences are optional: ```` ```diff ```` blocks and bare edits parse alike; one fence may hold
  several edits and edits may name several files.
* The file of an edit is the last ``### path`` header before it (any run of two or more ``#``;
  the seed's example writes ``######``), unless a line holding just a path comes right before
  the SEARCH marker (or its opening fence), aider style: that path wins.
* Markers are tolerant of their length (``<<<< SEARCH`` ... ``>>>>>>>>> REPLACE``, ``===`` and
  longer), as the seed's prompt itself varies them.
* A SEARCH marker without its divider or REPLACE marker, an edit with no file, or a text with
  no edit at all raises :class:`EditParseError`.

Application rules (:func:`apply_edits`), edits applied in order, each on the result of the
previous ones:

* **Several occurrences**: a SEARCH text that occurs more than once is applied to its
  **first** occurrence (``ambiguous="first"``, the default, as Agentless and aider do);
  ``ambiguous="reject"`` raises :class:`EditApplyError` instead.
* **Whitespace fallback**: when the exact text is absent, the SEARCH lines are matched line by
  line ignoring trailing whitespace (and a missing final newline); the first such match is
  replaced. Leading indentation must still match: it is meaningful in Python.
* **New files**: an empty SEARCH on a file that is not among the originals creates the file
  with the REPLACE text. An empty SEARCH on an existing file appends the REPLACE text to it
  (aider's rule). A non-empty SEARCH in a missing file, or a SEARCH text that is not found,
  raises :class:`EditApplyError`.

:func:`unified_diff` renders the changed files as a ``git diff``-style patch (``diff --git``
headers, ``---``/``+++`` lines, ``new file mode`` for created files, hunks with 3 lines of
context, ``\\ No newline at end of file`` where needed) that ``git apply`` accepts.
:func:`apply_patch` applies a unified diff (e.g. a golden patch) to in-memory files.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from unidiff import PatchSet
from unidiff.constants import LINE_TYPE_NO_NEWLINE
from unidiff.errors import UnidiffParseError

Ambiguity = Literal["first", "reject"]

_SEARCH_RE = re.compile(r"^\s*<{3,}\s*SEARCH\s*$")
_DIVIDER_RE = re.compile(r"^\s*={3,}\s*$")
_REPLACE_RE = re.compile(r"^\s*>{3,}\s*REPLACE\s*$")
_HEADER_RE = re.compile(r"^\s*#{2,}\s*(?P<path>[^\s#]\S*)\s*$")
_FENCE_RE = re.compile(r"^\s*```")
_BARE_PATH_RE = re.compile(r"^\s*(?P<path>[\w.\-+~]+(?:/[\w.\-+~]+)*\.\w+|[\w.\-+~]*/[\w.\-+~/]+)\s*$")
_SOLUTION_RE = re.compile(r"<solution>(.*?)(?:</solution>|$)", re.S)


class EditParseError(ValueError):
    """The text holds no well-formed SEARCH/REPLACE edit."""


class EditApplyError(ValueError):
    """An edit cannot be applied to the given files (file missing, SEARCH text not found)."""


@dataclass(frozen=True)
class SearchReplace:
    """One edit: replace ``search`` by ``replace`` in the file ``path`` (texts end with a
    newline unless empty)."""

    path: str
    search: str
    replace: str


@dataclass(frozen=True)
class EditResult:
    """What an answer does to the files: its edits, the new contents of the files they touch,
    and the git-style diff (``""`` when nothing changes)."""

    edits: tuple[SearchReplace, ...]
    edited_files: dict[str, str]
    patch: str


def solution_text(answer: str) -> str:
    """The part of ``answer`` inside ``<solution>`` blocks (joined), or all of it when it has
    no ``<solution>`` tag."""
    if "<solution>" not in answer:
        return answer
    return "\n".join(_SOLUTION_RE.findall(answer))


def parse_edits(answer: str) -> list[SearchReplace]:
    """All SEARCH/REPLACE edits of ``answer`` in order (see the module docstring for the rules).

    Raises :class:`EditParseError` naming the problem (and the line) when an edit is malformed
    or when there is none.
    """
    lines = solution_text(answer or "").splitlines()
    edits: list[SearchReplace] = []
    header_path: str | None = None  # the last "### path" header
    bare_path: str | None = None  # a path alone on the last line of text, if it was one
    index = 0
    while index < len(lines):
        line = lines[index]
        if _SEARCH_RE.match(line):
            path = bare_path or header_path
            if path is None:
                raise EditParseError(
                    f"line {index + 1}: SEARCH block without a file path (expected a '### path' line before it)"
                )
            search, replace, index = _read_block(lines, index)
            edits.append(SearchReplace(path, search, replace))
            bare_path = None
            continue
        header = _HEADER_RE.match(line)
        if header:
            header_path, bare_path = header.group("path"), None
        elif line.strip() and not _FENCE_RE.match(line):
            bare = _BARE_PATH_RE.match(line)
            bare_path = bare.group("path") if bare else None
        index += 1
    if not edits:
        raise EditParseError("no SEARCH/REPLACE edit found")
    return edits


def _read_block(lines: list[str], start: int) -> tuple[str, str, int]:
    """Read the edit whose SEARCH marker is ``lines[start]``; return (search, replace, index of
    the line after its REPLACE marker)."""
    divider = _find(lines, start + 1, _DIVIDER_RE)
    if divider is None:
        raise EditParseError(f"line {start + 1}: SEARCH block has no '=======' divider")
    end = _find(lines, divider + 1, _REPLACE_RE)
    if end is None:
        raise EditParseError(f"line {divider + 1}: SEARCH block has no '>>>>>>> REPLACE' end")
    nested = _find(lines[:end], start + 1, _SEARCH_RE)
    if nested is not None:
        raise EditParseError(
            f"line {nested + 1}: SEARCH marker inside the edit that starts at "
            f"line {start + 1} (an edit without its end?)"
        )
    return _join(lines[start + 1 : divider]), _join(lines[divider + 1 : end]), end + 1


def _find(lines: list[str], start: int, pattern: re.Pattern) -> int | None:
    return next((i for i in range(start, len(lines)) if pattern.match(lines[i])), None)


def _join(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def apply_edits(
    files: Mapping[str, str], edits: Iterable[SearchReplace], *, ambiguous: Ambiguity = "first"
) -> dict[str, str]:
    """Apply ``edits`` in order to ``files`` (``{path: content}``, left unchanged) and return
    the new content of every file an edit touched (created files included).

    Raises :class:`EditApplyError` when a file is missing or a SEARCH text is not found (or,
    with ``ambiguous="reject"``, found more than once).
    """
    if ambiguous not in ("first", "reject"):
        raise ValueError(f"ambiguous must be 'first' or 'reject', got {ambiguous!r}")
    edited: dict[str, str] = {}
    for number, edit in enumerate(edits, 1):
        current = edited.get(edit.path, files.get(edit.path))
        try:
            edited[edit.path] = _apply_one(current, edit, ambiguous)
        except EditApplyError as error:
            raise EditApplyError(f"edit {number} ({edit.path}): {error}") from None
    return edited


def _apply_one(content: str | None, edit: SearchReplace, ambiguous: Ambiguity) -> str:
    if not edit.search.strip():
        if content is None:
            return edit.replace
        return content + ("" if not content or content.endswith("\n") else "\n") + edit.replace
    if content is None:
        raise EditApplyError("file not found among the given files")
    count = content.count(edit.search)
    if count > 1 and ambiguous == "reject":
        raise EditApplyError(f"SEARCH text occurs {count} times")
    if count:
        return content.replace(edit.search, edit.replace, 1)
    replaced = _replace_ignoring_trailing_space(content, edit, ambiguous)
    if replaced is None:
        raise EditApplyError("SEARCH text not found")
    return replaced


def _replace_ignoring_trailing_space(content: str, edit: SearchReplace, ambiguous: Ambiguity) -> str | None:
    """Line-wise match of the SEARCH lines ignoring trailing whitespace; None when absent."""
    lines = content.splitlines(keepends=True)
    wanted = [line.rstrip() for line in edit.search.splitlines()]
    size = len(wanted)
    matches = [
        start
        for start in range(len(lines) - size + 1)
        if [line.rstrip() for line in lines[start : start + size]] == wanted
    ]
    if not matches:
        return None
    if len(matches) > 1 and ambiguous == "reject":
        raise EditApplyError(f"SEARCH text occurs {len(matches)} times (ignoring trailing whitespace)")
    start = matches[0]
    replacement = edit.replace
    if not lines[start + size - 1].endswith("\n") and start + size == len(lines):
        replacement = replacement.removesuffix("\n")
    return "".join(lines[:start]) + replacement + "".join(lines[start + size :])


def unified_diff(original: Mapping[str, str], edited: Mapping[str, str], *, context: int = 3) -> str:
    """Git-style unified diff from ``original`` to ``edited`` contents (both ``{path: text}``).

    Only paths in ``edited`` are compared (a path missing from ``original`` is a new file);
    unchanged files produce nothing, so the result is ``""`` when nothing changes. Files come
    in path order.
    """
    parts = []
    for path in sorted(edited):
        before = original.get(path)
        after = edited[path]
        if before == after:
            continue
        parts.append(_file_diff(path, before, after, context))
    return "".join(parts)


def _file_diff(path: str, before: str | None, after: str, context: int) -> str:
    header = [f"diff --git a/{path} b/{path}\n"]
    if before is None:
        header.append("new file mode 100644\n")
    hunks = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile="/dev/null" if before is None else f"a/{path}",
        tofile=f"b/{path}",
        n=context,
    )
    body = []
    for line in hunks:
        if line.startswith(("---", "+++")):
            line = line.rstrip() + "\n"  # difflib appends a tab and date when given; we do not
        elif not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        body.append(line)
    return "".join(header + body)


def edits_to_patch(answer: str, files: Mapping[str, str], *, ambiguous: Ambiguity = "first") -> EditResult:
    """Parse the edits of ``answer``, apply them to ``files`` and diff the result.

    Raises :class:`EditParseError` or :class:`EditApplyError`.
    """
    edits = parse_edits(answer)
    edited = apply_edits(files, edits, ambiguous=ambiguous)
    return EditResult(tuple(edits), edited, unified_diff(files, edited))


# ---- unified diffs ------------------------------------------------------------------------


class PatchApplyError(ValueError):
    """A unified diff does not parse or does not fit the given files."""


def parse_patch(patch: str) -> PatchSet:
    """``unidiff.PatchSet`` of ``patch``; raises :class:`PatchApplyError` when it does not
    parse, or when a non-blank text holds no file change at all."""
    try:
        parsed = PatchSet(patch)
    except UnidiffParseError as error:
        raise PatchApplyError(f"patch does not parse: {error}") from None
    if patch.strip() and not len(parsed):
        raise PatchApplyError("patch holds no file change (no '---'/'+++' headers)")
    return parsed


def patched_path(patched_file) -> str:
    """The repository path a ``unidiff`` file entry changes (target path, or source path for a
    deleted file), without ``a/``/``b/`` prefixes."""
    name = patched_file.source_file if patched_file.is_removed_file else patched_file.target_file
    return name[2:] if name.startswith(("a/", "b/")) else name


def apply_patch(files: Mapping[str, str], patch: str) -> dict[str, str | None]:
    """Apply a unified diff to in-memory ``files``; return the new content of every file it
    touches (``None`` for a deleted file).

    Hunks must match their context exactly (trailing whitespace aside) at their stated line
    numbers; raises :class:`PatchApplyError` otherwise or when a changed file is missing.
    """
    result: dict[str, str | None] = {}
    for patched_file in parse_patch(patch):
        path = patched_path(patched_file)
        if patched_file.is_removed_file:
            result[path] = None
            continue
        if patched_file.is_added_file:
            before = ""
        elif path in files:
            before = files[path]
        else:
            raise PatchApplyError(f"{path}: file not among the given files")
        result[path] = _apply_hunks(path, before, patched_file)
    return result


def _apply_hunks(path: str, before: str, patched_file) -> str:
    source = before.splitlines(keepends=True)
    output: list[str] = []
    position = 0  # index into source of the next line not yet copied
    for hunk in patched_file:
        start = max(hunk.source_start - 1, 0) if hunk.source_length else hunk.source_start
        if start < position:
            raise PatchApplyError(f"{path}: overlapping hunks at line {hunk.source_start}")
        output.extend(source[position:start])
        position = start
        previous = None
        for line in hunk:
            if line.line_type == LINE_TYPE_NO_NEWLINE:
                if previous is not None and not previous.is_removed and output:
                    output[-1] = output[-1].removesuffix("\n")
                continue
            if line.is_added:
                output.append(line.value)
            elif line.is_context or line.is_removed:
                if position >= len(source) or source[position].rstrip() != line.value.rstrip():
                    raise PatchApplyError(f"{path}: hunk does not match at line {position + 1}")
                if line.is_context:
                    output.append(source[position])
                position += 1
            previous = line
    output.extend(source[position:])
    return _fix_missing_newlines(output)


def _fix_missing_newlines(lines: list[str]) -> str:
    """Join lines, restoring the newline of any line but the last that lost it (unidiff drops
    it for ``\\ No newline at end of file`` lines that are no longer last)."""
    return "".join(line if line.endswith("\n") or i == len(lines) - 1 else line + "\n" for i, line in enumerate(lines))
