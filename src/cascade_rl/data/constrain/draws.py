"""Drawing a row's constraints (:mod:`cascade_rl.data.constrain`, **Drawing** and **Conflicts**):
the instruction table :data:`SPECS` (kwargs sampler, weight, companions), the conflict rules
(:func:`compatible`), and :func:`draw_row`, which keeps a combination only with a witness."""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cascade_rl.data.constrain.vocabulary import (
    BIGRAMS,
    BLANK_PARAGRAPHS,
    BRACKETS,
    BULLETS,
    CAPITAL_WORDS,
    CAPITALS,
    COMMON_LETTERS,
    COMPOSITION,
    CONSTRAINED,
    COPY,
    COPY_MULTIPLE,
    COPY_SIMPLE,
    COPY_SPAN,
    END_PHRASE,
    END_PHRASES,
    EXCLUDE,
    EXISTENCE,
    FAMILIES,
    FIRST_WORD,
    FIRST_WORD_SENTENCES,
    FORBIDDEN,
    FREQUENCY,
    GENERIC,
    HIGHLIGHTS,
    HYPHENS,
    INCREMENT,
    JSON,
    LANGUAGE,
    LANGUAGES,
    LAST_WORD,
    LAST_WORD_SENTENCES,
    LESS_COMMON_LETTERS,
    LETTER_COUNT,
    LETTER_FREQUENCY,
    LETTER_FREQUENCY_2,
    LOWERCASE,
    LOWERCASE_COUNT,
    NO_COMMA,
    NO_CONSECUTIVE,
    NO_DOT,
    NO_EXCLAMATION,
    NTH_PARAGRAPH,
    PALINDROME,
    PARAGRAPHS,
    PHRASES,
    PLACEHOLDERS,
    POSITION,
    POSTSCRIPT,
    QUOTATION,
    RARE_LETTERS,
    REPEAT_PHRASE,
    REPEAT_PROMPT,
    REPEATS,
    SECTION_SPLITTERS,
    SECTIONS,
    SENTENCES,
    STAR_PARAGRAPHS,
    START_END,
    TITLE,
    TWO_RESPONSES,
    UNIQUE,
    WORD_COUNT,
    WORD_NUMBER,
    WORD_ONCE,
    WORDS,
)
from cascade_rl.data.constrain.witness import satisfying_response
from cascade_rl.data.rows import DataError
from cascade_rl.rewards.ifeval import build_description
from cascade_rl.rewards.ifeval.text import STOP_WORDS
from cascade_rl.world.instructions import POSTSCRIPT_MARKERS


# ------------------------------------------------------------------------------ kwargs drawing
@dataclass
class Context:
    """What a row's kwargs are drawn from: the base text's content words, and the words and
    phrases this row's kwargs already use (required or forbidden), which later draws avoid."""

    base: str
    words: list[str]
    claimed: list[str] = field(default_factory=list)

    def fresh(self, word: str) -> bool:
        word = word.lower()
        return not any(word in other or other in word for other in (c.lower() for c in self.claimed))

    def claim(self, *texts: str) -> None:
        self.claimed.extend(texts)

    def keyword(self, rng: random.Random, from_text: float = 0.7) -> str:
        """A fresh keyword: one of the base text's content words (with probability
        ``from_text``) or one of :data:`WORDS`."""
        own = [w for w in self.words if self.fresh(w)]
        pool = own if own and rng.random() < from_text else [w for w in WORDS if self.fresh(w)]
        word = rng.choice(pool)
        self.claim(word)
        return word

    def letter(self, rng: random.Random, letters: str) -> str | None:
        """A letter absent from every claimed word (for "less than" letter counts)."""
        text = " ".join(self.claimed).lower()
        free = [letter for letter in letters if letter not in text]
        return rng.choice(free) if free else None


def content_words(text: str) -> list[str]:
    """The base text's content words: lower-cased letters-only words of 4-12 letters, no stop
    words or generic question words, in order of first appearance."""
    seen: dict[str, None] = {}
    for word in re.findall(r"[A-Za-z]+", text):
        lower = word.lower()
        if 4 <= len(lower) <= 12 and lower not in STOP_WORDS and lower not in GENERIC:
            seen.setdefault(lower, None)
    return list(seen)


def _relation(rng: random.Random, at_least: float) -> str:
    return "at least" if rng.random() < at_least else "less than"


def _round_or_odd(rng: random.Random, values: Sequence[int]) -> int:
    """One of ``values``; one time in five one more (IFEval has 101, 151, 801...)."""
    value = rng.choice(values)
    return value + 1 if rng.random() < 0.2 else value


def _letter_kwargs(rng: random.Random, ctx: Context) -> dict[str, Any]:
    if rng.random() < 0.3:
        letter = ctx.letter(rng, RARE_LETTERS)
        if letter is not None:
            return {"letter": letter, "let_frequency": rng.randint(2, 4), "let_relation": "less than"}
    if rng.random() < 0.75:
        return {"letter": rng.choice(COMMON_LETTERS), "let_frequency": rng.randint(4, 15), "let_relation": "at least"}
    return {"letter": rng.choice(LESS_COMMON_LETTERS), "let_frequency": rng.randint(1, 4), "let_relation": "at least"}


def _count_keyword(rng: random.Random, ctx: Context) -> dict[str, Any]:
    relation = _relation(rng, 0.7)
    frequency = rng.randint(2, 4)
    return {"keyword": ctx.keyword(rng), "frequency": frequency, "relation": relation}


def _phrase(rng: random.Random, ctx: Context) -> dict[str, Any]:
    """copy:repeat_phrase: a run of 5-7 distinct plain words from the base text."""
    tokens = ctx.base.split()
    runs = []
    for size in (5, 6, 7):
        for start in range(len(tokens) - size + 1):
            window = tokens[start : start + size]
            if all(t.isalpha() and t.islower() for t in window) and len(set(window)) == size:
                runs.append(" ".join(window))
    phrase = rng.choice(runs) if runs else rng.choice(PHRASES)
    ctx.claim(*phrase.split())
    return {"phrase": phrase, "small_n": rng.randint(2, 4)}


def _span(rng: random.Random, ctx: Context) -> dict[str, Any]:
    """new:copy_span_idx: a span of whole words, 20-80 characters, of the base text."""
    starts = [0] + [m.end() for m in re.finditer(r"\s+", ctx.base)]
    ends = [m.start() - 1 for m in re.finditer(r"\s+", ctx.base)] + [len(ctx.base) - 1]
    pairs = [(s, e) for s in starts for e in ends if 20 <= e - s + 1 <= 80]
    if not pairs:
        return {"n_start": 0, "n_end": len(ctx.base) - 1}
    start, end = rng.choice(pairs)
    return {"n_start": start, "n_end": end}


def _sections(rng: random.Random, ctx: Context) -> dict[str, Any]:
    splitter = rng.choice(SECTION_SPLITTERS)
    ctx.claim(splitter)
    return {"section_spliter": splitter, "num_sections": rng.randint(2, 4)}


def _end_phrase(rng: random.Random, ctx: Context) -> dict[str, Any]:
    phrase = rng.choice(END_PHRASES)
    ctx.claim(*re.findall(r"[A-Za-z]+", phrase))
    return {"end_phrase": phrase}


def _nth_paragraph(rng: random.Random, ctx: Context) -> dict[str, Any]:
    paragraphs = rng.randint(2, 4)
    return {"num_paragraphs": paragraphs, "nth_paragraph": rng.randint(1, paragraphs), "first_word": ctx.keyword(rng)}


def _postscript(rng: random.Random, ctx: Context) -> dict[str, Any]:
    marker = rng.choice(POSTSCRIPT_MARKERS)
    ctx.claim(marker)
    return {"postscript_marker": marker}


def _no_kwargs(rng: random.Random, ctx: Context) -> dict[str, Any]:
    return {}


Draw = Callable[[random.Random, Context], dict[str, Any]]


@dataclass(frozen=True)
class Spec:
    """How an instruction is drawn: kwargs sampler, weight, the only instructions it may be
    combined with (``None``: any compatible one; empty: none), and the phase of its kwargs
    draw (0: words the answer must contain; 1: words and letters it must avoid, drawn after)."""

    draw: Draw
    weight: float = 1.0
    only_with: frozenset[str] | None = None
    phase: int = 0


ALONE: frozenset[str] = frozenset()
WORD_LEVEL = frozenset({EXISTENCE, FORBIDDEN, EXCLUDE, NO_COMMA})

SPECS: dict[str, Spec] = {
    # --- IFEval (weights roughly follow the instruction's share of IFEval's test prompts)
    EXISTENCE: Spec(lambda r, c: {"keywords": [c.keyword(r) for _ in range(r.choice((1, 1, 2, 2, 3)))]}, 1.0),
    FREQUENCY: Spec(_count_keyword, 0.9),
    FORBIDDEN: Spec(
        lambda r, c: {"forbidden_words": [c.keyword(r, 0.5) for _ in range(r.randint(1, 3))]}, 1.0, phase=1
    ),
    LETTER_FREQUENCY: Spec(_letter_kwargs, 0.7, phase=1),
    LANGUAGE: Spec(lambda r, c: {"language": r.choice(LANGUAGES)}, 0.4),
    SENTENCES: Spec(
        lambda r, c: (
            {"relation": "less than", "num_sentences": r.randint(3, 10)}
            if r.random() < 0.5
            else {"relation": "at least", "num_sentences": r.randint(2, 8)}
        ),
        1.0,
    ),
    PARAGRAPHS: Spec(lambda r, c: {"num_paragraphs": r.randint(2, 5)}, 0.6),
    WORD_COUNT: Spec(
        lambda r, c: (
            {"relation": "less than", "num_words": _round_or_odd(r, (30, 40, 50, 60, 80, 100, 120, 150, 200))}
            if r.random() < 0.4
            else {"relation": "at least", "num_words": _round_or_odd(r, (30, 50, 80, 100, 120, 150, 200, 250))}
        ),
        1.0,
    ),
    NTH_PARAGRAPH: Spec(_nth_paragraph, 0.4),
    PLACEHOLDERS: Spec(lambda r, c: {"num_placeholders": r.randint(1, 4)}, 0.6),
    POSTSCRIPT: Spec(_postscript, 0.6),
    BULLETS: Spec(lambda r, c: {"num_bullets": r.randint(2, 5)}, 0.7),
    CONSTRAINED: Spec(_no_kwargs, 0.25, only_with=ALONE),
    HIGHLIGHTS: Spec(lambda r, c: {"num_highlights": r.randint(1, 4)}, 0.9),
    SECTIONS: Spec(_sections, 0.4),
    JSON: Spec(_no_kwargs, 0.4, only_with=WORD_LEVEL | {LOWERCASE, NO_EXCLAMATION}),
    TITLE: Spec(_no_kwargs, 0.8),
    TWO_RESPONSES: Spec(_no_kwargs, 0.5, only_with=WORD_LEVEL | {TITLE, LOWERCASE, CAPITALS, NO_EXCLAMATION, LANGUAGE}),
    REPEAT_PROMPT: Spec(
        _no_kwargs,
        0.7,
        only_with=frozenset(
            {EXISTENCE, TITLE, NO_COMMA, END_PHRASE, POSTSCRIPT, HIGHLIGHTS, PLACEHOLDERS, LOWERCASE, CAPITALS}
        ),
    ),
    END_PHRASE: Spec(_end_phrase, 0.6),
    CAPITAL_WORDS: Spec(
        lambda r, c: (
            {"capital_relation": "at least", "capital_frequency": r.randint(2, 6)}
            if r.random() < 0.7
            else {"capital_relation": "less than", "capital_frequency": r.randint(3, 8)}
        ),
        0.6,
    ),
    CAPITALS: Spec(_no_kwargs, 0.6),
    LOWERCASE: Spec(_no_kwargs, 0.9),
    NO_COMMA: Spec(_no_kwargs, 1.2),
    QUOTATION: Spec(_no_kwargs, 0.8),
    # --- IFBench training constraints
    REPEAT_PHRASE: Spec(_phrase, 0.5, only_with=ALONE),
    COPY: Spec(_no_kwargs, 0.4, only_with=ALONE),
    COPY_SIMPLE: Spec(_no_kwargs, 0.4, only_with=ALONE),
    COPY_MULTIPLE: Spec(lambda r, c: {"N": r.randint(2, 3)}, 0.4, only_with=ALONE),
    COPY_SPAN: Spec(_span, 0.3, only_with=ALONE),
    HYPHENS: Spec(_no_kwargs, 0.5, only_with=ALONE),
    BRACKETS: Spec(_no_kwargs, 0.5, only_with=ALONE),
    BIGRAMS: Spec(_no_kwargs, 0.4, only_with=ALONE),
    NO_CONSECUTIVE: Spec(_no_kwargs, 0.4, only_with=ALONE),
    WORD_ONCE: Spec(lambda r, c: {"keyword": c.keyword(r)}, 1.0),
    WORD_NUMBER: Spec(_count_keyword, 1.0),
    EXCLUDE: Spec(lambda r, c: {"keyword": c.keyword(r, 0.8)}, 1.0, phase=1),
    PALINDROME: Spec(_no_kwargs, 0.8),
    POSITION: Spec(
        lambda r, c: {"keyword": c.keyword(r), "n": r.randint(1, 3), "m": r.randint(1, 6)}, 0.5, only_with=ALONE
    ),
    START_END: Spec(_no_kwargs, 0.5, only_with=ALONE),
    STAR_PARAGRAPHS: Spec(_no_kwargs, 0.8),
    BLANK_PARAGRAPHS: Spec(_no_kwargs, 0.8),
    FIRST_WORD_SENTENCES: Spec(lambda r, c: {"first_word": c.keyword(r)}, 0.4, only_with=ALONE),
    FIRST_WORD: Spec(lambda r, c: {"first_word": c.keyword(r)}, 1.0),
    LAST_WORD_SENTENCES: Spec(lambda r, c: {"last_word": c.keyword(r)}, 0.4, only_with=ALONE),
    LAST_WORD: Spec(lambda r, c: {"last_word": c.keyword(r)}, 1.0),
    NO_DOT: Spec(_no_kwargs, 0.8),
    NO_EXCLAMATION: Spec(_no_kwargs, 0.6),
    LOWERCASE_COUNT: Spec(lambda r, c: {"N": r.choice((3, 5, 8, 10, 15, 20))}, 0.5),
    COMPOSITION: Spec(lambda r, c: {"n_sent": r.randint(1, 3), "n_words": r.randint(3, 6)}, 0.3, only_with=ALONE),
    UNIQUE: Spec(_no_kwargs, 0.5, only_with=ALONE),
    INCREMENT: Spec(lambda r, c: {"keyword1": c.keyword(r), "keyword2": c.keyword(r)}, 0.8),
    LETTER_COUNT: Spec(
        lambda r, c: (
            {"relation": "less than", "N": r.choice(range(200, 801, 50))}
            if r.random() < 0.5
            else {"relation": "at least", "N": r.choice(range(100, 601, 50))}
        ),
        0.6,
    ),
    LETTER_FREQUENCY_2: Spec(_letter_kwargs, 0.6, phase=1),
}

#: at most one instruction of each group: they claim the same property of the answer
CONFLICT_GROUPS: tuple[frozenset[str], ...] = (
    frozenset({LOWERCASE, CAPITALS, CAPITAL_WORDS, LOWERCASE_COUNT, LANGUAGE}),  # case / language
    frozenset({PARAGRAPHS, NTH_PARAGRAPH, STAR_PARAGRAPHS, BLANK_PARAGRAPHS, TWO_RESPONSES, SECTIONS}),  # layout
    frozenset({WORD_COUNT, LETTER_COUNT}),  # length
    frozenset({LETTER_FREQUENCY, LETTER_FREQUENCY_2}),  # one letter's count
    frozenset({END_PHRASE, LAST_WORD}),  # the last words
)
#: words an answer in another language cannot contain
ENGLISH_WORDS = (
    EXISTENCE,
    FREQUENCY,
    FORBIDDEN,
    WORD_ONCE,
    WORD_NUMBER,
    EXCLUDE,
    INCREMENT,
    END_PHRASE,
    FIRST_WORD,
    LAST_WORD,
    NTH_PARAGRAPH,
    SECTIONS,
    PALINDROME,
)
CONFLICT_PAIRS: frozenset[frozenset[str]] = frozenset(
    {frozenset({LANGUAGE, other}) for other in ENGLISH_WORDS}
    | {
        frozenset({FIRST_WORD, TITLE}),  # the first words: a title, a header or the word asked for
        frozenset({FIRST_WORD, SECTIONS}),
        frozenset({FIRST_WORD, NTH_PARAGRAPH}),
        frozenset({LOWERCASE, SECTIONS}),  # "Section 1" headers are matched case-sensitively
        frozenset({NO_DOT, POSTSCRIPT}),  # "P.S." / "P.P.S" are written with dots
        frozenset({NO_DOT, SENTENCES}),  # sentences end with dots
    }
)


def compatible(first: str, second: str) -> bool:
    """Whether two instructions may be drawn for one row (module docstring, **Conflicts**)."""
    if first == second:
        return False
    for one, other in ((first, second), (second, first)):
        only = SPECS[one].only_with
        if only is not None and other not in only:
            return False
    if any(first in group and second in group for group in CONFLICT_GROUPS):
        return False
    return frozenset({first, second}) not in CONFLICT_PAIRS


def instruction_pool(families: Iterable[str], exclude: Iterable[str] = ()) -> list[str]:
    """The ids of ``families`` (:data:`FAMILIES`) without ``exclude`` (ids, or ``family:``
    prefixes such as ``copy:``)."""
    excluded = [e.strip() for e in exclude if e.strip()]
    pool: list[str] = []
    for family in families:
        if family not in FAMILIES:
            raise DataError(f"unknown constraint family {family!r}; known: {', '.join(FAMILIES)}")
        pool += [i for i in FAMILIES[family] if i not in pool]
    known = set(SPECS)
    for entry in excluded:
        if not entry.endswith(":") and entry not in known:
            raise DataError(f"--exclude-ids: unknown instruction id {entry!r}")
    pool = [i for i in pool if not any(i == e or (e.endswith(":") and i.startswith(e)) for e in excluded)]
    if not pool:
        raise DataError("no instruction left to draw (check --families and --exclude-ids)")
    return pool


def draw_count(rng: random.Random, low: int, high: int) -> int:
    """Constraints per row: ``low..high``, each count half as likely as the one before."""
    counts = list(range(low, high + 1))
    return rng.choices(counts, weights=[2.0 ** -(c - low) for c in counts])[0]


def draw_ids(rng: random.Random, count: int, pool: Sequence[str]) -> list[str]:
    """``count`` pairwise-compatible instructions drawn by weight (fewer if none is left)."""
    chosen: list[str] = []
    while len(chosen) < count:
        candidates = [i for i in pool if all(compatible(i, c) for c in chosen)]
        if count > 1:  # an instruction that combines with nothing makes one-constraint rows only
            candidates = [i for i in candidates if SPECS[i].only_with != ALONE]
        if not candidates:
            break
        chosen.append(rng.choices(candidates, weights=[SPECS[i].weight for i in candidates])[0])
    return chosen


# ------------------------------------------------------------------------------ rows
@dataclass
class Drawn:
    """One drawn row: instructions, kwargs and the user prompt."""

    ids: list[str]
    kwargs: list[dict[str, Any]]
    prompt: str


def render(base: str, ids: Sequence[str], kwargs: Sequence[dict[str, Any]], separator: str) -> Drawn:
    """The prompt: the base text, then the descriptions (a request to repeat comes last and
    gets ``prompt_to_repeat``: everything before it, IFEval's convention)."""
    kwargs = [dict(k) for k in kwargs]
    order = sorted(range(len(ids)), key=lambda i: ids[i] in REPEATS)
    ids = [ids[i] for i in order]
    kwargs = [kwargs[i] for i in order]
    head = base.strip()
    descriptions = [build_description(i, k) for i, k in zip(ids, kwargs) if i not in REPEATS]
    if descriptions:
        head += separator + " ".join(descriptions)
    prompt = head
    for index, instruction in enumerate(ids):
        if instruction in REPEATS:
            kwargs[index]["prompt_to_repeat"] = head if instruction == REPEAT_PROMPT else base.strip()
            prompt = (
                head
                + (" " if instruction == REPEAT_PROMPT else separator)
                + build_description(instruction, kwargs[index])
            )
    return Drawn(ids, kwargs, prompt)


def draw_row(
    base: str, rng: random.Random, pool: Sequence[str], counts: tuple[int, int], rejected: Counter | None = None
) -> Drawn | None:
    """Instructions and kwargs for ``base`` that have a witness (module docstring), or None
    after 40 tries. ``rejected`` counts the instructions of each combination drawn again."""
    words = content_words(base)
    for _ in range(10):
        ids = draw_ids(rng, draw_count(rng, *counts), pool)
        if not ids:
            return None
        for _ in range(4):
            ctx = Context(base, words)
            kwargs: dict[str, dict[str, Any]] = {}
            for instruction in sorted(ids, key=lambda i: SPECS[i].phase):
                kwargs[instruction] = SPECS[instruction].draw(rng, ctx)
            drawn = render(base, ids, [kwargs[i] for i in ids], rng.choice((" ", "\n\n")))
            if satisfying_response(drawn.ids, drawn.kwargs) is not None:
                return drawn
            if rejected is not None:
                rejected.update(ids)
    return None
