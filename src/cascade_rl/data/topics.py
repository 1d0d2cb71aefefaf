"""The topic of a prompt -- ``math``, ``code`` (competitive programming and programming
exercises) or ``other`` -- for RLHF prompt hygiene (SPEC sections 1 and 6: the RLHF stage's
prompts exclude math and competitive programming; the paper reports AIME25 -2% when they
stayed). ``cascade data classify`` labels rows with it and can drop topics; ``cascade data
check-disjoint`` reports math and code prompts in an RLHF set.

**A documented rule, not a trained model.** The only labelled "other" prompts at hand are
benchmark test sets (IFEval, IFBench), which a classifier must not be trained on; the rule's
evidence comes from what defines each topic, and its precision and recall are *measured* on
those sets (docs/data-formats.md, "Topics"). Each rule below adds its weight to its topic
when it matches the prompt's text (each counts once):

* **code** -- the shape of a programming problem: lines that are only ``Input`` / ``Output``
  / ``Sample Input 1`` / ``-----Input-----`` / ``Constraints`` / ``Example 1:`` headers;
  ``Input: nums = ...`` examples; variable bounds (``1 <= n <= 10^5``); the usual moduli;
  standard input and output, test cases, "the first line contains", "print the answer";
  time and memory limits; "interactive problem"; a request to write or implement a
  function, program or method; LeetCode's "given an integer array ..." and "return the";
  code in the prompt (``def``, ``class Solution``, ``assert f(...)``, ``#include``).
* **math** -- LaTeX commands and ``$...$`` formulas with numbers or operators; equations
  and arithmetic (``x^2``, ``2x + 3 = 7``, ``12 * 4``); math questions ("find the", "compute",
  "solve for", "what is the value of", "prove that", "how many", "how much"); amounts of money;
  proportions ("twice", "half", "percent", "per hour", "altogether"); numbers in the text (two
  or more, four or more, number words included), and a quantity asked of them ("how many
  ...?", "what will ... be?" with two numbers or more); mathematical objects (prime, integer, polynomial, probability,
  remainder, ...). Counts that are *format constraints* of an instruction ("at least 300
  words", "exactly 3 paragraphs", "keyword X twice in your response") are removed before
  numbers are counted.

A prompt is ``code`` when its code evidence reaches :data:`THRESHOLD` (programming problems
are full of mathematics, so the program's shape decides), else ``math`` when its math
evidence does, else ``other``. :func:`classify` returns the scores and the names of the rules
that matched, so a label can be explained and a wrong one traced to its rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Topic = Literal["math", "code", "other"]
TOPICS: tuple[Topic, ...] = ("math", "code", "other")
#: evidence a topic needs
THRESHOLD = 3.0

_I, _M = re.IGNORECASE, re.MULTILINE
_BOUND = r"(?:<=|≤|\\le(?:q)?|<|＜)"

#: (topic, weight, name, pattern)
RULES: tuple[tuple[Topic, float, str, re.Pattern[str]], ...] = (
    # ---- code: the shape of a programming problem
    (
        "code",
        3,
        "input/output section",
        re.compile(
            r"^[ \t]*(?:-{2,}[ \t]*)?(?:sample[ \t]+|example[ \t]+)?(?:input|output)s?"
            r"(?:[ \t]+(?:format|specification|description|data))?(?:[ \t]*\d+)?[ \t]*(?:-{2,})?[ \t]*:?[ \t]*$",
            _I | _M,
        ),
    ),
    (
        "code",
        2,
        "constraints section",
        re.compile(r"^[ \t]*(?:-{2,}[ \t]*)?constraints?[ \t]*(?:-{2,})?:?[ \t]*$", _I | _M),
    ),
    ("code", 2, "example section", re.compile(r"^[ \t]*(?:example|sample)[ \t]*\d*[ \t]*:?[ \t]*$", _I | _M)),
    ("code", 3, "input: name = value", re.compile(r"^[ \t]*input[ \t]*:[ \t]*[A-Za-z_]\w*[ \t]*=", _I | _M)),
    (
        "code",
        2,
        "variable bounds",
        re.compile(rf"\d[ \t]*{_BOUND}[ \t]*\$?[A-Za-z_][\w.\[\]|, ]*\$?[ \t]*{_BOUND}[ \t]*\$?\d"),
    ),
    ("code", 2, "modulus", re.compile(r"10\s*\^\s*\{?\s*9\s*\}?\s*\+\s*7|1000000007|1\s*0{9}\s*\+\s*7|998244353")),
    (
        "code",
        2,
        "standard input/output",
        re.compile(
            r"\b(?:standard (?:input|output)|stdin|stdout|the first line (?:of (?:the )?input )?contains|"
            r"each test case|test cases|print (?:the|a single|one|an?) (?:answer|integer|number|line|string)|"
            r"output (?:a single|one|the) (?:integer|number|line|answer))\b",
            _I,
        ),
    ),
    ("code", 2, "time or memory limit", re.compile(r"\b(?:time|memory) limit(?: per test)?\b", _I)),
    ("code", 2, "interactive problem", re.compile(r"\binteractive (?:problem|task)\b", _I)),
    (
        "code",
        3,
        "write a function or program",
        re.compile(
            r"\b(?:write|implement|create|complete|define)\s+(?:a|an|the)\s+"
            r"(?:(?:python|python3|java|c\+\+|javascript|recursive|simple)\s+)?(?:function|program|method)\b",
            _I,
        ),
    ),
    (
        "code",
        1,
        "given an array or string",
        re.compile(
            r"\bgiven (?:an?|the|two) (?:\d-indexed |non-empty |sorted |binary |positive )*"
            r"(?:integer |string |character )?(?:array|string|list|matrix|linked list|binary tree|grid)s?\b",
            _I,
        ),
    ),
    ("code", 1, "return the", re.compile(r"\breturn (?:the|true|false|an?)\b", _I)),
    (
        "code",
        2,
        "code in the prompt",
        re.compile(r"^[ \t]*(?:def \w+\(|class Solution\b|assert \w+\(|#include\s*<|public static |int main\s*\()", _M),
    ),
    # ---- math
    (
        "math",
        2,
        "LaTeX",
        re.compile(
            r"\\(?:frac|dfrac|sqrt|boxed|sum|prod|int|cdot|times|leq?|geq?|neq|pi|angle|triangle|binom|log|ln|"
            r"sin|cos|tan|lfloor|rfloor|lceil|rceil|mathbb|mathrm|overline|infty)\b|\$[^$\n]*[\d=+\-^_<>][^$\n]*\$"
        ),
    ),
    (
        "math",
        2,
        "equation or arithmetic",
        re.compile(
            r"\b[a-z]\s*\^\s*\d|\b\d+\s*[a-z]\s*[+\-=]\s*\d|\b[a-z]\s*=\s*-?\d|\d\s*[+*/×÷^]\s*\d|\d\s+-\s+\d|\bf\(\w\)"
        ),
    ),
    (
        "math",
        2,
        "math question",
        re.compile(
            r"\b(?:find (?:the|all|a|an|x|y|n|\$)|compute|calculate|"
            r"evaluate (?:the )?(?:expression|integral|sum|limit)|simplify|solve (?:for|the (?:equation|system))|"
            r"prove that|show that|what is the (?:value|sum|product|remainder|probability|area|volume|perimeter|"
            r"smallest|largest|greatest|least|maximum|minimum|total|average|mean|median|ratio|percentage)|"
            r"what percent(?:age)?|express your answer|determine all)\b",
            _I,
        ),
    ),
    ("math", 1, "how many / how much", re.compile(r"\bhow (?:many|much|long|far|old)\b", _I)),
    ("math", 1, "money", re.compile(r"[$€£]\s?\d|\b\d+(?:\.\d+)?\s?(?:dollars|cents|euros)\b", _I)),
    (
        "math",
        1,
        "proportions",
        re.compile(
            r"\b(?:twice|half|thrice|triple|double|percent|altogether|in total|per (?:hour|day|week|month|year|minute|"
            r"second|dozen|mile|kilogram|pound|item|person)|times (?:as|more|less|older|younger|longer|faster|larger|"
            r"bigger|the number|that))\b|\d\s?%",
            _I,
        ),
    ),
    (
        "math",
        1,
        "mathematical objects",
        re.compile(
            r"\b(?:integers?|primes?|prime numbers?|divisible|divisors?|polynomials?|equations?|probability|triangle|"
            r"circle|radius|remainder|real numbers?|ordered pairs?|factorial|gcd|lcm|digits?|arithmetic|geometric|"
            r"sequence|fraction|decimal)\b",
            _I,
        ),
    ),
)

#: counts that are format constraints of an instruction, not quantities of a problem
_COUNT = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|twelve|twenty|fifty|hundred)"
_FORMAT_COUNT = re.compile(
    rf"\b{_COUNT}\+?\s*(?:-\s*)?(?:words?|sentences?|paragraphs?|bullet(?: point)?s?|sections?|letters?|characters?|"
    r"times(?! (?:as|more|less|the|that|a |an |per|faster|longer|older|larger|bigger))|"
    r"lines?|placeholders?|commas?|highlighted|capital(?:ized)? words?|stanzas?|verses?|points?|items?|parts?|"
    r"responses?|emojis?|hashtags?|questions?|titles?|keywords?|syllables?|levels?|palindromes?|q\s*&\s*as?)\b|"
    r"\b(?:once|twice|thrice)(?= in (?:your|the|each) (?:response|answer|reply|text|output))",
    _I,
)
_NUMBER = re.compile(
    r"(?<![\w.])\d+(?:[.,]\d+)*(?:[a-z]{1,3})?\b|\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|"
    r"twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|dozen|half|third|quarter|fifth|"
    r"twice|thrice|double|triple)\b",
    _I,
)
_QUANTITY_QUESTION = re.compile(
    r"\b(?:how (?:many|much|long|far|old|fast|tall|big)|what (?:is|was|will|would|are|were|does|did)\b)[^?]*\?", _I
)


@dataclass(frozen=True)
class TopicVerdict:
    """A prompt's topic, the evidence per topic and the rules that matched."""

    topic: Topic
    scores: dict[str, float] = field(default_factory=dict)
    evidence: tuple[str, ...] = ()


def classify(text: str) -> TopicVerdict:
    """The topic of a prompt's text (module docstring)."""
    scores = {"math": 0.0, "code": 0.0}
    evidence = []
    for topic, weight, name, pattern in RULES:
        if pattern.search(text):
            scores[topic] += weight
            evidence.append(f"{topic}: {name}")
    numbers = len(_NUMBER.findall(_FORMAT_COUNT.sub(" ", text)))
    for at_least in (2, 4):
        if numbers >= at_least:
            scores["math"] += 1
            evidence.append(f"math: {at_least}+ numbers")
    if numbers >= 2 and _QUANTITY_QUESTION.search(text):
        scores["math"] += 1
        evidence.append("math: a quantity asked of numbers given")
    if scores["code"] >= THRESHOLD:
        topic: Topic = "code"
    elif scores["math"] >= THRESHOLD:
        topic = "math"
    else:
        topic = "other"
    return TopicVerdict(topic, scores, tuple(evidence))


def parse_topics(text: str, what: str = "topics") -> list[Topic]:
    """``"math,code"`` -> ``["math", "code"]``; an unknown name is a ValueError naming it."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in TOPICS]
    if unknown or not names:
        raise ValueError(f"{what}: expected topics among {', '.join(TOPICS)}, got {text!r}")
    return names  # type: ignore[return-value]
