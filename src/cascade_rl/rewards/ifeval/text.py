"""Text primitives shared by the instruction verifiers (SPEC section 6, IF-RL).

IFEval and IFBench measure text with NLTK: ``word_tokenize`` and the pretrained Punkt
sentence splitter (``sent_tokenize``), both of which need the ``punkt`` data download. This
project downloads nothing at run time, so this module re-implements them:

* :func:`count_words` - IFEval's word count, the ``\\w+`` regular expression (identical to
  NLTK 3.9's ``RegexpTokenizer``; NLTK 3.10 compiles it with the ``regex`` engine, whose ``\\w``
  also matches a zero-width joiner or a variation selector inside an emoji).
* :func:`split_sentences` - Punkt's algorithm with its English behaviour: the candidates (a
  ``.`` ``?`` ``!`` followed by whitespace or by one of ``) " ; } ] * : @ ' ( { [``), the first
  pass (abbreviations, ellipses), the second pass (abbreviations and ellipses before a sentence
  opener, initials, numbers) and the realignment of closing quotes and brackets. Punkt's
  statistics of the Wall Street Journal (which capitalised words open sentences, which are
  names) are replaced by small lexicons, and an initial opening a line ("  - B.") is read as a
  list label that ends its sentence when a capitalised word follows (so a text opening with
  "J. Bach" splits where Punkt does not). Measured: the same
  sentences as NLTK 3.9.2 on 292 of the 294 responses of IFBench's ``sample_output.jsonl``.
* :func:`word_tokenize` - NLTK's ``word_tokenize`` (its improved Treebank tokenizer on each
  sentence): the same rules, so the same tokens whenever the sentences agree (an opening
  quote becomes two backticks, a closing one two apostrophes; clitics ``n't`` ``'s``;
  ``cannot`` -> ``can`` ``not``; ``x^2``, ``\\frac``, ``well-known``, ``1,000.5`` and a period
  inside a sentence stay whole).
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

# Punkt's English abbreviations that occur outside newswire (titles, companies, months, days,
# places, times, degrees): a period after one of them does not end a sentence unless a typical
# sentence opener follows. "e.g.", "i.e.", "etc." and "No." are not among them (Punkt's English
# model does not know them: they end a sentence like any word).
_ABBREVIATIONS = frozenset(
    """
mr mrs ms dr prof sr jr st messrs gen col lt maj adm sen rep reps inc ltd co corp cos bros jan feb
aug sep sept oct nov dec tues wed fri u.s u.k u.n u.s.a u.s.s.r a.m p.m ph.d vs ave ft yr mg ok
calif fla ariz colo conn ill kan ky mich minn nev okla ore pa tenn va vt wash wis ala ga
c d e f g h k l m n p r s t v w
""".split()
)
# Words that typically open a sentence (Punkt's "sentence starters" and the most frequent
# capitalised function words): after an abbreviation or an ellipsis they start a new sentence.
_STARTERS = frozenset(
    """
the this these that those it its i he she they we you there here his her their our my your a an
in on at for if when while since so both most many some however moreover nevertheless
nonetheless meanwhile thus indeed instead similarly although though despite according among
but nor yet even under separately what how why who which where
""".split()
)
# Capitalised words after an initial ("Gen Z. This ...") end the sentence when they are common
# lowercase words too; names ("J. Bach") do not. Common words: stop words, openers and
# derivational suffixes that names rarely have.
_COMMON_SUFFIX = re.compile(r"(?:tion|sion|ment|ness|ity|ance|ence|ing|ous|ive|ship|ism|ogy|ics)$")
# Punkt's candidates: a mark followed by a character that cannot continue a word, or by
# whitespace and the next token.
_NON_WORD = r"""[)";}\]*:@'({\[?!]"""
_MULTI_CHAR = r"(?:-{2,}|\.{2,}|(?:\.\s){2,}\.)"
_CANDIDATE = re.compile(rf"[.?!](?=(?P<after>{_NON_WORD}|\s+(?P<next>\S+)))")
# Punkt's word tokens: punctuation other than periods split off, "..." and "--" kept whole
_PUNKT_TOKEN = re.compile(
    rf"""{_MULTI_CHAR}
      | (?=[^("`{{\[:;&\#*@)}}\]\-,])\S+?
        (?=\s|$|{_NON_WORD}|{_MULTI_CHAR}|,(?=$|\s|{_NON_WORD}|{_MULTI_CHAR}))
      | \S""",
    re.VERBOSE,
)
_NUMBER = re.compile(r"-?[.,]?\d[\d,.-]*\.?")
_LINE_LABEL = re.compile(r"[\s\-*•>#]*")
_REALIGN = re.compile(r"""["')\]}]+?(?:\s+|(?=--)|$)""", re.MULTILINE)


def _is_common(word: str) -> bool:
    lower = word.lower().rstrip(".")
    if len(lower) < 2:  # another initial: "J. R. R. Tolkien"
        return False
    return lower in STOP_WORDS or lower in _STARTERS or bool(_COMMON_SUFFIX.search(lower))


def _opens_sentence(token: str) -> bool:
    return token[:1].isupper() and token.lower().rstrip(".") in _STARTERS


def _first_pass_break(token: str) -> bool | None:
    """Punkt's first pass: True (a sentence break), False (an abbreviation or an ellipsis,
    which the second pass may turn into a break) or None (not a candidate)."""
    if token in (".", "?", "!"):
        return True
    if not token.endswith("."):
        return None
    if token.endswith(".."):
        return False if not token.strip(".") else None  # an ellipsis / not a candidate
    kind = token[:-1].lower()
    return not (kind in _ABBREVIATIONS or kind.split("-")[-1] in _ABBREVIATIONS)


def _second_pass_break(token: str, following: str, first: bool, line_label: bool) -> bool:
    """Punkt's second pass for a period-final ``token`` before ``following`` (the abbreviation,
    ellipsis, initial and number heuristics, with a small lexicon instead of the model's
    orthographic statistics; an initial that labels a line, "B. Overview", is read as a label)."""
    kind = token[:-1].lower()
    initial = len(kind) == 1 and kind.isalpha()
    if not first and not initial:  # an abbreviation or an ellipsis
        return _opens_sentence(following)
    if initial or _NUMBER.fullmatch(token):
        if following[:1].islower() or (following and following in ";:,.!?"):
            return False  # Punkt's orthographic heuristic: no sentence starts here
        if initial and first and following[:1].isupper():
            return line_label or _is_common(following)
    return first


def _ends_sentence(text: str, match: re.Match, word_start: int, line: int) -> bool:
    """Whether Punkt finds a break in the context of the period ``match``: the word before it
    (from ``word_start``), the period and what follows it. A token other than the last one of
    the context is a sentence break."""
    line_label = bool(_LINE_LABEL.fullmatch(text, line, word_start))  # "  - B." opens its line
    tokens = _PUNKT_TOKEN.findall(text[word_start : match.end()] + match.group("after"))
    for token, following in zip(tokens, tokens[1:]):
        first = _first_pass_break(token)
        if first is None:
            continue
        if token in (".", "?", "!") or _second_pass_break(token, following, first, line_label):
            return True
    return False


def _word_start(text: str, previous_start: int, previous_end: int, end: int) -> int:
    """Where NLTK's Punkt starts the word before a candidate at ``end``: after the last
    whitespace since the previous candidate (``previous_end``), else (also when that whitespace
    is the first character) where the previous candidate's word started."""
    space = max(text.rfind(" ", previous_end, end), text.rfind("\n", previous_end, end))
    for char in "\t\r\x0b\x0c":  # rarer white space: only in the word after the last space
        space = max(space, text.rfind(char, space + 1, end))
    return space + 1 if space > previous_end else previous_start


def _boundaries(text: str) -> list[tuple[int, int]]:
    """(end of a sentence, start of the next) for every break Punkt finds. Of candidates whose
    words overlap ("!?!", "acting!!!") only the last is decided, as in NLTK."""
    candidates: list[tuple[re.Match, int]] = []
    start, end = 0, 0
    for match in _CANDIDATE.finditer(text):
        start = _word_start(text, start, end, match.start())
        if candidates and end > start:  # overlaps the previous candidate's word: replaces it
            candidates[-1] = (match, candidates[-1][1])
        else:
            candidates.append((match, start))
        end = match.start()
    breaks = []
    line = scanned = 0  # start of the current candidate's line (candidates come in text order)
    for match, word_start in candidates:
        line = text.rfind("\n", scanned, word_start) + 1 or line
        scanned = word_start
        if match.group() == "." and not _ends_sentence(text, match, word_start, line):
            continue  # (a ? or ! token before another token always ends a sentence)
        breaks.append((match.end(), match.start("next") if match.group("next") else match.end()))
    return breaks


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` as NLTK's ``sent_tokenize`` (Punkt, English) cuts them: a
    sentence ends at ``.``, ``?`` or ``!`` followed by whitespace or by one of
    ``) " ; } ] * : @ ' ( { [`` (not by a letter, ``”`` or ``’``), except after an abbreviation
    ("Dr.", "U.S.", "p.m."), an ellipsis or an initial when no sentence opener follows, and
    after an initial or a number ("1.") when a lowercase word follows. Closing ``" ' ) ] }``
    after the break stay with the sentence; a break before ``*`` or ``:`` starts the next
    sentence with it. Line breaks alone never end a sentence. The sentences are slices of the
    text: the first keeps its leading whitespace, none keeps trailing whitespace.
    Approximation: Punkt's orthographic statistics (which capitalised words open sentences)
    are replaced by a small lexicon (module constants above)."""
    return list(_split_sentences(text))


@lru_cache(maxsize=256)
def _split_sentences(text: str) -> tuple[str, ...]:
    """Cached: the instructions of one row (and loose-mode variants) split the same text."""
    slices = []
    start = 0
    for end, next_start in _boundaries(text):
        slices.append([start, end])
        start = next_start
    slices.append([start, len(text.rstrip())])
    for current, following in zip(slices, slices[1:]):  # closing quotes / brackets stay behind
        realign = _REALIGN.match(text, following[0])
        if realign and realign.start() < following[1]:
            current[1] = following[0] + len(realign.group().rstrip())
            following[0] = realign.end()
    return tuple(text[a:b] for a, b in slices if text[a:b])


def count_sentences(text: str) -> int:
    return len(split_sentences(text))


# --- words -----------------------------------------------------------------------------------

# NLTK's word tokenizer (its improved Penn Treebank tokenizer) as ordered rewrites; tokens are
# then the whitespace-separated pieces. Only these characters are split off: quotes, brackets,
# , ; : @ # $ % & ? ! *, "..", "--", a sentence-final period and the clitics ('s n't 're ...);
# "x^2", "a\b", "well-known", "1,000.5", "U.S." and a period inside a sentence ("etc.", "1.")
# stay on their word. NLTK rewrites each sentence on its own; here the sentences of a text are
# joined with a separator (_SEP) that the rules read as the start / end of a sentence, so each
# rule runs once per text, and only when the text holds one of its trigger strings.
_SEP = "\x00"
_START = rf"(?:^|(?<={_SEP}))"
_END = rf"(?={_SEP}|\Z)"


def _pad(chars: str) -> list[tuple]:
    """Rules that put spaces around each of ``chars`` (plain string replacements)."""
    return [(char, None, f" {char} ") for char in chars]


_REWRITES = [  # (triggers: the rule runs only when the text holds one of them, pattern, replacement)
    *_pad("«“‘„"),  # opening quotes
    ("`", r"`+", r" \g<0> "),
    ('"', rf'{_START}"', "``"),
    (["``"], None, " `` "),
    (['"', "''"], r"""([ (\[{<])("|'')""", r"\1 `` "),
    ("'", r"(?i)(')(?!re|ve|ll|m|t|s|d|n)(\w)\b", r"\1 \2"),
    (".", rf"""(?<=[^.{_SEP}])\.(?=[\])}}>"'»”’ ]*\s*{_END})""", " . "),  # the final period
    (":,", rf"([:,])([^\d{_SEP}])", r" \1 \2"),  # , and : unless inside a number
    (":,", rf"([:,]){_END}", r" \1 "),
    ([".."], r"\.{2,}", r" \g<0> "),
    *_pad(";@#$%&"),
    (".", rf"""(?<=[^.{_SEP}])\.(?=[\])}}>"']*\s*{_END})""", " ."),
    *_pad("?!"),
    (["' "], r"([^'])' ", r"\1 ' "),
    *_pad("*"),
    *_pad("[](){}<>"),  # brackets
    (["--"], None, " -- "),
]
_CLOSING = [  # applied with spaces around each sentence
    *_pad("»”’"),
    (["''"], None, " '' "),
    ('"', None, " '' "),
    ("'", r"[^\S\x00]+", " "),  # single spaces for the clitic rules
    ("'", r"([^' ])('[sSmMdD]|') ", r"\1 \2 "),
    ("'", r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ", r"\1 \2 "),
]
_SPLIT_WORDS = [  # matched case-insensitively, triggers on the lower-cased text
    (["cannot"], r"(?i)\b(can)(not)\b"),
    (["d'ye"], r"(?i)\b(d)('ye)\b"),
    (["gimme"], r"(?i)\b(gim)(me)\b"),
    (["gonna"], r"(?i)\b(gon)(na)\b"),
    (["gotta"], r"(?i)\b(got)(ta)\b"),
    (["lemme"], r"(?i)\b(lem)(me)\b"),
    (["more'n"], r"(?i)\b(more)('n)\b"),
    (["wanna"], r"(?i)\b(wan)(na)(?=\s)"),
    (["'tis"], r"(?i) ('t)(is)\b"),
    (["'twas"], r"(?i) ('t)(was)\b"),
]


def _compiled(rules: list) -> list[tuple]:
    return [(tuple(triggers), pattern and re.compile(pattern), replacement) for triggers, pattern, replacement in rules]


_REWRITES, _CLOSING = _compiled(_REWRITES), _compiled(_CLOSING)
_SPLIT_WORDS = _compiled([(triggers, pattern, r" \1 \2 ") for triggers, pattern in _SPLIT_WORDS])


def _rewrite(text: str, rules: list, lower: bool = False) -> str:
    """Apply ``rules`` in order (a rule without a pattern replaces its one trigger string)."""
    for triggers, pattern, replacement in rules:
        haystack = text.lower() if lower else text
        if not any(trigger in haystack for trigger in triggers):
            continue
        text = pattern.sub(replacement, text) if pattern else text.replace(triggers[0], replacement)
    return text


def _treebank_tokens(sentences: list[str]) -> list[str]:
    """NLTK's Treebank rules on each of ``sentences``, tokens in order."""
    text = _rewrite(_SEP.join(sentence.replace(_SEP, " ") for sentence in sentences), _REWRITES)
    text = _rewrite(" " + text.replace(_SEP, f" {_SEP} ") + " ", _CLOSING)
    return [token for token in _rewrite(text, _SPLIT_WORDS, lower=True).split() if token != _SEP]


def word_tokenize(text: str) -> list[str]:
    """NLTK's ``word_tokenize``: :func:`split_sentences`, then the Treebank rules above on each
    sentence (quotes as NLTK writes them: two backticks opening, two apostrophes closing)."""
    return list(_word_tokenize(text))


@lru_cache(maxsize=256)
def _word_tokenize(text: str) -> tuple[str, ...]:
    return tuple(_treebank_tokens(split_sentences(text)))


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
