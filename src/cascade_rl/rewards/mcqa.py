"""Multiple-choice QA as Nemotron-Cascade 2 scores it (SPEC section 11; NVIDIA's ``mcqa`` resources
server in NeMo Gym, whose row fields and grading modes this keeps verbatim).

``score(response, options=[{"A": "..."}, {"B": "..."}], expected_answer="B",
grading_mode="strict_single_letter_boxed", template_metadata=None)`` reads the answer (the text
after ``</think>``; an unfinished thinking block has no answer and scores 0) and gives 1 when the
letter it extracts is ``expected_answer`` (upper-cased), else 0. The letters a row allows are the
single-letter keys of ``options`` whose text is not null.

**Grading modes** (``grading_mode``; the default is Cascade 2's):

* ``strict_single_letter_boxed``: only the **last** ``\\boxed{...}`` counts (braces balanced); its
  content, without ``\\text{...}`` wrappers, must be a single upper-case letter with no other
  letter around it (``\\boxed{C}``, ``\\boxed{ [C] }``, ``\\boxed{\\text{C}}``) or start with the
  letter and a label mark (``\\boxed{C: option text}``, ``C)``, ``C.``, ``C-``). Anything else
  (``\\boxed{c}``, ``\\boxed{Paris}``, an ``Answer: C`` line) extracts nothing.
* ``lenient_boxed``: the strict reading, else the one option whose text (case and runs of space
  ignored) appears inside the last box.
* ``lenient_answer_colon``: the first ``Answer: ...`` of the answer: a single allowed letter, or
  exactly one option's text.
* ``lenient_answer_colon_md``: the last ``Answer: ...`` line (markdown emphasis allowed) whose
  payload names one choice letter (a leading letter, else the last stand-alone capital; a list of
  several letters names none).

``template_metadata.output_regex`` (a pattern or a list), when the row has one, is tried first
(case-insensitive, last match; a captured letter is taken as given, an option's text maps to its
letter); when it finds nothing the grading mode decides. Details: ``extracted`` (the letter or
None), ``expected`` and ``mode``.

**One answer only** (option ``single_answer``, off by default: NVIDIA's grading reads one site and
ignores the rest). Reading one box of several is gameable: a policy that writes ``\\boxed{A}``,
``\\boxed{B}``, ... down the options scores whenever the gold letter is the one read (SmolLM2
learned exactly this in 8 RL steps, docs/real-model.md). With ``single_answer: true`` an answer
whose sites name two or more different letters scores 0 (``rejected: "several answers"``, the
letters in ``answers``): every ``\\boxed{}`` in the boxed modes, every ``Answer:`` line in the
colon modes, each read as the mode reads its one site, and every match of the row's
``output_regex``. Repeating the same letter is one answer.

The older ``multiple_choice`` domain (:mod:`.choice`, MMLU / GPQA evaluation) reads answers more
leniently; the two share the brace reader of :mod:`.math`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from cascade_rl.chat import split_thinking
from cascade_rl.rewards.base import Score
from cascade_rl.rewards.math import braced_content

GRADING_MODES = ("strict_single_letter_boxed", "lenient_boxed", "lenient_answer_colon", "lenient_answer_colon_md")
DEFAULT_GRADING_MODE = "strict_single_letter_boxed"

_LETTER_ONLY = re.compile(r"^[^A-Za-z]*([A-Z])[^A-Za-z]*$")
_LETTER_LABEL = re.compile(r"^\s*([A-Z])\s*[:).\-]")
_TEXT_WRAPPER = re.compile(r"\\text\{\s*(.*?)\s*\}", re.S)
_ANSWER_COLON = re.compile(r"(?i)answer\s*:\s*(.+)")
_ANSWER_LINE = re.compile(r"(?im)[*_]{0,2}Answer[*_]{0,2}\s*:[*_\s]{0,2}(.+)")
_CHOICE_LETTER = re.compile(r"(?<![A-Za-z])([A-Za-z])(?![A-Za-z])")
_LEADING_LETTER = re.compile(r"^([a-zA-Z])(?![a-zA-Z0-9])")
_LAST_CAPITAL = re.compile(r"\b[A-Z]\b(?!.*\b[A-Z]\b)", re.S)
_LIST_SEPARATOR = re.compile(r"(?:\s*[/|&,;]\s*|\s+(?:or|and)\s+|\s+)", re.I)
#: answer letters written in other scripts (Arabic, Bengali, full-width), read as A-D
_FOREIGN_LETTERS = str.maketrans(
    {"أ": " A", "ب": " B", "ج": " C", "د": " D", "অ": " A", "ব": " B", "ড": " C", "ঢ": " D"}
    | {"Ａ": " A", "Ｂ": " B", "Ｃ": " C", "Ｄ": " D"}
)


def score(
    response: str,
    *,
    options: Sequence[Mapping[str, Any]],
    expected_answer: Any,
    grading_mode: str | None = None,
    template_metadata: Mapping[str, Any] | None = None,
    single_answer: bool = False,
    prompt: Any = None,
) -> Score:
    """1.0 when the extracted letter is ``expected_answer`` (module docstring); with
    ``single_answer``, 0.0 when the answer names several different letters."""
    mode = grading_mode or DEFAULT_GRADING_MODE
    if mode not in GRADING_MODES:
        raise ValueError(f"grading_mode must be one of {', '.join(GRADING_MODES)}, got {grading_mode!r}")
    choices = option_texts(options)
    expected = str(expected_answer or "").strip().upper()
    split = split_thinking(response or "")
    text = split.answer.strip()
    details: dict[str, Any] = {"extracted": None, "expected": expected, "mode": mode}
    if not split.finished:
        return Score(0.0, {**details, "error": "unfinished thinking"})
    if not text:
        return Score(0.0, details)
    patterns = (template_metadata or {}).get("output_regex")
    if single_answer and len(named := answers_named(text, choices, mode, patterns)) > 1:
        return Score(0.0, {**details, "rejected": "several answers", "answers": named})
    letter = None
    if patterns:
        letter = _by_template(text, patterns, choices)
    if letter is None:
        letter = extract_letter(text, choices, mode)
    details["extracted"] = letter
    return Score(1.0 if letter is not None and expected and letter == expected else 0.0, details)


def check_row(row: Mapping[str, Any]) -> None:
    """A row this scorer can grade: readable ``options`` that include ``expected_answer``, a known
    ``grading_mode`` and ``template_metadata`` that is an object (ValueError names the field)."""
    choices = option_texts(row.get("options"))
    expected = str(row.get("expected_answer") or "").strip().upper()
    if expected not in choices:
        raise ValueError(f"expected_answer {row.get('expected_answer')!r} is not one of the options' letters")
    mode = row.get("grading_mode")
    if mode is not None and mode not in GRADING_MODES:
        raise ValueError(f"grading_mode must be one of {', '.join(GRADING_MODES)}, got {mode!r}")
    metadata = row.get("template_metadata")
    if metadata is not None and not isinstance(metadata, Mapping):
        raise ValueError("template_metadata must be an object")


def option_texts(options: Any) -> dict[str, str]:
    """``{letter: text}`` of a row's ``options`` (a list of one-key objects); entries whose key is
    not a single letter or whose text is null allow no letter."""
    if not isinstance(options, (list, tuple)) or not all(isinstance(entry, Mapping) for entry in options):
        raise ValueError("options must be a list of {letter: text} objects")
    return {
        key.upper(): str(text)
        for entry in options
        for key, text in entry.items()
        if isinstance(key, str) and len(key) == 1 and key.isalpha() and text is not None
    }


def extract_letter(text: str, choices: Mapping[str, str], mode: str = DEFAULT_GRADING_MODE) -> str | None:
    """The letter ``text`` chooses under grading ``mode``, or None."""
    if mode == "lenient_answer_colon":
        return _after_answer_colon(text, choices)
    if mode == "lenient_answer_colon_md":
        for payload in reversed(_ANSWER_LINE.findall(text)):
            letter = _payload_letter(payload, choices)
            if letter is not None:
                return letter
        return None
    letter = _boxed_letter(text, choices)
    if letter is None and mode == "lenient_boxed":
        letter = _boxed_option_text(text, choices)
    return letter


def answers_named(
    text: str, choices: Mapping[str, str], mode: str = DEFAULT_GRADING_MODE, template_patterns: Any = None
) -> list[str]:
    """The different letters ``text`` names, in order, reading every site ``mode`` reads one of:
    each ``\\boxed{}`` (boxed modes) or each ``Answer:`` line (colon modes), and every match of
    the row's ``output_regex`` patterns when it has them."""
    template = _template_letters(text, template_patterns, choices) if template_patterns else []
    if mode == "lenient_answer_colon":
        sites = [f"Answer: {payload}" for payload in _ANSWER_COLON.findall(text)]
    elif mode == "lenient_answer_colon_md":
        sites = [f"Answer: {payload}" for payload in _ANSWER_LINE.findall(text)]
    else:
        sites = [f"\\boxed{{{inner}}}" for inner in _boxes(text)]
    letters = [extract_letter(site, choices, mode) for site in sites]
    return list(dict.fromkeys(letter for letter in template + letters if letter is not None))


def _boxes(text: str) -> list[str]:
    """The contents of every literal ``\\boxed{`` whose braces close, in order."""
    contents = []
    start = text.find("\\boxed{")
    while start >= 0:
        inner = braced_content(text, start + len("\\boxed"), escapes=False)
        if inner is not None:
            contents.append(inner)
        start = text.find("\\boxed{", start + 1)
    return contents


def _last_box(text: str) -> str | None:
    """The content of the last literal ``\\boxed{`` (NeMo Gym's reading: no ``\\fbox``, no space
    form, every brace counted)."""
    start = text.rfind("\\boxed{")
    return None if start < 0 else braced_content(text, start + len("\\boxed"), escapes=False)


def _unwrapped(text: str) -> str:
    """``text`` without the ``\\text{...}`` wrappers around all of it."""
    while (match := _TEXT_WRAPPER.fullmatch(text)) is not None:
        text = match.group(1)
    return text


def _normalised(text: str) -> str:
    return " ".join(text.lower().split())


def _boxed_letter(text: str, choices: Mapping[str, str]) -> str | None:
    inner = _last_box(text)
    if inner is None:
        return None
    inner = _unwrapped(inner.strip())
    match = _LETTER_ONLY.match(inner) or _LETTER_LABEL.match(inner)
    return match.group(1) if match and match.group(1) in choices else None


def _boxed_option_text(text: str, choices: Mapping[str, str]) -> str | None:
    inner = _last_box(text)
    if inner is None:
        return None
    candidates = {_normalised(inner.strip()), _normalised(_unwrapped(inner.strip()))}
    options = {letter: _normalised(option) for letter, option in choices.items()}
    matched = {letter for letter, option in options.items() for c in candidates if option and option in c}
    return matched.pop() if len(matched) == 1 else None


def _after_answer_colon(text: str, choices: Mapping[str, str]) -> str | None:
    match = _ANSWER_COLON.search(text)
    if not match:
        return None
    candidate = _unwrapped(match.group(1)).strip()
    if len(candidate) == 1 and candidate.isalpha() and candidate.upper() in choices:
        return candidate.upper()
    wanted = _normalised(candidate)
    return next((letter for letter, option in choices.items() if _normalised(option) == wanted), None)


def _payload_letter(payload: str, choices: Mapping[str, str]) -> str | None:
    """The one choice letter an ``Answer:`` payload names (None for a list of letters)."""
    candidate = payload.translate(_FOREIGN_LETTERS).strip().strip("*_` \t\n\r.,;:")
    found = [(m.group(1).upper(), m.span(1)) for m in _CHOICE_LETTER.finditer(candidate)]
    found = [(letter, span) for letter, span in found if letter in choices]
    for (left, (_, end)), (right, (start, _)) in zip(found, found[1:]):
        if left != right and _LIST_SEPARATOR.fullmatch(candidate[end:start]):
            return None
    letter = candidate if len(candidate) == 1 else None
    if letter is None:
        leading = _LEADING_LETTER.match(candidate)
        last = None if leading else _LAST_CAPITAL.search(candidate)
        letter = leading.group(1) if leading else (last.group(0) if last else None)
    return letter.upper() if letter and letter.upper() in choices else None


def _by_template(text: str, patterns: Any, choices: Mapping[str, str]) -> str | None:
    """The letter a row's own ``output_regex`` finds (the last match of the first pattern that
    names a letter; a captured letter is trusted even when the options do not list it, as NeMo
    Gym does)."""
    for pattern in _patterns(patterns):
        matches = _matches(pattern, text)
        letter = _template_letter(matches[-1], choices) if matches else None
        if letter is not None:
            return letter
    return None


def _template_letters(text: str, patterns: Any, choices: Mapping[str, str]) -> list[str]:
    """The letter of every match of every ``output_regex`` pattern, in order."""
    letters = (_template_letter(match, choices) for p in _patterns(patterns) for match in _matches(p, text))
    return [letter for letter in letters if letter is not None]


def _patterns(patterns: Any) -> list[str]:
    return [patterns] if isinstance(patterns, str) else list(patterns)


def _matches(pattern: str, text: str) -> list[Any]:
    try:
        return re.findall(pattern, text, re.IGNORECASE)
    except re.error:
        return []


def _template_letter(match: Any, choices: Mapping[str, str]) -> str | None:
    """The letter one regex match names: a captured letter as given, else an option's text."""
    captured = (match[0] if isinstance(match, tuple) else match).strip().translate(_FOREIGN_LETTERS).strip().upper()
    if len(captured) == 1 and captured.isalpha():
        return captured
    wanted = _normalised(captured)
    return next((k for k, option in choices.items() if _normalised(option) == wanted), None)
