"""Data hygiene used throughout the paper (SPEC section 3): exact prompt deduplication and
n-gram decontamination (drop any sample sharing a 9-gram with a test sample).

Dedup compares prompts at one of :data:`DEDUP_LEVELS` (:func:`dedup_text`): ``exact``;
``whitespace`` (runs of white space are one space, ends stripped); ``whitespace-case`` (also
case-folded: the default, and what ``check-disjoint`` compares); ``whitespace-case-punctuation``
(also every Unicode punctuation mark read as a space, so ``3.5`` stays apart from ``35`` but
``2/3`` meets ``2-3``: for prose more than for maths).

For decontamination, text is compared after lower-casing and splitting on non-alphanumeric
characters (:func:`words`, the project's word: :mod:`cascade_rl.text`), so formatting
differences do not hide an overlap.

:class:`NgramIndex` is the decontamination index of ``cascade data decontaminate``: the
n-grams of several named benchmarks, each word mapped to an integer id and each n-gram to a
64-bit polynomial hash, kept in one sorted NumPy array (with the n-gram's word hashes beside it).
Training texts are checked in chunks, without a Python object per word (:class:`WordHashes`):
the bytes of the whole chunk are split into words and each word hashed to 64 bits with a few
NumPy passes; the hash of every window of ``n`` words is a vectorised multiply-add, looked up
with one ``searchsorted``; a hit is confirmed on the ``n`` word hashes themselves, so an
n-gram hash collision never drops a row. A benchmark text shorter than
``n`` words has no n-gram; it matches a training text with exactly the same words.

**Templates.** A benchmark's rows share instructions (a request for a boxed answer, "Your code
should pass this test:"), and training rows of the same format carry the same words: under the
paper's literal rule every such training row shares a 9-gram with the benchmark (MBPP's own
training split loses 374 of 374 rows to MBPP's test split, GSM8K's 7,473 of 7,473 to its test
split). With a template share (:meth:`NgramIndex.add`), the runs of :data:`TEMPLATE_WORDS` or more
words that that share of a benchmark's rows carry are its template: n-grams that hold a template
word are not indexed (nor, so, the n-grams across the edge of a template shorter than ``n``
words), and each whole question is matched by its words. What that leaves dropped on MBPP and
GSM8K, and why, is measured in docs/data-formats.md.
"""

from __future__ import annotations

import math
import sys
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache
from typing import TypeVar

import numpy as np

from cascade_rl.text import words

Row = TypeVar("Row")


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


DEDUP_LEVELS = ("exact", "whitespace", "whitespace-case", "whitespace-case-punctuation")
DEFAULT_DEDUP_LEVEL = "whitespace-case"


def check_dedup_level(level: str) -> str:
    if level not in DEDUP_LEVELS:
        raise ValueError(f"unknown dedup level {level!r}; known: {', '.join(DEDUP_LEVELS)}")
    return level


def dedup_text(text: str, level: str = DEFAULT_DEDUP_LEVEL) -> str:
    """``text`` as dedup compares it at ``level`` (module docstring)."""
    check_dedup_level(level)
    if level == "exact":
        return text
    if level == "whitespace-case-punctuation":
        text = text.translate(_punctuation_as_space())
    if level != "whitespace":
        text = text.casefold()
    return " ".join(text.split())


@cache
def _punctuation_as_space() -> dict[int, str]:
    """A ``str.translate`` table mapping every Unicode punctuation character (categories P*) to a space."""
    return {c: " " for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)).startswith("P")}


def dedup(rows: Iterable[Row], key: Callable[[Row], str], level: str = DEFAULT_DEDUP_LEVEL) -> tuple[list[Row], int]:
    """First occurrence of each key as :func:`dedup_text` reads it at ``level``, and how many
    repeats were dropped."""
    check_dedup_level(level)
    seen: set[str] = set()
    kept, dropped = [], 0
    for row in rows:
        normal = dedup_text(key(row), level)
        if normal in seen:
            dropped += 1
        else:
            seen.add(normal)
            kept.append(row)
    return kept, dropped


_BASE = np.uint64(0x9E3779B97F4A7C15)  # odd, hence invertible mod 2**64
_INVERSE = np.uint64(pow(0x9E3779B97F4A7C15, -1, 2**64))
_WORD_BYTE = np.zeros(256, bool)
_WORD_BYTE[[*range(ord("0"), ord("9") + 1), *range(ord("a"), ord("z") + 1), *range(0x80, 0x100)]] = True


class WordHashes:
    """The words of a batch of texts (:func:`words`) as 64-bit hashes of their UTF-8 bytes,
    computed with NumPy over the bytes of the whole batch -- no Python string per word.

    ``hashes[i]`` is the hash of word ``i``, ``text_of[i]`` the text it belongs to, and
    :meth:`word` gives its text back. ASCII texts are lower-cased and split where a byte is not
    ``[0-9a-z]``; other texts go through :func:`words` first (re-joined with spaces), so the
    words are exactly those of :func:`words`."""

    def __init__(self, texts: Sequence[str]) -> None:
        prepared = [text.lower() if text.isascii() else " ".join(words(text)) for text in texts]
        self.data = np.frombuffer("\n".join(prepared).encode("utf-8"), np.uint8)
        lengths = np.fromiter((len(p.encode("utf-8")) + 1 for p in prepared), np.int64, len(prepared))
        text_starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if len(prepared) else np.zeros(0, np.int64)
        inside = np.concatenate([[False], _WORD_BYTE[self.data], [False]])
        edges = np.flatnonzero(inside[1:] != inside[:-1])
        self.starts, self.ends = edges[0::2], edges[1::2]
        self.text_of = np.searchsorted(text_starts, self.starts, "right") - 1
        self.hashes = self._hash_words()

    def _hash_words(self) -> np.ndarray:
        """h(word) = sum of byte_j * B**(end - 1 - j) mod 2**64, from one prefix sum over the
        bytes weighted by B**-j (B is odd, so B**-1 exists mod 2**64)."""
        size = len(self.data)
        if not len(self.starts):
            return np.zeros(0, np.uint64)
        powers, inverse_powers = _powers(size + 1)
        with np.errstate(over="ignore"):
            weighted = np.zeros(size + 1, np.uint64)
            np.cumsum(self.data.astype(np.uint64) * inverse_powers[:size], out=weighted[1:])
            return (weighted[self.ends] - weighted[self.starts]) * powers[self.ends - 1]

    def word(self, index: int) -> str:
        return bytes(self.data[self.starts[index] : self.ends[index]]).decode("utf-8")


def _text_spans(counts: np.ndarray, selected: np.ndarray) -> Iterator[tuple[int, int, int]]:
    """(text, first word, end word) of the selected texts of a :class:`WordHashes` batch, whose
    words lie text after text; ``counts`` is the number of words of each text."""
    ends = np.cumsum(counts)
    for text in np.flatnonzero(selected):
        yield int(text), int(ends[text] - counts[text]), int(ends[text])


class NgramIndex:
    """The ``n``-grams of named benchmarks (module docstring). ``add`` every benchmark, then
    call :meth:`matches` on training texts."""

    def __init__(self, n: int = 9) -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        self.n = n
        self.names: list[str] = []
        self.grams_per_benchmark: dict[str, int] = {}
        #: per benchmark indexed with a template: its phrases and how many texts carry each
        self.templates: dict[str, list[tuple[str, int]]] = {}
        self._parts: list[tuple[np.ndarray, np.ndarray]] = []  # (word-hash windows, benchmark number)
        self._whole: dict[tuple[int, ...], set[int]] = {}  # a text's word hashes -> benchmarks
        self._whole_lengths: set[int] = set()
        self._hashes: np.ndarray | None = None

    def add(self, name: str, texts: Iterable[str], *, template: float | None = None) -> None:
        """Index the n-grams of one benchmark's texts. With ``template`` (a share, e.g. 0.5), every
        run of :data:`TEMPLATE_WORDS` words or more that at least that share of its texts carry
        (two of them at least) is the benchmark's template -- an instruction its rows share, such
        as a format request -- not a question's content: no n-gram that holds one of its words is
        indexed, so a question's last words followed by the template do not match, and a copy of
        a whole question is still matched by its words (module docstring). The template's phrases
        are in ``templates[name]`` (most texts first)."""
        number = len(self.names)
        self.names.append(name)
        texts = list(texts)
        batch = WordHashes(texts)
        windows, owners = self._windows(batch, self.n)
        grams = batch.hashes[windows[:, None] + np.arange(self.n)]
        if template is not None and len(batch.hashes):
            marked = self._template_words(batch, template, len(texts))
            self.templates[name] = _phrases(batch, marked)
            grams = grams[marked[windows + self.n] == marked[windows]]
        grams = np.unique(grams, axis=0)
        # whole texts matched by their words: those too short for an n-gram, and with a template
        # every text (a copy of a templated question has no n-gram of its own content left)
        counts = np.bincount(batch.text_of, minlength=int(batch.text_of.max(initial=-1)) + 1)
        whole = (counts > 0) & ((counts < self.n) | (template is not None))
        for _, begin, end in _text_spans(counts, whole):
            self._whole.setdefault(tuple(int(h) for h in batch.hashes[begin:end]), set()).add(number)
            self._whole_lengths.add(end - begin)
        self.grams_per_benchmark[name] = len(grams)
        self._parts.append((grams, np.full(len(grams), number, np.int32)))
        self._hashes = None

    def _template_words(self, batch: WordHashes, share: float, texts: int) -> np.ndarray:
        """The running count of template words (``marked[i]``: how many of words ``0..i-1`` are
        template), so a window ``[a, a + n)`` holds none when ``marked[a + n] == marked[a]``."""
        size = min(TEMPLATE_WORDS, self.n)
        starts, owners = self._windows(batch, size)
        edges = np.zeros(len(batch.hashes) + 1, np.int64)
        if len(starts):
            grams = batch.hashes[starts[:, None] + np.arange(size)]
            distinct, inverse = np.unique(grams, axis=0, return_inverse=True)
            inverse = inverse.reshape(-1)
            pairs = np.unique(np.column_stack([inverse, owners]), axis=0)
            texts_with = np.bincount(pairs[:, 0], minlength=len(distinct))
            frequent = starts[texts_with[inverse] >= max(2, math.ceil(share * texts))]
            np.add.at(edges, frequent, 1)
            np.add.at(edges, frequent + size, -1)
        return np.concatenate([[0], np.cumsum(np.cumsum(edges)[:-1] > 0)])

    def _windows(self, batch: WordHashes, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Start positions of the windows of ``size`` words that lie inside one text, and their text."""
        last = len(batch.hashes) - size + 1
        if last <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        starts = np.flatnonzero(batch.text_of[:last] == batch.text_of[size - 1 :])
        return starts, batch.text_of[starts]

    def _build(self) -> None:
        grams = np.concatenate([g for g, _ in self._parts]) if self._parts else np.zeros((0, self.n), np.uint64)
        owners = np.concatenate([o for _, o in self._parts]) if self._parts else np.zeros(0, np.int32)
        hashes = _rolling(grams)
        order = np.argsort(hashes, kind="stable")
        self._hashes, self._grams, self._owners = hashes[order], grams[order], owners[order]
        self._filter = np.zeros(1 << (64 - _FILTER_SHIFT), bool)  # the hashes' top bits: a 4 MiB pre-filter
        self._filter[self._hashes >> _FILTER_SHIFT] = True

    def matches(self, texts: Sequence[str]) -> list[dict[str, str]]:
        """For each text, the benchmarks it shares an n-gram with (or, for a benchmark text
        shorter than n words, whose words it equals), each with the first shared n-gram.
        Texts are hashed in groups of about ``GROUP_CHARS`` characters (bounded memory)."""
        if self._hashes is None:
            self._build()
        found: list[dict[str, str]] = []
        start = 0
        while start < len(texts):
            end, size = start, 0
            while end < len(texts) and (end == start or size + len(texts[end]) <= GROUP_CHARS):
                size += len(texts[end])
                end += 1
            found += self._match_group(texts[start:end])
            start = end
        return found

    def _match_group(self, texts: Sequence[str]) -> list[dict[str, str]]:
        found: list[dict[str, str]] = [{} for _ in texts]
        batch = WordHashes(texts)
        if self._whole:
            self._match_whole(batch, found)
        starts, owners = self._windows(batch, self.n)
        if not len(starts) or not len(self._hashes):
            return found
        hashes = _rolling_flat(batch.hashes, self.n)[starts]
        maybe = np.flatnonzero(self._filter[hashes >> _FILTER_SHIFT])  # most windows stop here
        slots = np.minimum(np.searchsorted(self._hashes, hashes[maybe]), len(self._hashes) - 1)
        for hit in maybe[self._hashes[slots] == hashes[maybe]]:
            start = int(starts[hit])
            window = batch.hashes[start : start + self.n]
            self._confirm(window, hashes[hit], found[owners[hit]], batch, start)
        return found

    def _match_whole(self, batch: WordHashes, found: list[dict[str, str]]) -> None:
        counts = np.bincount(batch.text_of, minlength=len(found))
        candidates = np.isin(counts, list(self._whole_lengths)) & (counts > 0)
        for text, begin, end in _text_spans(counts, candidates):
            for number in self._whole.get(tuple(int(h) for h in batch.hashes[begin:end]), ()):
                found[text].setdefault(self.names[number], " ".join(batch.word(i) for i in range(begin, end)))

    def _confirm(
        self, window: np.ndarray, value: np.uint64, hits: dict[str, str], batch: WordHashes, start: int
    ) -> None:
        """Record the benchmarks whose n-gram has exactly these word hashes."""
        left = np.searchsorted(self._hashes, value, "left")
        right = np.searchsorted(self._hashes, value, "right")
        for slot in range(left, right):
            name = self.names[self._owners[slot]]
            if name not in hits and np.array_equal(self._grams[slot], window):
                hits[name] = " ".join(batch.word(i) for i in range(start, start + self.n))


def _phrases(batch: WordHashes, marked: np.ndarray) -> list[tuple[str, int]]:
    """The runs of template words (``marked``: :meth:`NgramIndex._template_words`) as phrases,
    each with the number of texts that carry it, most first."""
    flags = np.diff(marked) > 0
    begins_text = np.concatenate([[True], batch.text_of[1:] != batch.text_of[:-1]])
    starts = np.flatnonzero(flags & (begins_text | ~np.concatenate([[False], flags[:-1]])))
    carried: dict[str, set[int]] = {}
    for start in starts:
        end = start + 1
        while end < len(flags) and flags[end] and not begins_text[end]:
            end += 1
        phrase = " ".join(batch.word(i) for i in range(start, end))
        carried.setdefault(phrase, set()).add(int(batch.text_of[start]))
    return sorted(((phrase, len(texts)) for phrase, texts in carried.items()), key=lambda item: (-item[1], item[0]))


#: the shortest run of words that counts as a template: a benchmark's instructions are found by
#: the 4-word sequences most of its texts carry, so a template shorter than the n-gram (MBPP's
#: "your code should pass this test python assert", 8 words) is found too
TEMPLATE_WORDS = 4

_FILTER_SHIFT = np.uint64(42)
GROUP_CHARS = 1 << 18
_POWERS: list[np.ndarray] = [np.ones(1, np.uint64), np.ones(1, np.uint64)]


def _powers(size: int) -> tuple[np.ndarray, np.ndarray]:
    """B**j and B**-j mod 2**64 for j < size (computed once, grown by doubling)."""
    if len(_POWERS[0]) < size:
        length = max(size, 2 * len(_POWERS[0]))
        with np.errstate(over="ignore"):
            for index, base in enumerate((_BASE, _INVERSE)):
                table = np.empty(length, np.uint64)
                table[0] = 1
                np.cumprod(np.full(length - 1, base, np.uint64), out=table[1:])
                _POWERS[index] = table
    return _POWERS[0], _POWERS[1]


def _rolling_flat(hashes: np.ndarray, n: int) -> np.ndarray:
    """Polynomial hash of every window of ``n`` consecutive word hashes (as :func:`_rolling`)."""
    length = len(hashes) - n + 1
    out = np.zeros(max(length, 0), np.uint64)
    with np.errstate(over="ignore"):
        for offset in range(n):
            out *= _BASE
            out += hashes[offset : offset + length]
    return out


def _rolling(windows: np.ndarray) -> np.ndarray:
    """Polynomial hash (base ``_BASE``, mod 2**64) of each row of word hashes."""
    hashes = np.zeros(len(windows), np.uint64)
    with np.errstate(over="ignore"):
        for column in range(windows.shape[1] if windows.ndim == 2 else 0):
            hashes = hashes * _BASE + windows[:, column]
    return hashes
