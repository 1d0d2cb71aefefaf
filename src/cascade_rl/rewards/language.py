"""Language-mixing detection for RL rewards (SPEC sections 5-6, "language mixing").

The paper penalises responses that drift into another language: RLHF gives (lowest reward in the
batch - 10) to an English prompt whose response contains non-English tokens, Math RL gives -1 and
Code RL gives 0. This module decides *whether* a response mixes languages; each scorer decides
what that costs.

Rule (by Unicode script of the letters, no model, plain string scanning):

* The prompt's script is the dominant letter script of its (last user) text. A CJK character
  (Han, kana, Hangul) counts as 3 letters, since one carries roughly a Latin word's worth of text.
  Hiragana or Katakana anywhere next to dominant Han/kana makes it ``"Japanese"`` (Han + kana).
  No prompt, or a prompt without letters, counts as Latin (English).
* Allowed in the response: the prompt's script (group), **Latin everywhere** (code identifiers,
  variable names, units and English technical terms appear in answers to prompts of any script;
  consequently a non-English prompt answered in English is *not* flagged, which the paper does
  not ask for and which script alone cannot tell from a quoted term), **Greek everywhere** (math:
  alpha, pi, Sigma) and every non-letter (digits, punctuation, math symbols, emoji).
* Ignored: fenced code blocks (an unclosed fence runs to the end, as in Markdown), inline code,
  LaTeX (``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]``, ``\\begin{env}...\\end{env}``) and
  URLs, whatever they contain.
* The response mixes when it holds at least ``min_letters`` (default 1, the paper's "any
  non-English token") letters of a script that is not allowed.

Speed: an ASCII-only response returns after one ``str.isascii`` call; otherwise one regex search
for a disallowed letter decides most responses; only responses that contain one pay for removing
code / LaTeX / URLs and counting.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from cascade_rl.chat import last_user_text

__all__ = [
    "MixingResult",
    "allowed_scripts",
    "detect_mixing",
    "is_mixed",
    "prompt_script",
    "script_of",
    "strip_ignored",
]

# Unicode blocks of each script (inclusive code-point ranges). Non-letters inside a block (Arabic
# comma, CJK radicals) are dropped by the letter check, so whole blocks are fine here.
_SCRIPT_BLOCKS: dict[str, tuple[tuple[int, int], ...]] = {
    "Latin": (
        (0x41, 0x5A),
        (0x61, 0x7A),
        (0xAA, 0xAA),
        (0xBA, 0xBA),
        (0xC0, 0x2AF),
        (0x1D00, 0x1DBF),
        (0x1E00, 0x1EFF),
        (0x2C60, 0x2C7F),
        (0xA720, 0xA7FF),
        (0xAB30, 0xAB6F),
        (0xFB00, 0xFB06),
        (0xFF21, 0xFF3A),
        (0xFF41, 0xFF5A),
    ),
    "Greek": ((0x370, 0x3FF), (0x1F00, 0x1FFF)),
    "Cyrillic": ((0x400, 0x52F), (0x1C80, 0x1C8F), (0x2DE0, 0x2DFF), (0xA640, 0xA69F)),
    "Armenian": ((0x530, 0x58F), (0xFB13, 0xFB17)),
    "Hebrew": ((0x590, 0x5FF), (0xFB1D, 0xFB4F)),
    "Arabic": ((0x600, 0x6FF), (0x750, 0x77F), (0x870, 0x8FF), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF)),
    "Syriac": ((0x700, 0x74F), (0x860, 0x86F)),
    "Thaana": ((0x780, 0x7BF),),
    "NKo": ((0x7C0, 0x7FF),),
    "Samaritan": ((0x800, 0x83F),),
    "Mandaic": ((0x840, 0x85F),),
    "Devanagari": ((0x900, 0x97F), (0xA8E0, 0xA8FF)),
    "Bengali": ((0x980, 0x9FF),),
    "Gurmukhi": ((0xA00, 0xA7F),),
    "Gujarati": ((0xA80, 0xAFF),),
    "Oriya": ((0xB00, 0xB7F),),
    "Tamil": ((0xB80, 0xBFF),),
    "Telugu": ((0xC00, 0xC7F),),
    "Kannada": ((0xC80, 0xCFF),),
    "Malayalam": ((0xD00, 0xD7F),),
    "Sinhala": ((0xD80, 0xDFF),),
    "Thai": ((0xE00, 0xE7F),),
    "Lao": ((0xE80, 0xEFF),),
    "Tibetan": ((0xF00, 0xFFF),),
    "Myanmar": ((0x1000, 0x109F), (0xA9E0, 0xA9FF), (0xAA60, 0xAA7F)),
    "Georgian": ((0x10A0, 0x10FF), (0x1C90, 0x1CBF), (0x2D00, 0x2D2F)),
    "Hangul": ((0x1100, 0x11FF), (0x3130, 0x318F), (0xA960, 0xA97F), (0xAC00, 0xD7FF), (0xFFA0, 0xFFDC)),
    "Ethiopic": ((0x1200, 0x139F), (0x2D80, 0x2DDF), (0xAB00, 0xAB2F)),
    "Cherokee": ((0x13A0, 0x13FF), (0xAB70, 0xABBF)),
    "Canadian Aboriginal": ((0x1400, 0x167F), (0x18B0, 0x18FF)),
    "Ogham": ((0x1680, 0x169F),),
    "Runic": ((0x16A0, 0x16FF),),
    "Khmer": ((0x1780, 0x17FF), (0x19E0, 0x19FF)),
    "Mongolian": ((0x1800, 0x18AF),),
    "Balinese": ((0x1B00, 0x1B7F),),
    "Javanese": ((0xA980, 0xA9DF),),
    "Hiragana": ((0x3040, 0x309F), (0x1B001, 0x1B11F)),
    "Katakana": ((0x30A0, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F), (0x1B000, 0x1B000)),
    "Bopomofo": ((0x3100, 0x312F), (0x31A0, 0x31BF)),
    "Han": (
        (0x2E80, 0x2FDF),
        (0x3005, 0x3007),
        (0x3021, 0x3029),
        (0x3038, 0x303B),
        (0x3400, 0x4DBF),
        (0x4E00, 0x9FFF),
        (0xF900, 0xFAFF),
        (0x20000, 0x2FA1F),
        (0x30000, 0x323AF),
    ),
    "Yi": ((0xA000, 0xA4CF),),
    "Vai": ((0xA500, 0xA63F),),
}

#: scripts allowed in every response (see the module docstring)
ALWAYS_ALLOWED = frozenset({"Latin", "Greek"})
#: scripts a prompt script brings with it
_SCRIPT_GROUPS: dict[str, frozenset[str]] = {
    "Japanese": frozenset({"Han", "Hiragana", "Katakana"}),
    "Han": frozenset({"Han", "Bopomofo"}),
}
_CJK_WEIGHT = 3
_CJK = frozenset({"Han", "Hiragana", "Katakana", "Hangul", "Bopomofo"})

_RANGES = sorted((start, end, script) for script, blocks in _SCRIPT_BLOCKS.items() for start, end in blocks)
_STARTS = [start for start, _, _ in _RANGES]


@dataclass(frozen=True)
class MixingResult:
    """``mixed``: the response mixes languages; ``scripts``: offending script -> letter count;
    ``prompt_script``: the script (or ``"Japanese"``) the prompt was read as."""

    mixed: bool
    scripts: dict[str, int] = field(default_factory=dict)
    prompt_script: str = "Latin"


@lru_cache(maxsize=8192)
def script_of(char: str) -> str | None:
    """The script of a letter (``"Han"``, ``"Cyrillic"`` ...); None for non-letters and letters
    outside the table (mathematical alphanumerics, letter-like symbols)."""
    if not unicodedata.category(char).startswith("L"):
        return None
    index = bisect_right(_STARTS, ord(char)) - 1
    if index >= 0 and ord(char) <= _RANGES[index][1]:
        return _RANGES[index][2]
    return None


# ----------------------------------------------------------------------------- ignored spans
# Passes in precedence order (code before LaTeX before URLs), each a regex with a literal prefix
# (fast) that is linear on any input: fences, ``$$`` and backticks pair up by themselves (only the
# last one can be unclosed), inline ``$`` stops at the line end, and the other LaTeX openers stop
# at their next opener (a tempered token), so an unclosed opener never rescans the whole text.
# A pass runs only when its trigger occurs in the text.
_IGNORED_PASSES: tuple[tuple[str, re.Pattern], ...] = tuple(
    (trigger, re.compile(pattern, re.DOTALL))
    for trigger, pattern in (
        ("```", r"```.*?(?:```|\Z)"),  # fenced code; an unclosed fence runs to the end
        ("~~~", r"~~~.*?(?:~~~|\Z)"),
        ("\\begin", r"\\begin\{([A-Za-z]+\*?)\}(?:(?!\\begin\{\1\}).)*?\\end\{\1\}"),
        ("$$", r"\$\$.+?\$\$"),
        ("\\[", r"\\\[(?:(?!\\\[).)*?\\\]"),
        ("\\(", r"\\\((?:(?!\\\().)*?\\\)"),
        ("`", r"`[^`]*`"),  # inline code
        ("$", r"\$[^$\n]+\$"),  # inline math (escaped \$ are blanked first)
        ("://", r"://\S*"),  # URLs: the scheme is ASCII, so only the rest needs removing
        ("www.", r"www\.\S+"),
    )
)


def strip_ignored(text: str) -> str:
    """``text`` with code blocks, inline code, LaTeX and URLs replaced by spaces."""
    text = text.replace("\\$", "  ")
    for trigger, pattern in _IGNORED_PASSES:
        if trigger in text:
            text = pattern.sub(" ", text)
    return text


# ----------------------------------------------------------------------------- detection
def _count_scripts(text: str) -> Counter:
    return Counter(script for script in map(script_of, text) if script is not None)


def prompt_script(prompt: str | Sequence[Mapping] | None) -> str:
    """The dominant letter script of the prompt's last user turn (see the module docstring)."""
    text = last_user_text(prompt) if prompt is not None else ""
    return "Latin" if text.isascii() else _dominant_script(text)


@lru_cache(maxsize=1024)  # the G rollouts of a prompt share it
def _dominant_script(text: str) -> str:
    counts = _count_scripts(strip_ignored(text))
    if not counts:
        return "Latin"
    weighted = {script: count * (_CJK_WEIGHT if script in _CJK else 1) for script, count in counts.items()}
    dominant = max(weighted, key=lambda script: (weighted[script], script))
    has_kana = counts.get("Hiragana", 0) + counts.get("Katakana", 0) > 0
    if dominant in ("Han", "Hiragana", "Katakana") and has_kana:
        return "Japanese"
    return dominant


def allowed_scripts(script: str) -> frozenset[str]:
    """Scripts a response to a prompt in ``script`` may use."""
    return ALWAYS_ALLOWED | _SCRIPT_GROUPS.get(script, frozenset({script}))


@lru_cache(maxsize=64)
def _disallowed_patterns(allowed: frozenset[str]) -> tuple[re.Pattern, re.Pattern]:
    """Character classes of every block of the scripts not in ``allowed``: (Basic Multilingual
    Plane only, all planes). The BMP-only class compiles to a table lookup and scans ~4x faster."""

    def char_class(limit: int) -> re.Pattern:
        ranges = "".join(
            f"{re.escape(chr(start))}-{re.escape(chr(min(end, limit)))}"
            for start, end, script in _RANGES
            if script not in allowed and start <= limit
        )
        return re.compile(f"[{ranges}]")

    return char_class(0xFFFF), char_class(0x10FFFF)


def _disallowed_pattern(text: str, allowed: frozenset[str]) -> re.Pattern:
    """The fastest class that finds every disallowed letter of ``text``."""
    bmp, every_plane = _disallowed_patterns(allowed)
    has_astral = len(text.encode("utf-16-le", "surrogatepass")) > 2 * len(text)
    return every_plane if has_astral else bmp


def detect_mixing(text: str, prompt: str | Sequence[Mapping] | None = None, *, min_letters: int = 1) -> MixingResult:
    """Whether ``text`` mixes in letters of a script its prompt does not use (module docstring).

    ``prompt``: the prompt as text or chat messages (its last user turn is read); None = English.
    ``min_letters``: how many disallowed letters it takes to flag (1 = any, the paper's rule).
    """
    if not isinstance(text, str):
        raise TypeError(f"detect_mixing: text must be a str, got {type(text).__name__}")
    if isinstance(min_letters, bool) or not isinstance(min_letters, int) or min_letters < 1:
        raise ValueError(f"detect_mixing: min_letters must be an integer >= 1, got {min_letters!r}")
    script = prompt_script(prompt)
    if text.isascii():
        return MixingResult(False, {}, script)
    pattern = _disallowed_pattern(text, allowed_scripts(script))
    if pattern.search(text) is None:
        return MixingResult(False, {}, script)
    offending = _count_scripts("".join(pattern.findall(strip_ignored(text))))
    return MixingResult(sum(offending.values()) >= min_letters, dict(offending), script)


def is_mixed(response: str, prompt: str | Sequence[Mapping] | None = None, *, min_letters: int = 1) -> bool:
    """Whether the whole response (reasoning and answer) mixes languages."""
    return detect_mixing(response, prompt, min_letters=min_letters).mixed
