"""Multiple-choice accuracy: MMLU, MMLU-Pro, GPQA-Diamond (SPEC section 9, the knowledge rows of
the paper's main table).

``score(response, answer=..., choices=None)`` reads the answer (the text after ``</think>``; an
unfinished thinking response has no answer and scores 0), extracts the option letter the model
chose and compares it with the gold letter: 1.0 when they are equal, else 0.0.

**The gold letter** (``answer``) may be a letter (``"C"``, ``"(c)"``), a 0-based option index
(MMLU's ``answer: 2``), or the text of the right option when ``choices`` lists the options
(GPQA's "Correct Answer").

**Extraction** looks at the answer only, never at the reasoning, and takes the *last* occurrence
of the first of these forms that occurs at all (later forms are fallbacks):

1. ``\\boxed{C}`` (also ``\\boxed{(C)}``, ``\\boxed{\\text{C}}``, ``\\boxed{C. Paris}``);
2. an answer statement: ``Answer: C``, ``**Answer:** (C)``, ``The answer is C``, ``the correct
   answer is: [C]``, ``Final answer - C)``, ``The best option is C``, ``Answer: option c``,
   ``答案：C``;
3. an option statement: ``Option C is correct``, ``choice (c) is the right answer`` (a note
   naming another option after an answer statement never wins: statements come first);
4. a last line that is a bare option label: ``C``, ``(C)``, ``C.``, ``**C**``, ``c``, or ``C)
   Paris`` when it is the only option-shaped line of the answer (an answer that lists every
   option chooses none of them);
5. with ``choices``: the last line, or the text after "the answer is", equal to one option's
   text (case, surrounding punctuation and markup ignored).

Letters range over the row's options (``choices``; else ``num_choices``, default 10 = A-J as in
MMLU-Pro) and must stand alone: ``Answer: Carbon`` names no letter, and the pronoun in
``Answer: I think...`` is not option I. Lower-case letters count only where they cannot be a
word: inside ``\\boxed{}`` or brackets, or followed by the end of the line, punctuation or
"is / because / since" (``Answer: c``, ``The answer is (c)``), so the article in ``The answer is
a city`` and the ``e`` of ``e.g.`` are no options; a lower-case label line is a bare letter.
Details: ``extracted`` (the letter, or None), ``gold`` and ``form`` (which rule matched).
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from typing import Any

from cascade_rl.chat import split_thinking
from cascade_rl.rewards.base import Score

LETTERS = string.ascii_uppercase
DEFAULT_NUM_CHOICES = 10
_MARKUP = re.compile(r"\*\*|__|`|\$")
_LATEX_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\{([^{}]*)\}")
# a letter that stands alone: not part of a word, and not the pronoun of "I think" / "I'm"
_ALONE = r"(?![A-Za-z0-9])(?!(?<=I)(?:'|\s+[a-z]))"
_BOXED = re.compile(r"\\boxed\{\s*[\(\[]?([A-Za-z])[\)\]]?" + r"(?![A-Za-z0-9])")
# a lower-case letter is an option only where it cannot be a word ("a" the article, "e.g."):
# bracketed, or followed by the end of the line, punctuation that ends it, or "is / because / since"
_LOWER = r"[a-z](?=[\)\]]|[.,;:!?](?![A-Za-z0-9])|[ \t]*(?:\n|$)|\s+(?:is|because|since)\b)"
_STATEMENT = re.compile(
    r"(?:\b(?:[Aa]nswer|ANSWER|(?:[Cc]orrect|[Rr]ight|[Bb]est|[Ff]inal)\s+(?:[Oo]ption|[Cc]hoice))|答案)"
    r"(?:\s+(?:is|would\s+be|will\s+be))?\s*(?:[:：=\-]|是|为)?\s*"
    r"(?:(?:[Oo]ption|[Cc]hoice)\s+)?[\(\[]?([A-Z]|" + _LOWER + r")[\)\]]?" + _ALONE
)
# "Option C is correct", "choice (c) is the right answer" (not "is incorrect" / "is not correct")
_OPTION_IS = re.compile(
    r"\b(?:[Oo]ption|[Cc]hoice)\s+[\(\[]?([A-Za-z])[\)\]]?\s+(?:is|would\s+be)\s+(?:the\s+)?(?:correct|right|best)\b"
)
_LABEL_LINE = re.compile(r"^\s*[\(\[]?([A-Z])(?:[\)\]\.:]\s*(.*))?\s*$")
_LOWER_LINE = re.compile(r"^\s*[\(\[]?([a-z])[\)\]\.:]?\s*$")
_ANSWER_IS = re.compile(r"(?i)\banswer\s*(?:is|:)\s*(.+)$")


def score(
    response: str,
    *,
    answer: Any,
    choices: Sequence[str] | None = None,
    num_choices: int = DEFAULT_NUM_CHOICES,
    prompt: Any = None,
) -> Score:
    """1.0 when the letter the answer chooses equals the gold letter (module docstring)."""
    letters = option_letters(choices, num_choices)
    gold = gold_letter(answer, choices, letters)
    split = split_thinking(response or "")
    if not split.finished:
        return Score(0.0, {"extracted": None, "gold": gold, "form": None, "error": "unfinished thinking"})
    extracted, form = extract_choice(split.answer, letters, choices)
    return Score(1.0 if extracted == gold else 0.0, {"extracted": extracted, "gold": gold, "form": form})


def option_letters(choices: Sequence[str] | None, num_choices: int = DEFAULT_NUM_CHOICES) -> str:
    """The letters a row's options are labelled with (A.. for ``len(choices)`` or ``num_choices``)."""
    count = len(choices) if choices else num_choices
    if not 2 <= count <= len(LETTERS):
        raise ValueError(f"a multiple-choice row needs 2 to 26 options, got {count}")
    return LETTERS[:count]


def gold_letter(answer: Any, choices: Sequence[str] | None, letters: str) -> str:
    """The gold option letter from a letter, a 0-based index or the right option's text."""
    if isinstance(answer, bool):
        raise ValueError(f"answer must be a letter, an option index or an option's text, got {answer!r}")
    if isinstance(answer, int):
        if not 0 <= answer < len(letters):
            raise ValueError(f"answer index {answer} is outside the {len(letters)} options")
        return letters[answer]
    if not isinstance(answer, str) or not answer.strip():
        raise ValueError(f"answer must be a letter, an option index or an option's text, got {answer!r}")
    text = answer.strip()
    bare = text.strip("()[]. ").upper()
    if len(bare) == 1 and bare in letters:
        return bare
    if choices:
        matches = [letters[i] for i, option in enumerate(choices) if _plain(option) == _plain(text)]
        if len(matches) == 1:
            return matches[0]
    raise ValueError(f"answer {answer!r} is not one of the option letters {letters[0]}-{letters[-1]}")


def extract_choice(answer: str, letters: str, choices: Sequence[str] | None = None) -> tuple[str | None, str | None]:
    """(letter, form) chosen by ``answer`` (the text after ``</think>``), or (None, None)."""
    text = _LATEX_TEXT.sub(r"\1", _MARKUP.sub("", answer or ""))
    for form, pattern in (("boxed", _BOXED), ("statement", _STATEMENT), ("option statement", _OPTION_IS)):
        found = [m.group(1).upper() for m in pattern.finditer(text) if m.group(1).upper() in letters]
        if found:
            return found[-1], form
    lines = [line for line in text.splitlines() if line.strip()]
    if lines:
        last = _LABEL_LINE.match(lines[-1])
        option_lines = sum(1 for line in lines if _LABEL_LINE.match(line))
        if last and last.group(1) in letters and (not last.group(2) or option_lines == 1):
            return last.group(1), "label"
        lower = _LOWER_LINE.match(lines[-1])
        if lower and lower.group(1).upper() in letters:
            return lower.group(1).upper(), "label"
    if choices and lines:
        return _by_option_text(lines[-1], letters, choices)
    return None, None


def _by_option_text(last_line: str, letters: str, choices: Sequence[str]) -> tuple[str | None, str | None]:
    stated = _ANSWER_IS.search(last_line)
    for candidate in ([stated.group(1)] if stated else []) + [last_line]:
        matches = [letters[i] for i, option in enumerate(choices) if _plain(option) == _plain(candidate)]
        if len(matches) == 1:
            return matches[0], "option text"
    return None, None


def _plain(text: str) -> str:
    """Text compared with option texts: markup, case, outer punctuation and runs of space ignored."""
    return re.sub(r"\s+", " ", _MARKUP.sub("", str(text))).strip().strip(".,;:!?\"'").strip().casefold()
