"""The witness of ``cascade data constrain`` (:mod:`cascade_rl.data.constrain`): an answer
constructed to follow every drawn instruction, kept only when the IF-RL scorer gives it 1.0, so
no row is unsatisfiable by construction."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from cascade_rl.data.constrain.vocabulary import (
    BIGRAMS,
    BLANK_PARAGRAPHS,
    BRACKETS,
    BULLETS,
    CAPITAL_WORDS,
    CAPITALS,
    CAPS,
    CARRIERS,
    COMPOSITION,
    CONSTRAINED,
    COPY,
    COPY_MULTIPLE,
    COPY_SIMPLE,
    COPY_SPAN,
    END_PHRASE,
    EXCLUDE,
    EXISTENCE,
    FILLER,
    FIRST_WORD,
    FIRST_WORD_SENTENCES,
    FORBIDDEN,
    FREQUENCY,
    HIGHLIGHTS,
    HYPHENS,
    INCREMENT,
    JSON,
    LANGUAGE,
    LANGUAGE_FILLER,
    LANGUAGE_TITLES,
    LAST_WORD,
    LAST_WORD_SENTENCES,
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
    PALINDROMES,
    PARAGRAPHS,
    PLACEHOLDER_NAMES,
    PLACEHOLDERS,
    POSITION,
    POSTSCRIPT,
    QUOTATION,
    REPEAT_PHRASE,
    REPEAT_PROMPT,
    SECTIONS,
    STAR_PARAGRAPHS,
    START_END,
    TITLE,
    TITLES,
    TWO_RESPONSES,
    UNIQUE,
    WORD_NUMBER,
    WORD_ONCE,
    WORDS,
)
from cascade_rl.rewards.ifeval import score
from cascade_rl.rewards.ifeval.ifeval_checks import has_word


# ------------------------------------------------------------------------------ the witness
def follows(text: str, ids: Sequence[str], kwargs: Sequence[Mapping[str, Any]]) -> bool:
    """The registry's strict verdict on ``text`` (the IF-RL reward is 1.0)."""
    return score(text, instruction_id_list=list(ids), kwargs=list(kwargs)).reward == 1.0


FILL_STEPS = (1, 2, 3, 4, 6, 9, 13, 18, 25, 34)


def satisfying_response(ids: Sequence[str], kwargs: Sequence[Mapping[str, Any]]) -> str | None:
    """An answer that follows every instruction (checked with the scorer), or None when this
    constructor finds none: more or fewer filler sentences, short or long ones, are tried."""
    given = {i: dict(k) for i, k in zip(ids, kwargs)}
    for fill in FILL_STEPS:
        for long in (False, True):
            text = _Witness(given, fill, long).build()
            if text is not None and follows(text, ids, kwargs):
                return text
    return None


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


class _Witness:
    """One attempt at an answer: ``fill`` filler sentences (joined in threes when ``long``),
    the words, lines and layout the instructions ask for, then character-level changes."""

    def __init__(self, given: dict[str, dict[str, Any]], fill: int, long: bool) -> None:
        self.given = given
        self.fill = fill
        self.long = long
        self.language = given.get(LANGUAGE, {}).get("language")
        self.bank = self._bank()

    # --- what sentences may contain
    def banned_words(self) -> list[str]:
        words = list(self.given.get(FORBIDDEN, {}).get("forbidden_words", []))
        if EXCLUDE in self.given:
            words.append(self.given[EXCLUDE]["keyword"])
        return words

    def limited(self) -> list[str]:
        """Substrings that must not occur outside the sentences written for them."""
        words = []
        for instruction in (FREQUENCY, WORD_NUMBER, WORD_ONCE):
            if instruction in self.given:
                words.append(self.given[instruction]["keyword"])
        if INCREMENT in self.given:
            words += [self.given[INCREMENT]["keyword1"], self.given[INCREMENT]["keyword2"]]
        return words

    def limited_letters(self) -> str:
        letters = ""
        for instruction in (LETTER_FREQUENCY, LETTER_FREQUENCY_2):
            arguments = self.given.get(instruction)
            if arguments and arguments["let_relation"] == "less than":
                letters += arguments["letter"].lower()
        return letters

    def ok(self, sentence: str) -> bool:
        lower = sentence.lower()
        if any(has_word(word, sentence) for word in self.banned_words()):
            return False
        if any(word.lower() in lower for word in self.limited()):
            return False
        if any(letter in lower for letter in self.limited_letters()):
            return False
        return not (NO_EXCLAMATION in self.given and "!" in sentence)

    def _bank(self) -> list[str]:
        source = LANGUAGE_FILLER[self.language] if self.language else FILLER
        return [s for s in source if self.ok(s)]

    def sentences(self, count: int, offset: int = 0) -> list[str]:
        if not self.bank:
            return []
        out = [self.bank[(offset + i) % len(self.bank)] for i in range(count)]
        if self.long:
            groups = [out[i : i + 3] for i in range(0, len(out), 3)]
            out = [" and ".join([g[0][:-1], *(_lower_first(s[:-1]) for s in g[1:])]) + "." for g in groups]
        return out

    def first_ok(self, options: Iterable[str]) -> str | None:
        return next((option for option in options if self.ok(option)), None)

    def carrier(self, word: str, index: int = 0) -> str | None:
        """A sentence holding ``word`` once, the rest of it allowed."""
        for shift in range(len(CARRIERS)):
            template = CARRIERS[(index + shift) % len(CARRIERS)]
            if self.ok(template.replace("{w}", "")):
                return template.format(w=word)
        return None

    # --- the pieces
    def inserts(self) -> list[str] | None:
        """Sentences the answer must contain: keywords, placeholders, palindrome, highlights,
        all-caps words."""
        given, out = self.given, []
        words: list[tuple[str, int]] = []
        if EXISTENCE in given:
            words += [(w, 1) for w in given[EXISTENCE]["keywords"]]
        for instruction in (FREQUENCY, WORD_NUMBER):
            if instruction in given:
                arguments = given[instruction]
                at_least = arguments["relation"] == "at least"
                times = arguments["frequency"] if at_least else min(1, arguments["frequency"] - 1)
                words.append((arguments["keyword"], times))
        if WORD_ONCE in given:
            words.append((given[WORD_ONCE]["keyword"], 1))
        if INCREMENT in given:
            words += [(given[INCREMENT]["keyword1"], 1), (given[INCREMENT]["keyword2"], 2)]
        for word, times in words:
            for index in range(times):
                sentence = self.carrier(word, index)
                if sentence is None:
                    return None
                out.append(sentence)
        if PLACEHOLDERS in given:
            count = given[PLACEHOLDERS]["num_placeholders"]
            names = [PLACEHOLDER_NAMES[i % len(PLACEHOLDER_NAMES)] for i in range(count)]
            out.append("Fill in " + " and ".join(f"[{n}]" for n in names) + ".")
        if PALINDROME in given:
            word = self.first_ok(f"A {p} is easy to spot." for p in PALINDROMES)
            if word is None:
                return None
            out.append(word)
        if HIGHLIGHTS in given:
            pieces = self.sentences(given[HIGHLIGHTS]["num_highlights"], offset=5)
            out += [f"*{s[:-1]}*." for s in pieces]
        if CAPITAL_WORDS in given and given[CAPITAL_WORDS]["capital_relation"] == "at least":
            count = given[CAPITAL_WORDS]["capital_frequency"]
            out.append("Remember " + " ".join(CAPS[i % len(CAPS)] for i in range(count)) + ".")
        return out

    def letter_top_up(self, text: str) -> str | None:
        """A sentence of words with the letter when an "at least" letter count falls short."""
        for instruction in (LETTER_FREQUENCY, LETTER_FREQUENCY_2):
            arguments = self.given.get(instruction)
            if not arguments or arguments["let_relation"] != "at least":
                continue
            letter = arguments["letter"].lower()
            missing = arguments["let_frequency"] - text.lower().count(letter)
            if missing <= 0:
                continue
            words = [w for w in WORDS if letter in w and self.ok(w)]
            if not words:
                return None
            chosen: list[str] = []
            while missing > 0:
                word = words[len(chosen) % len(words)]
                chosen.append(word)
                missing -= word.count(letter)
            return "Words like " + " ".join(chosen) + " come up."
        return ""

    def title(self) -> str | None:
        if self.language:
            return f"<<{LANGUAGE_TITLES[self.language]}>>"
        found = self.first_ok(TITLES)
        return f"<<{found}>>" if found else None

    # --- the answer
    def build(self) -> str | None:
        given = self.given
        if len(given) == 1:
            special = self._alone(next(iter(given)))
            if special is not None or next(iter(given)) in _ALONE_BUILDERS:
                return special
        if not self.bank:
            return None
        inserts = self.inserts()
        if inserts is None:
            return None
        if JSON in given:
            body = " ".join([*self.sentences(self.fill), *inserts])
            return self.finish(json.dumps({"answer": body}, ensure_ascii=False))
        if TWO_RESPONSES in given:
            title = self.title() if TITLE in given else ""
            first = " ".join([*self.sentences(max(1, self.fill)), *inserts])
            second = " ".join([*self.sentences(max(1, self.fill), offset=11), *inserts])
            if title is None:
                return None
            return self.finish(f"{title}\n{first}\n******\n{title}\n{second}".replace("\n\n", "\n").strip())
        text = self.document(inserts)
        if text is None:
            return None
        top_up = self.letter_top_up(text)
        if top_up is None:
            return None
        if top_up:
            text = self.document([*inserts, top_up])
            if text is None:
                return None
        return self.finish(text)

    def layout(self) -> tuple[int, str]:
        """Paragraph count and separator."""
        given = self.given
        if PARAGRAPHS in given:
            return given[PARAGRAPHS]["num_paragraphs"], "\n***\n"
        if STAR_PARAGRAPHS in given:
            return 2, "\n***\n"
        if BLANK_PARAGRAPHS in given:
            return 2, "\n\n"
        if NTH_PARAGRAPH in given:
            return given[NTH_PARAGRAPH]["num_paragraphs"], "\n\n"
        if SECTIONS in given:
            return given[SECTIONS]["num_sections"], "\n\n"
        return 1, "\n\n"

    def document(self, inserts: list[str]) -> str | None:
        given = self.given
        count, separator = self.layout()
        filler = self.sentences(max(self.fill, count))
        if len(filler) < count:
            return None
        paragraphs: list[list[str]] = [[] for _ in range(count)]
        for index, sentence in enumerate(filler):
            paragraphs[index * count // len(filler)].append(sentence)
        first = paragraphs[0]
        first[1:1] = inserts  # after the opening sentence
        if NTH_PARAGRAPH in given:
            arguments = given[NTH_PARAGRAPH]
            target = paragraphs[arguments["nth_paragraph"] - 1]
            target[0] = f"{_upper_first(arguments['first_word'])} {_lower_first(target[0])}"
        if FIRST_WORD in given:
            first[0] = f"{_upper_first(given[FIRST_WORD]['first_word'])}: {_lower_first(first[0])}"
        texts = [" ".join(p) for p in paragraphs]
        if BULLETS in given:
            bullets = self.sentences(given[BULLETS]["num_bullets"], offset=17)
            if len(set(bullets)) < len(bullets):
                return None
            texts[0] += "\n" + "\n".join(f"* {b}" for b in bullets)
        if SECTIONS in given:
            splitter = given[SECTIONS]["section_spliter"]
            texts = [f"{splitter} {i + 1}\n{t}" for i, t in enumerate(texts)]
        if TITLE in given:
            title = self.title()
            if title is None:
                return None
            texts[0] = f"{title}\n{texts[0]}"
        text = separator.join(texts)
        tail = ""
        if POSTSCRIPT in given:
            closing = self.sentences(1, offset=26)
            line = f"{given[POSTSCRIPT]['postscript_marker']} {closing[0] if closing else ''}".strip()
            tail += ("\n" if separator == "\n\n" and count > 1 else "\n\n") + line
        if LAST_WORD in given:
            tail += f" That is all about {given[LAST_WORD]['last_word']}."
        if END_PHRASE in given:
            tail += " " + given[END_PHRASE]["end_phrase"]
        text += tail
        if REPEAT_PROMPT in given:
            text = given[REPEAT_PROMPT]["prompt_to_repeat"] + "\n\n" + text
        return text

    def finish(self, text: str) -> str:
        """Character-level instructions, last: quotes, commas, dots, exclamation marks, case."""
        given = self.given
        if QUOTATION in given:
            text = f'"{text}"'
        if NO_COMMA in given:
            text = text.replace(",", "")
        if NO_DOT in given:
            text = text.replace(".", "")
        if NO_EXCLAMATION in given:
            text = text.replace("!", "")
        if LOWERCASE in given:
            text = text.lower()
        if CAPITALS in given:
            text = text.upper()
        if LOWERCASE_COUNT in given:
            text = re.sub(r"\b[a-z]", lambda m: m.group().upper(), text)
        return text

    # --- instructions that shape the whole answer
    def _alone(self, instruction: str) -> str | None:
        builder = _ALONE_BUILDERS.get(instruction)
        return builder(self, self.given[instruction]) if builder else None

    def words(self, count: int, offset: int = 0) -> list[str]:
        stream = " ".join(self.sentences(count // 5 + 2, offset)).replace(".", "").split()
        return stream[:count]


def _constrained(w: _Witness, a: dict) -> str:
    return " ".join(w.sentences(w.fill)) + " My answer is yes."


def _repeat_phrase(w: _Witness, a: dict) -> str:
    words = a["phrase"].split()
    middle = len(words) // 2
    options = [x for x in ("small", "clear", "quiet", "bright", "steady") if x != words[middle]]
    return "\n".join(" ".join(words[:middle] + [options[i]] + words[middle + 1 :]) for i in range(a["small_n"]))


def _copy(w: _Witness, a: dict) -> str:
    return a["prompt_to_repeat"]


def _copy_multiple(w: _Witness, a: dict) -> str:
    return "\n******\n".join([a["prompt_to_repeat"]] * a["N"])


def _copy_span(w: _Witness, a: dict) -> str:
    return a["prompt_to_repeat"][a["n_start"] : a["n_end"] + 1]


def _hyphens(w: _Witness, a: dict) -> str:
    return "-".join(s for s in w.sentences(max(2, w.fill)) if "-" not in s)


def _brackets(w: _Witness, a: dict) -> str:
    return " ".join(f"[{word}]" for word in " ".join(w.sentences(w.fill)).split())


def _bigrams(w: _Witness, a: dict) -> str:
    words = " ".join(w.sentences(w.fill)).split()
    words = words[: len(words) // 2 * 2]
    return " ".join(f"<<{x} {y}>>" for x, y in zip(words[0::2], words[1::2]))


def _no_consecutive(w: _Witness, a: dict) -> str:
    kept: list[str] = []
    for word in " ".join(w.sentences(w.fill)).split():
        if kept and ord(word[0].lower()) - ord(kept[-1][0].lower()) == 1:
            continue
        kept.append(word)
    return " ".join(kept)


def _position(w: _Witness, a: dict) -> str:
    before = w.sentences(a["n"] - 1)
    words = w.words(a["m"] + 3, offset=9)
    words.insert(a["m"] - 1, a["keyword"])
    return " ".join([*before, _upper_first(" ".join(words)) + "."])


def _start_end(w: _Witness, a: dict) -> str:
    body = " ".join(w.sentences(w.fill)).rstrip(".")
    return f"Answer: {_lower_first(body)} and that is the answer"


def _first_word_sentences(w: _Witness, a: dict) -> str:
    word = _upper_first(a["first_word"])
    return " ".join(f"{word} {_lower_first(s)}" for s in w.sentences(max(1, w.fill)))


def _last_word_sentences(w: _Witness, a: dict) -> str:
    return " ".join(f"{s[:-1]} {a['last_word']}." for s in w.sentences(max(1, w.fill)))


def _composition(w: _Witness, a: dict) -> str:
    stream = w.words(3 * a["n_sent"] * a["n_words"] + 5)
    if len(stream) < 3 * a["n_sent"] * a["n_words"]:
        return ""
    sentences = [
        _upper_first(" ".join(stream[i * a["n_words"] : (i + 1) * a["n_words"]])) + "." for i in range(3 * a["n_sent"])
    ]
    paragraphs = [" ".join(sentences[p * a["n_sent"] : (p + 1) * a["n_sent"]]) for p in range(3)]
    return "\n***\n".join(paragraphs)


def _unique(w: _Witness, a: dict) -> str:
    seen: set[str] = set()
    kept = []
    for word in " ".join(w.sentences(max(2, w.fill))).replace(".", "").split():
        if word.lower() not in seen:
            seen.add(word.lower())
            kept.append(word)
    return " ".join(kept) + "."


_ALONE_BUILDERS: dict[str, Callable[[_Witness, dict], str]] = {
    CONSTRAINED: _constrained,
    REPEAT_PHRASE: _repeat_phrase,
    COPY: _copy,
    COPY_SIMPLE: _copy,
    COPY_MULTIPLE: _copy_multiple,
    COPY_SPAN: _copy_span,
    HYPHENS: _hyphens,
    BRACKETS: _brackets,
    BIGRAMS: _bigrams,
    NO_CONSECUTIVE: _no_consecutive,
    POSITION: _position,
    START_END: _start_end,
    FIRST_WORD_SENTENCES: _first_word_sentences,
    LAST_WORD_SENTENCES: _last_word_sentences,
    COMPOSITION: _composition,
    UNIQUE: _unique,
}
