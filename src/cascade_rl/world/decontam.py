"""n-gram decontamination of training rows against test rows (SPEC section 3, data hygiene),
extending :func:`cascade_rl.data.hygiene.decontaminate` for a templated world.

The paper drops any training sample that shares a 9-gram with a benchmark test sample. Here:

* **Words**: the project's definition (:func:`cascade_rl.text.words`): lower-cased
  runs of letters and digits, so punctuation, spacing and ``snake_case`` do not hide a match.
* **n-grams**: a training row is contaminated when one of its word n-grams (``n = 9``) occurs
  in a test row. A test text shorter than ``n`` words has no n-gram; it contaminates a
  training row that contains it whole (as a contiguous run of words), so short test prompts
  ("What is 47 + 85?") are protected too, and an identical prompt is always caught.
* **What is compared**: every message text of a row (``prompt``, ``messages``, ``chosen``,
  ``rejected``; training rows with their answers) and the SWE fields (``problem_statement``,
  ``files``). Tool schemas (``tools``) are the environment, not the task, and are left out.
* **Scaffolding**: fixed text that every instance of a prompt family shares -- the Agentless
  prompt wrappers of appendix C.2, the IFEval instruction descriptions -- is removed before
  counting (pass it as ``scaffolding``). Real decontamination compares benchmark *instances*
  (an issue and its repository, a request), never the prompt template wrapped around them;
  in a templated toy world, keeping the wrapper would make every training row of a family
  collide with every test row of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from cascade_rl.text import words


def _message_texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Sequence):
        for message in value:
            if isinstance(message, Mapping):
                yield str(message.get("content") or "")
                for call in message.get("tool_calls") or ():
                    function = call.get("function", call)
                    yield f"{function.get('name', '')} {function.get('arguments', '')}"


def row_text(row: Mapping[str, Any]) -> str:
    """The text of a data row that decontamination compares (see the module docstring)."""
    parts: list[str] = []
    for key in ("prompt", "messages", "chosen", "rejected"):
        if key in row:
            parts.extend(_message_texts(row[key]))
    if row.get("problem_statement"):
        parts.append(str(row["problem_statement"]))
    files = row.get("files")
    if isinstance(files, Mapping):
        parts.extend(str(text) for text in files.values())
    return "\n".join(parts)


def strip_scaffolding(text: str, scaffolding: Iterable[str]) -> str:
    """``text`` without every occurrence of each scaffolding string (longest first)."""
    for fixed in sorted(set(scaffolding), key=len, reverse=True):
        if fixed:
            text = text.replace(fixed, "\n")
    return text


class Decontaminator:
    """The test side, indexed once: ``contaminated(text)`` tells whether a training text
    shares an n-gram with, or contains the whole of a short, test text."""

    def __init__(self, test_texts: Iterable[str], n: int = 9) -> None:
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        self.n = n
        self.ngrams: set[tuple[str, ...]] = set()
        self.short: dict[int, set[tuple[str, ...]]] = {}
        for text in test_texts:
            self.add(text)

    def add(self, text: str) -> None:
        tokens = words(text)
        if not tokens:
            return
        if len(tokens) < self.n:
            self.short.setdefault(len(tokens), set()).add(tuple(tokens))
            return
        self.ngrams.update(_ngrams(tokens, self.n))

    def contaminated(self, text: str) -> bool:
        tokens = words(text)
        if any(gram in self.ngrams for gram in _ngrams(tokens, self.n)):
            return True
        return any(gram in grams for size, grams in self.short.items() for gram in _ngrams(tokens, size))


def _ngrams(tokens: list[str], size: int) -> Iterator[tuple[str, ...]]:
    for start in range(len(tokens) - size + 1):
        yield tuple(tokens[start : start + size])


def decontaminate(
    train_rows: Iterable[Mapping[str, Any]],
    test_rows: Iterable[Mapping[str, Any]],
    n: int = 9,
    *,
    scaffolding: Iterable[str] = (),
) -> list[Mapping[str, Any]]:
    """The training rows that share no ``n``-gram with any test row (see the module
    docstring for what is compared)."""
    fixed = list(scaffolding)
    index = Decontaminator((strip_scaffolding(row_text(r), fixed) for r in test_rows), n)
    return [row for row in train_rows if not index.contaminated(strip_scaffolding(row_text(row), fixed))]
