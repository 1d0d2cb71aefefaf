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
  (``U.S.``) stay whole. Differences from NLTK: quotes are kept as ``"`` (NLTK writes `````` and
  ``''``) and a period after an abbreviation inside a sentence is its own token.
* :func:`detect_language` - ``langdetect`` with ``DetectorFactory.seed = 0`` (deterministic),
  cached per text.
* :func:`is_emoji`, :func:`count_syllables`, :data:`STOP_WORDS` (NLTK's English stop-word list,
  179 words) - small stand-ins for the ``emoji`` package, ``syllapy`` and NLTK's corpus.
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


@lru_cache(maxsize=256)
def _word_tokenize(text: str) -> tuple[str, ...]:
    tokens = _TOKEN.findall(text)
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

_EMOJI_RANGES = (
    (0x1F000, 0x1FAFF),  # mahjong, cards, enclosed alphanumerics, pictographs, emoticons, ...
    (0x2600, 0x27BF),  # miscellaneous symbols, dingbats
    (0x2B00, 0x2BFF),  # arrows and shapes such as ⭐ ⬛
    (0x2190, 0x21FF),  # arrows that have emoji presentation
    (0x2300, 0x23FF),  # ⌚ ⌛ ⏰ ...
    (0x1F1E6, 0x1F1FF),  # regional indicators (flags)
)
_EMOJI_SINGLES = frozenset("\u00a9\u00ae\u203c\u2049\u2122\u2139\u24c2\u3030\u303d\u3297\u3299")


def is_emoji(char: str) -> bool:
    """Whether the single character ``char`` is an emoji (Unicode emoji blocks)."""
    if len(char) != 1:
        return False
    code = ord(char)
    return char in _EMOJI_SINGLES or any(low <= code <= high for low, high in _EMOJI_RANGES)


_VOWEL_GROUP = re.compile(r"[aeiouy]+")


def count_syllables(word: str) -> int:
    """Heuristic English syllable count (vowel groups, silent final ``e``); 0 for no letters."""
    word = "".join(ch for ch in word.lower() if ch.isalpha())
    if not word:
        return 0
    count = len(_VOWEL_GROUP.findall(word))
    if word.endswith("e") and not word.endswith(("le", "ee", "ye")) and count > 1:
        count -= 1
    return max(count, 1)


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
