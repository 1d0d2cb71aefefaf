"""Repair (SPEC section 7.2): prompt with the top localised files, sample k answers, turn
their SEARCH/REPLACE edits into candidate patches.

**Context within a token budget.** The files go into the appendix C.2 repair prompt whole
when they fit ``budget`` tokens together. Otherwise, file by file in ranked order, a file that
does not fit whole is shown as its *relevant parts plus imports and definitions*: every line
outside function bodies (imports, constants, class statements, ``def`` headers with their
decorators) is kept, each function body is replaced by an indented ``...``, and then bodies
are put back -- most relevant first (most identifiers shared with the issue), the smallest
first among equals -- while the budget allows. Shown lines are verbatim, so SEARCH texts copied
from the prompt match the file. A file that does not parse as Python is cut to its first
lines. Tokens are counted by ``count_tokens`` (default: :func:`approx_tokens`, about one token
per identifier, number or punctuation mark; pass a real tokenizer's length for exact budgets).

**Candidates.** Each sample's edits are applied to the *full* files at the base commit (any
file the edits name, shown or not) and diffed. A candidate's ``status`` is ``ok`` (non-empty
patch), ``no_op`` (edits that change nothing), ``empty`` (a blank answer) or ``unparseable``
(unfinished thinking, malformed edits, SEARCH text not found, missing file), with the error.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from cascade_rl.chat import split_thinking
from cascade_rl.llm.base import Sampling
from cascade_rl.rewards.swe_edits import EditApplyError, EditParseError, apply_edits, parse_edits, unified_diff
from cascade_rl.rewards.swe_prompts import format_files, repair_messages
from cascade_rl.swe.localize import code_tokens

if TYPE_CHECKING:
    from cascade_rl.llm.base import Generator

TokenCounter = Callable[[str], int]
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
ELISION = "..."


def approx_tokens(text: str) -> int:
    """A tokenizer-free token estimate: identifiers, numbers and punctuation marks."""
    return len(_TOKEN_RE.findall(text))


# ---- context ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Body:
    start: int  # first line index of the body (0-based)
    end: int  # one past its last line
    indent: str
    relevance: int


def _bodies(tree: ast.AST, lines: list[str], issue_terms: set[str]) -> list[_Body]:
    bodies = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        first, last = node.body[0], node.body[-1]
        start, end = first.lineno - 1, last.end_lineno or last.lineno
        if start <= node.lineno - 1:  # one-line definition: "def f(): return 1"
            continue
        text = "".join(lines[start:end])
        relevance = sum(1 for token in set(code_tokens(text)) if token in issue_terms)
        indent = re.match(r"\s*", lines[start]).group(0)
        bodies.append(_Body(start, end, indent, relevance))
    return bodies


def _render(lines: list[str], hidden: list[_Body]) -> str:
    """``lines`` with the outermost hidden bodies replaced by ``...`` lines."""
    out, index = [], 0
    for body in sorted(hidden, key=lambda b: b.start):
        if body.start < index:
            continue  # inside a body already elided
        out.extend(lines[index : body.start])
        out.append(f"{body.indent}{ELISION}\n")
        index = body.end
    out.extend(lines[index:])
    return "".join(out)


def compress_python(text: str, issue: str, budget: int, count_tokens: TokenCounter = approx_tokens) -> str | None:
    """The most relevant view of ``text`` within ``budget`` tokens (module docstring), or None
    when even the skeleton does not fit. Falls back to the first lines for non-Python text."""
    lines = text.splitlines(keepends=True)
    hidden = _function_bodies(text, lines, issue)
    if hidden is None:
        return _head(lines, budget, count_tokens)
    if count_tokens(_render(lines, hidden)) > budget:
        return None
    # reveal the most relevant bodies first; among equals the smallest first
    for body in sorted(hidden, key=lambda b: (-b.relevance, b.end - b.start)):
        trial = [b for b in hidden if b is not body]
        if count_tokens(_render(lines, trial)) <= budget:
            hidden = trial
    return _render(lines, hidden)


def _function_bodies(text: str, lines: list[str], issue: str) -> list[_Body] | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    return _bodies(tree, lines, set(code_tokens(issue)))


def skeleton(text: str) -> str:
    """The smallest view :func:`compress_python` can give: every function body elided (the
    first line and ``...`` for non-Python text)."""
    lines = text.splitlines(keepends=True)
    hidden = _function_bodies(text, lines, "")
    if hidden is None:
        return "".join(lines[:1]) + f"{ELISION}\n"
    return _render(lines, hidden)


def _head(lines: list[str], budget: int, count_tokens: TokenCounter) -> str | None:
    kept: list[str] = []
    for line in lines:
        if count_tokens("".join(kept) + line + ELISION) > budget:
            break
        kept.append(line)
    return "".join(kept) + f"{ELISION}\n" if kept else None


def build_context(
    files: Sequence[tuple[str, str]], issue: str, budget: int | None, count_tokens: TokenCounter = approx_tokens
) -> tuple[str, dict[str, str]]:
    """The ``{content}`` of the repair prompt for ranked ``files`` within ``budget`` tokens
    (None: no limit), and what was shown of each file.

    All files whole when they fit. Otherwise, in rank order, each file gets what is left after
    reserving the skeletons of the files after it: whole if it fits, else compressed; a file
    whose skeleton does not fit is left out.
    """

    def cost(path: str, view: str) -> int:
        return count_tokens(format_files([(path, view)]))

    if budget is None or count_tokens(format_files(files)) <= budget:
        shown = dict(files)
        return format_files(shown), shown
    floors = [cost(path, skeleton(text)) for path, text in files]
    shown: dict[str, str] = {}
    remaining = budget
    for index, (path, text) in enumerate(files):
        allowance = remaining - sum(f for f in floors[index + 1 :] if f <= remaining)
        view: str | None = text
        if cost(path, text) > allowance:
            view = compress_python(text, issue, allowance - cost(path, ""), count_tokens)
        if view is None:
            continue
        shown[path] = view
        remaining -= cost(path, view)
    return format_files(shown), shown


# ---- candidates ---------------------------------------------------------------------------


@dataclass
class Candidate:
    """One repair sample and what became of it."""

    index: int
    response: str
    status: str  # ok | no_op | empty | unparseable
    patch: str = ""
    error: str | None = None
    files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def candidate_from_response(
    index: int, response: str, read_files: Callable[[list[str]], Mapping[str, str]]
) -> Candidate:
    """Parse one repair answer and apply its edits to the files ``read_files`` returns for the
    paths the edits name (the full files at the base commit)."""
    split = split_thinking(response)
    if not split.finished:
        return Candidate(index, response, "unparseable", error="unfinished thinking: no answer")
    if not split.answer.strip():
        return Candidate(index, response, "empty", error="blank answer")
    try:
        edits = parse_edits(split.answer)
        originals = read_files(sorted({e.path for e in edits}))
        edited = apply_edits(originals, edits)
    except (EditParseError, EditApplyError) as error:
        return Candidate(index, response, "unparseable", error=str(error))
    patch = unified_diff(originals, edited)
    status = "ok" if patch else "no_op"
    return Candidate(index, response, status, patch, files=sorted(edited))


@dataclass
class RepairResult:
    prompt: list[dict]
    shown: dict[str, str]
    candidates: list[Candidate]

    def counts(self) -> dict[str, int]:
        return dict(Counter(candidate.status for candidate in self.candidates))


def repair(
    generator: Generator,
    problem_statement: str,
    files: Sequence[tuple[str, str]],
    read_files: Callable[[list[str]], Mapping[str, str]],
    *,
    samples: int = 8,
    budget: int | None = 16_000,
    count_tokens: TokenCounter = approx_tokens,
    sampling: Sampling = Sampling(),
) -> RepairResult:
    """Sample ``samples`` repairs of the issue from ``generator`` given the ranked ``files``
    (path, content) and turn each into a :class:`Candidate`."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    content, shown = build_context(files, problem_statement, budget, count_tokens)
    messages = repair_messages(problem_statement, content)
    responses = generator.generate(messages, sampling.times(samples))
    candidates = [candidate_from_response(i, response, read_files) for i, response in enumerate(responses)]
    return RepairResult(messages, shown, candidates)
