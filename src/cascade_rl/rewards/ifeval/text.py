"""Text primitives shared by the instruction verifiers (SPEC section 6, IF-RL).

IFEval and IFBench measure text with NLTK: ``word_tokenize`` and the pretrained Punkt
sentence splitter (``sent_tokenize``), both of which need the ``punkt`` data download. This
project downloads nothing at run time, so this module re-implements them:

* :func:`count_words` - IFEval's word count, the ``\\w+`` regular expression (identical).
* :func:`split_sentences` - a Punkt-like splitter. A sentence ends at ``.``, ``?``, ``!`` or
  ``…`` (runs allowed, closing quotes / brackets kept with it) followed by whitespace or the end
  of the text. Differences from Punkt: a period after a known abbreviation (``Dr.``, ``e.g.``,
  ``etc.``, month names, ...) or a single-letter initial never ends a sentence (Punkt sometimes
  does, when the next word is a frequent sentence starter); an ellipsis ends a sentence only when
  the next word is capitalised; Punkt's learned statistics are not used. Like Punkt, line breaks
  alone never end a sentence.
* :func:`word_tokenize` - a Treebank-like tokenizer: punctuation becomes separate tokens,
  contractions split (``don't`` -> ``do`` ``n't``, ``Tom's`` -> ``Tom`` ``'s``, ``cannot`` ->
  ``can`` ``not``), hyphenated words, numbers with separators (``1,000.5``) and dotted acronyms
  (``U.S.``) stay whole; as in NLTK (sentences first, then the Treebank rules), only a
  sentence's final period is a token of its own, one inside a sentence stays on its word
  (``etc.``, the ``I.`` of an outline). Difference from NLTK: quotes are kept as ``"`` (NLTK
  writes `````` and ``''``).
* :func:`detect_language` - ``langdetect`` with ``DetectorFactory.seed = 0`` (deterministic),
  cached per text.
* :func:`is_emoji` (Unicode's single-code-point emoji, as the ``emoji`` package sees them),
  :func:`count_syllables` (``syllapy``'s rules; ``syllapy`` itself when installed),
  :data:`STOP_WORDS` (NLTK's English stop-word list, 179 words) - stand-ins for the ``emoji``
  package, ``syllapy`` and NLTK's corpus.
"""

from __future__ import annotations

import re
import string
import threading
from functools import lru_cache

WORD_RE = re.compile(r"\w+")
PUNCTUATION = string.punctuation
_REMOVE_PUNCTUATION = str.maketrans("", "", PUNCTUATION)


def count_words(text: str) -> int:
    """Number of ``\\w+`` runs (IFEval's ``count_words``)."""
    return len(WORD_RE.findall(text))


def remove_punctuation(text: str) -> str:
    """``text`` without ASCII punctuation characters."""
    return text.translate(_REMOVE_PUNCTUATION)


def bare_words(text: str) -> list[str]:
    """Lower-cased whitespace-separated words with ASCII punctuation removed."""
    return remove_punctuation(text.lower()).split()


def strip_punctuation(word: str) -> str:
    """``word`` without leading / trailing ASCII punctuation and spaces."""
    return word.strip(PUNCTUATION + " ")


# --- sentences -------------------------------------------------------------------------------

_ABBREVIATIONS = frozenset(
    """
mr mrs ms dr prof sr jr st vs etc e.g i.e inc ltd co corp jan feb mar apr jun jul aug sep sept
oct nov dec mt ft approx dept fig gen gov lt col sgt capt rev est u.s u.k a.m p.m cf al vol pp
ph.d no
""".split()
)
# "no." is an abbreviation only before a number ("No. 5"); handled in _is_abbreviation.
_SENTENCE_END = re.compile(r"""(?:[.?!…]+)['"’”)\]»]*(?=\s|$)""")
_NEXT_CHAR = re.compile(r"\s*(\S?)")
_DOTTED_INITIALS = re.compile(r"(?:[a-z]\.)+[a-z]")


def _is_abbreviation(text: str, end: int, next_char: str) -> bool:
    """Whether the single period ending at ``end`` belongs to an abbreviation or initial."""
    start = max(text.rfind(" ", 0, end), text.rfind("\n", 0, end), text.rfind("\t", 0, end)) + 1
    token = text[start:end].lstrip("([{\"'“‘").lower()
    if token == "no":
        return next_char.isdigit()
    if token in _ABBREVIATIONS:
        return True
    return len(token) == 1 and token.isalpha() or bool(_DOTTED_INITIALS.fullmatch(token))


def _ends_sentence(text: str, match: re.Match) -> bool:
    marks = match.group().rstrip("'\"’”)]»")
    next_char = _NEXT_CHAR.match(text, match.end()).group(1)
    if marks == ".":
        return not _is_abbreviation(text, match.start(), next_char)
    if marks.startswith("..") or marks.startswith("…"):
        return next_char.isupper()
    return True


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``, stripped, empty ones dropped (see the module docstring)."""
    return list(_split_sentences(text))


@lru_cache(maxsize=256)
def _split_sentences(text: str) -> tuple[str, ...]:
    """Cached: the instructions of one row (and loose-mode variants) split the same text."""
    sentences: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        if _ends_sentence(text, match):
            piece = text[start : match.end()].strip()
            if piece:
                sentences.append(piece)
            start = match.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return tuple(sentences)


def count_sentences(text: str) -> int:
    return len(split_sentences(text))


# --- words -----------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?:[A-Za-z]\.){2,}(?![A-Za-z])     # dotted acronyms: U.S., e.g.
  | \d+(?:[.,:/]\d+)+                  # numbers with separators: 1,000.5  12:30  1/2
  | \w+(?:[-'’]\w+)*                   # words, hyphenated words, words with apostrophes
  | \.\.\.|--                          # multi-character punctuation
  | [^\w\s]                            # any other symbol on its own
""",
    re.VERBOSE,
)
_CLITIC = re.compile(r"^(.+?)(n['’]t|['’](?:s|re|ve|ll|d|m))$", re.IGNORECASE)


def _split_clitic(token: str) -> list[str]:
    """``don't`` -> ``do`` ``n't``; ``Tom's`` -> ``Tom`` ``'s``; ``cannot`` -> ``can`` ``not``."""
    if "'" not in token and "’" not in token:
        return [token[:3], token[3:]] if token.lower() == "cannot" else [token]
    match = _CLITIC.match(token)
    return [match.group(1), match.group(2)] if match else [token]


def word_tokenize(text: str) -> list[str]:
    """Treebank-like word tokens of ``text`` (see the module docstring)."""
    return list(_word_tokenize(text))


_CLOSERS = frozenset("])}>\"'")


def _sentence_tokens(sentence: str) -> list[str]:
    """Tokens of one sentence. As in the Treebank tokenizer, only the sentence's final period
    (before closing quotes / brackets) is a token of its own; a period inside the sentence stays
    on the word it ends (``I.`` of an outline, ``etc.``, ``Mr.``)."""
    matches = list(_TOKEN.finditer(sentence))
    tokens: list[str] = []
    for index, match in enumerate(matches):
        token = match.group()
        if token == "." and tokens and index and matches[index - 1].end() == match.start():
            final = all(later.group() in _CLOSERS for later in matches[index + 1 :])
            if not final and any(ch.isalnum() for ch in tokens[-1]):
                tokens[-1] += "."
                continue
        tokens.append(token)
    return tokens


@lru_cache(maxsize=256)
def _word_tokenize(text: str) -> tuple[str, ...]:
    pieces = split_sentences(text) if "." in text else [text]
    tokens = [token for piece in pieces for token in _sentence_tokens(piece)]
    if "'" not in text and "’" not in text and "annot" not in text.lower():
        return tuple(tokens)  # nothing to split: skip the per-token pass
    return tuple(piece for token in tokens for piece in _split_clitic(token))


def alnum_tokens(text: str) -> list[str]:
    """Word tokens that contain at least one letter or digit."""
    return [token for token in word_tokenize(text) if any(ch.isalnum() for ch in token)]


# --- language --------------------------------------------------------------------------------

_LANGDETECT_LOCK = threading.Lock()
_langdetect_ready = False


def _langdetect():
    """The ``langdetect`` module with its seed fixed (deterministic) and profiles loaded."""
    global _langdetect_ready
    import langdetect
    from langdetect import DetectorFactory

    if not _langdetect_ready:
        with _LANGDETECT_LOCK:
            if not _langdetect_ready:
                DetectorFactory.seed = 0
                langdetect.detector_factory.init_factory()
                _langdetect_ready = True
    return langdetect


@lru_cache(maxsize=2048)
def detect_language(text: str) -> str | None:
    """ISO code of the language of ``text`` (langdetect), or None when undetectable."""
    langdetect = _langdetect()
    try:
        return langdetect.detect(text)
    except langdetect.LangDetectException:
        return None


# --- emoji, syllables, stop words ------------------------------------------------------------

# Single-code-point emoji of Unicode's emoji list (emoji 16.0: the characters that are an emoji
# on their own, as the ``emoji`` package's ``is_emoji`` reports them; keycap bases such as ``#``
# and ``1`` and plain arrows such as U+2190 are not). Written as inclusive code point ranges.
_EMOJI_TABLE = """
A9 AE 203C 2049 2122 2139 2194-2199 21A9-21AA 231A-231B 2328 23CF 23E9-23F3 23F8-23FA 24C2
25AA-25AB 25B6 25C0 25FB-25FE 2600-2604 260E 2611 2614-2615 2618 261D 2620 2622-2623 2626 262A
262E-262F 2638-263A 2640 2642 2648-2653 265F-2660 2663 2665-2666 2668 267B 267E-267F 2692-2697
2699 269B-269C 26A0-26A1 26A7 26AA-26AB 26B0-26B1 26BD-26BE 26C4-26C5 26C8 26CE-26CF 26D1
26D3-26D4 26E9-26EA 26F0-26F5 26F7-26FA 26FD 2702 2705 2708-270D 270F 2712 2714 2716 271D 2721
2728 2733-2734 2744 2747 274C 274E 2753-2755 2757 2763-2764 2795-2797 27A1 27B0 27BF 2934-2935
2B05-2B07 2B1B-2B1C 2B50 2B55 3030 303D 3297 3299 1F004 1F0CF 1F170-1F171 1F17E-1F17F 1F18E
1F191-1F19A 1F201-1F202 1F21A 1F22F 1F232-1F23A 1F250-1F251 1F300-1F321 1F324-1F393 1F396-1F397
1F399-1F39B 1F39E-1F3F0 1F3F3-1F3F5 1F3F7-1F4FD 1F4FF-1F53D 1F549-1F54E 1F550-1F567 1F56F-1F570
1F573-1F57A 1F587 1F58A-1F58D 1F590 1F595-1F596 1F5A4-1F5A5 1F5A8 1F5B1-1F5B2 1F5BC 1F5C2-1F5C4
1F5D1-1F5D3 1F5DC-1F5DE 1F5E1 1F5E3 1F5E8 1F5EF 1F5F3 1F5FA-1F64F 1F680-1F6C5 1F6CB-1F6D2
1F6D5-1F6D9 1F6DC-1F6E5 1F6E9 1F6EB-1F6EC 1F6F0 1F6F3-1F6FC 1F7E0-1F7EB 1F7F0 1F90C-1F93A
1F93C-1F945 1F947-1F9FF 1FA70-1FA7C 1FA80-1FAC6 1FAC8 1FACC-1FADD 1FADF-1FAEB 1FAEF-1FAFA
"""


def _code_points(table: str) -> frozenset[int]:
    points: set[int] = set()
    for item in table.split():
        low, _, high = item.partition("-")
        points.update(range(int(low, 16), int(high or low, 16) + 1))
    return frozenset(points)


_EMOJI = _code_points(_EMOJI_TABLE)


def is_emoji(char: str) -> bool:
    """Whether the single character ``char`` is an emoji on its own (the ``emoji`` package's
    ``is_emoji`` for one code point; a variation selector or a skin tone alone is not)."""
    return len(char) == 1 and ord(char) in _EMOJI


_VOWELS = "aeiouy"


def count_syllables(word: str) -> int:
    """Syllables of ``word`` by ``syllapy``'s rules (IFBench's counter): 0 for a word that is
    empty after stripping punctuation or that contains a digit; ``syllapy``'s own count when that
    package is installed (it knows ~6,400 words by heart); otherwise a compound ``a-b`` is the sum
    of its parts (0 if one part is 0) and a word is counted by its vowel groups (``y`` a vowel),
    less a final ``e``, plus one for a final consonant + ``le``, at least 1."""
    word = word.strip().lower().strip(PUNCTUATION)
    if not word or any(ch.isdigit() for ch in word):
        return 0
    known = _syllapy_count()
    if known is not None:
        return known(word)
    first, dash, rest = word.partition("-")
    if dash and first and rest:
        left, right = count_syllables(first), count_syllables(rest)
        return 0 if left == 0 or right == 0 else left + right
    count = 1 if word[0] in _VOWELS else 0
    count += sum(1 for a, b in zip(word, word[1:]) if b in _VOWELS and a not in _VOWELS)
    if word.endswith("e"):
        count -= 1
    if word.endswith("le") and len(word) > 2 and word[-3] not in _VOWELS:
        count += 1
    return max(count, 1)


@lru_cache(maxsize=1)
def _syllapy_count():
    try:
        import syllapy
    except ImportError:
        return None
    return syllapy.count


STOP_WORDS = frozenset(
    """
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself
yourselves he him his himself she she's her hers herself it it's its itself they them their
theirs themselves what which who whom this that that'll these those am is are was were be been
being have has had having do does did doing a an the and but if or because as until while of at
by for with about against between into through during before after above below to from up down
in out on off over under again further then once here there when where why how all any both
each few more most other some such no nor not only own same so than too very s t can will just
don don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't
doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't
needn needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn wouldn't
""".split()
)


def count_stop_words(text: str) -> int:
    return sum(1 for word in WORD_RE.findall(text) if word.lower() in STOP_WORDS)
