"""The NLTK-free text primitives behave like the NLTK functions IFEval relies on (SPEC 6)."""

from __future__ import annotations

import pytest

from cascade_rl.rewards.ifeval.text import (
    count_sentences,
    count_syllables,
    count_words,
    detect_language,
    is_emoji,
    split_sentences,
    word_tokenize,
)


# Expected values: NLTK 3.9.2's ``sent_tokenize`` / ``word_tokenize`` (Punkt's English model) on
# these texts, run outside this project.
@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
        ("Dr. Smith met Mrs. Jones at 3 p.m. today.", ["Dr. Smith met Mrs. Jones at 3 p.m. today."]),
        ("We use e.g. tea, i.e. a drink. It is good.", ["We use e.g.", "tea, i.e.", "a drink.", "It is good."]),
        ("Pi is 3.14 roughly. Yes.", ["Pi is 3.14 roughly.", "Yes."]),
        ('He said "stop." Then he left.', ['He said "stop."', "Then he left."]),
        ("She said \u201cgo.\u201d Then left.", ["She said \u201cgo.\u201d Then left."]),
        ("Wait... what? Really?! Yes... Go.", ["Wait... what?", "Really?!", "Yes... Go."]),
        ("He can't be... I was there.", ["He can't be...", "I was there."]),
        ("A title\n\nA paragraph without a period", ["A title\n\nA paragraph without a period"]),
        ("Item No. 5 works. J. R. R. Tolkien wrote.", ["Item No.", "5 works.", "J. R. R. Tolkien wrote."]),
        ("apples, pears, etc. and more", ["apples, pears, etc.", "and more"]),
        ("Gen Z. This generation", ["Gen Z.", "This generation"]),
        ("Steps:\n1. **Title**: foo.\n2. Bar baz.", ["Steps:\n1.", "**Title**: foo.", "2.", "Bar baz."]),
        ("Steps:\n1. Introduction\n2. the end", ["Steps:\n1.", "Introduction\n2. the end"]),
        ("the glow.*\n\n**EXT.", ["the glow.", "*\n\n**EXT."]),
        ("P.S.: ok", ["P.S.", ": ok"]),
        ("It ended.) Next one.", ["It ended.)", "Next one."]),
        ("Wow !?! Great", ["Wow !", "?!", "Great"]),
        ("Michael's. His hand", ["Michael's.", "His hand"]),
        ("  Lead space. Next.  ", ["  Lead space.", "Next."]),
        ("end.Next word", ["end.Next word"]),
        ("", []),
    ],
)
def test_split_sentences(text: str, sentences: list[str]) -> None:
    assert split_sentences(text) == sentences
    assert count_sentences(text) == len(sentences)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Don't stop, U.S. people!", ["Do", "n't", "stop", ",", "U.S.", "people", "!"]),
        ("I cannot; it's Tom's 1,000.50", ["I", "can", "not", ";", "it", "'s", "Tom", "'s", "1,000.50"]),
        ("well-known -- (yes)", ["well-known", "--", "(", "yes", ")"]),
        ('"Hi" she said.', ["``", "Hi", "''", "she", "said", "."]),
        ("über café 日本", ["über", "café", "日本"]),
        (
            "Let x^2 + \\frac{a}{b} = 3. Then y.",
            ["Let", "x^2", "+", "\\frac", "{", "a", "}", "{", "b", "}", "=", "3", ".", "Then", "y", "."],
        ),
        (
            "She said 'hello' and \u201cbye\u201d... OK?",
            ["She", "said", "'hello", "'", "and", "\u201c", "bye", "\u201d", "...", "OK", "?"],
        ),
        (
            "gimme $5 @home #tag 50% & more; wanna go",
            ["gim", "me", "$", "5", "@", "home", "#", "tag", "50", "%", "&", "more", ";", "wan", "na", "go"],
        ),
        ("1. Item one.\n2. Item two", ["1", ".", "Item", "one", ".", "2", ".", "Item", "two"]),
    ],
)
def test_word_tokenize(text: str, tokens: list[str]) -> None:
    assert word_tokenize(text) == tokens


def test_count_words_is_ifevals_word_regex() -> None:
    assert count_words("It's a well-known fact: 3.5 > 2!") == 9  # It s a well known fact 3 5 2


def test_language_detection_is_deterministic() -> None:
    answers = set()
    for _ in range(3):
        detect_language.cache_clear()  # a fresh detection each time, not the cached answer
        answers.add(detect_language("ciao come stai oggi amico"))
    assert len(answers) == 1
    assert detect_language("Das ist ein ganz normaler deutscher Satz über das Wetter.") == "de"
    assert detect_language("12345 !!!") is None


def test_emoji_and_syllables() -> None:
    assert is_emoji("🙂") and is_emoji("⭐") and not is_emoji("a") and not is_emoji("🙂🙂")
    assert [count_syllables(w) for w in ("cat", "table", "paper", "make", "beautiful", "42")] == [1, 2, 2, 1, 3, 0]
