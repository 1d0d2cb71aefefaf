"""Data hygiene used throughout the paper (SPEC section 3): exact prompt deduplication and
n-gram decontamination (drop any sample sharing a 9-gram with a test sample).

Text is compared after lower-casing and splitting on non-alphanumeric characters, so
formatting differences do not hide an overlap.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

Row = TypeVar("Row")
_WORD = re.compile(r"[0-9a-z\u00c0-\uffff]+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def ngrams(text: str, n: int = 9) -> Iterator[tuple[str, ...]]:
    tokens = words(text)
    for start in range(len(tokens) - n + 1):
        yield tuple(tokens[start : start + n])


def ngram_index(texts: Iterable[str], n: int = 9) -> set[tuple[str, ...]]:
    index: set[tuple[str, ...]] = set()
    for text in texts:
        index.update(ngrams(text, n))
    return index


def decontaminate(
    rows: Iterable[Row], test_texts: Iterable[str], text_of: Callable[[Row], str], n: int = 9
) -> tuple[list[Row], int]:
    """Rows that share no ``n``-gram with any test text, and how many were dropped."""
    index = ngram_index(test_texts, n)
    kept, dropped = [], 0
    for row in rows:
        if any(gram in index for gram in ngrams(text_of(row), n)):
            dropped += 1
        else:
            kept.append(row)
    return kept, dropped


def dedup(rows: Iterable[Row], key: Callable[[Row], str]) -> tuple[list[Row], int]:
    """First occurrence of each exact (whitespace-normalised) key, and how many repeats were dropped."""
    seen: set[str] = set()
    kept, dropped = [], 0
    for row in rows:
        normal = " ".join(key(row).split())
        if normal in seen:
            dropped += 1
        else:
            seen.add(normal)
            kept.append(row)
    return kept, dropped
