"""Data hygiene used throughout the paper (SPEC section 3): exact prompt deduplication and
n-gram decontamination (drop any sample sharing a 9-gram with a test sample).

Text is compared after lower-casing and splitting on non-alphanumeric characters, so
formatting differences do not hide an overlap.

:class:`NgramIndex` is the decontamination index of ``cascade data decontaminate``: the
n-grams of several named benchmarks, each word mapped to an integer id and each n-gram to a
64-bit polynomial hash, kept in one sorted NumPy array (with the n-gram's word ids beside it).
Training texts are checked in chunks: their word ids (0 for a word no benchmark has, which no
benchmark n-gram contains) are concatenated, the hashes of every window computed with ``n``
vectorised multiply-adds, looked up with one ``searchsorted``, and every hit confirmed on the
word ids themselves, so a hash collision never drops a row. A benchmark text shorter than
``n`` words has no n-gram; it matches a training text with exactly the same words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

import numpy as np

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
    index = NgramIndex(n)
    index.add("test", test_texts)
    rows = list(rows)
    found = index.matches([text_of(row) for row in rows])
    kept = [row for row, hits in zip(rows, found) if not hits]
    return kept, len(rows) - len(kept)


_BASE = np.uint64(0x9E3779B97F4A7C15)  # odd: multiplication by it is a bijection mod 2**64


class NgramIndex:
    """The ``n``-grams of named benchmarks (module docstring). ``add`` every benchmark, then
    call :meth:`matches` on training texts."""

    def __init__(self, n: int = 9) -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        self.n = n
        self.vocab: dict[str, int] = {}
        self.names: list[str] = []
        self.grams_per_benchmark: dict[str, int] = {}
        self._parts: list[tuple[np.ndarray, np.ndarray]] = []  # (word-id windows, benchmark number)
        self._short: dict[tuple[str, ...], set[int]] = {}
        self._hashes: np.ndarray | None = None

    def add(self, name: str, texts: Iterable[str]) -> None:
        """Index the n-grams of one benchmark's texts."""
        number = len(self.names)
        self.names.append(name)
        windows = []
        for text in texts:
            tokens = words(text)
            if len(tokens) < self.n:
                if tokens:
                    self._short.setdefault(tuple(tokens), set()).add(number)
                continue
            ids = np.fromiter((self.vocab.setdefault(t, len(self.vocab) + 1) for t in tokens), np.uint64, len(tokens))
            windows.append(np.lib.stride_tricks.sliding_window_view(ids, self.n))
        grams = np.unique(np.concatenate(windows), axis=0) if windows else np.zeros((0, self.n), np.uint64)
        self.grams_per_benchmark[name] = len(grams)
        self._parts.append((grams, np.full(len(grams), number, np.int32)))
        self._hashes = None

    def _build(self) -> None:
        grams = np.concatenate([g for g, _ in self._parts]) if self._parts else np.zeros((0, self.n), np.uint64)
        owners = np.concatenate([o for _, o in self._parts]) if self._parts else np.zeros(0, np.int32)
        hashes = _window_hashes(grams.reshape(-1), self.n)[:: self.n] if len(grams) else np.zeros(0, np.uint64)
        order = np.argsort(hashes, kind="stable")
        self._hashes, self._grams, self._owners = hashes[order], grams[order], owners[order]
        self._words = ["", *self.vocab]  # ids count up from 1 in insertion order

    def matches(self, texts: Sequence[str]) -> list[dict[str, str]]:
        """For each text, the benchmarks it shares an n-gram with (or, for a benchmark text
        shorter than n words, whose words it equals), each with the first shared n-gram."""
        if self._hashes is None:
            self._build()
        found: list[dict[str, str]] = [{} for _ in texts]
        token_lists = [words(text) for text in texts]
        for row, tokens in enumerate(token_lists):
            for number in self._short.get(tuple(tokens), ()):
                found[row].setdefault(self.names[number], " ".join(tokens))
        if not len(self._hashes):
            return found
        ids, starts = self._chunk_ids(token_lists)
        if len(ids) < self.n:
            return found
        hashes = _window_hashes(ids, self.n)
        valid = np.ones(len(hashes), bool)
        for offset in range(self.n):
            valid &= ids[offset : offset + len(hashes)] != 0
        positions = np.flatnonzero(valid)
        slots = np.searchsorted(self._hashes, hashes[positions])
        slots[slots == len(self._hashes)] = 0
        hit = positions[self._hashes[slots] == hashes[positions]]
        for position in hit:
            self._confirm(
                ids, int(position), hashes[position], found[int(np.searchsorted(starts, position, "right")) - 1]
            )
        return found

    def _chunk_ids(self, token_lists: Sequence[list[str]]) -> tuple[np.ndarray, np.ndarray]:
        """Word ids of all texts, each followed by a 0 (so no window spans two texts), and the
        start of each text."""
        vocab = self.vocab
        flat: list[int] = []
        starts = np.zeros(len(token_lists), np.int64)
        for row, tokens in enumerate(token_lists):
            starts[row] = len(flat)
            flat.extend([vocab.get(token, 0) for token in tokens])
            flat.append(0)
        return np.array(flat, np.uint64), starts

    def _confirm(self, ids: np.ndarray, position: int, value: np.uint64, hits: dict[str, str]) -> None:
        window = ids[position : position + self.n]
        left = np.searchsorted(self._hashes, value, "left")
        right = np.searchsorted(self._hashes, value, "right")
        for slot in range(left, right):
            if np.array_equal(self._grams[slot], window):
                name = self.names[self._owners[slot]]
                hits.setdefault(name, " ".join(self._words[int(i)] for i in window))


def _window_hashes(ids: np.ndarray, n: int) -> np.ndarray:
    """Polynomial hash (base ``_BASE``, mod 2**64) of every window of ``n`` consecutive ids."""
    length = len(ids) - n + 1
    hashes = np.zeros(length, np.uint64)
    with np.errstate(over="ignore"):
        for offset in range(n):
            hashes = hashes * _BASE + ids[offset : offset + length]
    return hashes


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
