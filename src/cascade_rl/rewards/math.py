"""The Math RL reward (SPEC section 6, "Math RL"): 1 if the last ``\\boxed{}`` of the answer equals
the ground truth, else 0; language mixing anywhere in the response -> -1.

Order of the checks in :func:`score`:

1. language mixing anywhere in the response (reasoning or answer; the prompt sets the allowed
   script, see :mod:`cascade_rl.rewards.language`) -> ``language_penalty`` (paper: -1);
2. unfinished thinking (``<think>`` never closed) -> 0;
3. no box in the answer after ``</think>`` -> 0 (a box only inside the reasoning does not count);
4. the last box of the answer is compared with ``answer``: 1 if equivalent, else 0.

Equivalence is decided by a fast path when it is *certain* (:mod:`.math_fast`: identical after
harmless LaTeX normalisation; plain numbers compared exactly, respecting math-verify's 6-decimal
tolerance; polynomials compared exactly; constants and sets / intervals of constants proven
different, or equal when math-verify would prove them equal too) and otherwise by
``math_verify.parse`` + ``math_verify.verify``, whose verdicts are memoised. math-verify's own
timeout uses SIGALRM (main thread only), so it is disabled and math-verify runs instead in a
persistent worker process with a hard deadline (:class:`cascade_rl.rewards.timeout.WorkerPool`):
an answer that makes sympy hang (for example ``9^{9^{9^{9}}}``) scores 0 with
``details["timeout"] = True`` after ``timeout`` seconds, from any thread, and the worker is
replaced. ``benchmarks/bench_math.py`` measures both the speed-up and the agreement with
math-verify.

**Modules.** This module is the reward (the registry's ``cascade_rl.rewards.math:score``): the
extraction of the box, the order of the checks and math-verify under a deadline. The fast path
is :mod:`cascade_rl.rewards.math_fast`, over the exact reader of arithmetic answers of
:mod:`cascade_rl.rewards.math_reader`.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import NamedTuple

from cascade_rl.chat import split_thinking
from cascade_rl.rewards.base import Score
from cascade_rl.rewards.language import detect_mixing
from cascade_rl.rewards.math_fast import fast_verdict, strip_math_delimiters
from cascade_rl.rewards.timeout import CallTimeout, WorkerDied, WorkerPool

__all__ = [
    "Equivalence",
    "braced_content",
    "equivalent",
    "extract_boxed",
    "math_verify_equal",
    "score",
    "verifier_pool",
]

# ----------------------------------------------------------------------------- extraction
_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_BRACE_TOKEN = re.compile(r"\\.|[{}]", re.DOTALL)
_BARE_BRACE = re.compile(r"[{}]")
_SPACE_FORM_TOKEN = re.compile(r"[^\s$]+")


def extract_boxed(text: str) -> str | None:
    """The content of the LAST ``\\boxed{...}`` / ``\\fbox{...}`` in ``text`` (nested braces
    balanced, escaped ``\\{ \\}`` ignored), or of the space form ``\\boxed 5`` (up to the next
    space or ``$``, without a trailing ``.,;``). None when there is no box, or when the last one
    is malformed (its brace never closes, nothing follows it): a cut-off final box is no answer.
    """
    if not isinstance(text, str):
        raise TypeError(f"extract_boxed: text must be a str, got {type(text).__name__}")
    last = None
    for last in _BOX_COMMAND.finditer(text):  # noqa: B007 - keep the last match
        pass
    if last is None:
        return None
    start = last.end()
    while start < len(text) and text[start] in " \t":
        start += 1
    if text.startswith("{", start):
        return braced_content(text, start)
    token = _SPACE_FORM_TOKEN.match(text, start)
    content = token.group().rstrip(".,;") if token else ""
    return content or None


def braced_content(text: str, open_brace: int, *, escapes: bool = True) -> str | None:
    """The text between the brace at ``open_brace`` and the brace that closes it (nested braces
    balanced), or None when it never closes. ``escapes``: an escaped ``\\{`` / ``\\}`` is text,
    not a brace (false: every brace counts, as NeMo Gym's MCQA reader counts them)."""
    depth = 0
    for token in (_BRACE_TOKEN if escapes else _BARE_BRACE).finditer(text, open_brace):
        if token.group() == "{":
            depth += 1
        elif token.group() == "}":
            depth -= 1
            if depth == 0:
                return text[open_brace + 1 : token.start()]
    return None


# ----------------------------------------------------------------------------- math-verify
def math_verify_equal(prediction: str, reference: str) -> bool:
    """math-verify's verdict (``verify(parse(gold), parse(prediction))``, both given as a box),
    in-process and without math-verify's SIGALRM timeout: call it under a deadline (a worker)."""
    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # its "timeout disabled" warning
    gold = parse(f"\\boxed{{{strip_math_delimiters(reference)}}}", parsing_timeout=None)
    predicted = parse(f"\\boxed{{{strip_math_delimiters(prediction)}}}", parsing_timeout=None)
    return bool(verify(gold, predicted, timeout_seconds=None))


_WARM_UP_PAIRS = (
    ("\\frac{1}{2}", "\\{x + 1, 2\\}"),
    ("x = 3", "3"),
    ("\\ln 6", "\\ln 2 + \\ln 3"),
    ("e^{2}", "\\sqrt{e^4}"),
    ("(-\\infty, 3]", "[-\\infty, 3]"),
    ("50\\%", "0.5"),
    ("30^\\circ", "\\frac{\\pi}{6}"),
    ("(x+1)^2", "x^2 + 2x + 1"),
)


def warm_up() -> None:
    """Build math-verify's parsers and sympy's lazily loaded machinery once (run by each new
    worker, outside any deadline), so that first calls are not slower than later ones."""
    for prediction, reference in _WARM_UP_PAIRS:
        math_verify_equal(prediction, reference)


_POOL_LOCK = threading.Lock()
_VERIFIER_POOL: WorkerPool | None = None
#: address-space cap of a math-verify worker: sympy building a giant integer fails fast instead
#: of eating the machine's memory
WORKER_MEMORY_MB = 4096


def verifier_pool() -> WorkerPool:
    """The shared pool of math-verify workers (started on first use, up to 4 processes)."""
    global _VERIFIER_POOL
    with _POOL_LOCK:
        if _VERIFIER_POOL is None:
            _VERIFIER_POOL = WorkerPool(
                min(4, os.cpu_count() or 1), preload=(f"{__name__}:warm_up",), memory_limit_mb=WORKER_MEMORY_MB
            )
        return _VERIFIER_POOL


class Equivalence(NamedTuple):
    equal: bool
    method: str  # "exact" | "numeric" | "math_verify"
    timed_out: bool = False
    error: str | None = None


def equivalent(prediction: str, reference: str, *, timeout: float = 5.0) -> Equivalence:
    """Whether ``prediction`` equals ``reference``: the fast path when certain, else math-verify
    in a worker process under a hard ``timeout`` (a timeout or a crashed worker: not equal).

    math-verify verdicts are memoised per (prediction, reference, timeout): the G rollouts of a
    GRPO group often box the same answer, and a pathological one then costs one timeout, not G.
    """
    verdict = fast_verdict(prediction, reference)
    if verdict is not None:
        return Equivalence(*verdict)
    memoised = len(prediction) + len(reference) <= _MEMO_MAX_CHARS
    try:
        return (_memoised_math_verify if memoised else _math_verify)(prediction, reference, timeout)
    except WorkerDied as error:  # not memoised: the next call gets a fresh worker
        return Equivalence(False, "math_verify", error=str(error))


def _math_verify(prediction: str, reference: str, timeout: float) -> Equivalence:
    try:
        equal = verifier_pool().call(math_verify_equal, prediction, reference, timeout=timeout)
    except CallTimeout:
        return Equivalence(False, "math_verify", timed_out=True)
    return Equivalence(bool(equal), "math_verify")


_MEMO_MAX_CHARS = 2000  # keeps the memo small: 16384 entries of at most this many characters
_memoised_math_verify = lru_cache(maxsize=16384)(_math_verify)


# ----------------------------------------------------------------------------- the reward
def _reference_answer(answer: object) -> str:
    """The ground truth as a string: ``"42"``, ``42``, ``"$x^2$"``, ``"\\boxed{5}"`` all work."""
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        raise TypeError(f"math score: 'answer' must be a string or a number, got {type(answer).__name__}")
    text = str(answer).strip()
    boxed = extract_boxed(text) if "\\boxed" in text or "\\fbox" in text else None
    text = strip_math_delimiters(boxed if boxed is not None else text)
    if not text:
        raise ValueError("math score: 'answer' is empty")
    return text


def score(
    response: str,
    *,
    answer: str | int | float,
    prompt: str | Sequence[Mapping] | None = None,
    language_penalty: float = -1.0,
    timeout: float = 5.0,
    mixing_min_letters: int = 1,
) -> Score:
    """The Math RL reward of one response (see the module docstring for the rules).

    ``answer``: the ground truth. ``prompt``: text or chat messages; sets the script the response
    may use. ``language_penalty``: reward for a language-mixed response (paper: -1).
    ``timeout``: hard deadline in seconds for the math-verify check. ``mixing_min_letters``: how
    many foreign-script letters flag mixing (paper: 1). Details: ``extracted``, ``method``,
    ``reason``, ``timeout``, ``language_mixing`` (+ ``mixing_scripts`` and ``prompt_script``).
    """
    if not isinstance(response, str):
        raise TypeError(f"math score: response must be a str, got {type(response).__name__}")
    if not timeout > 0:
        raise ValueError(f"math score: timeout must be > 0 seconds, got {timeout!r}")
    reference = _reference_answer(answer)
    mixing = detect_mixing(response, prompt, min_letters=mixing_min_letters)
    reasoning, final, finished = split_thinking(response)
    extracted = extract_boxed(final) if finished else None
    details: dict = {"extracted": extracted, "language_mixing": mixing.mixed, "timeout": False}
    if mixing.mixed:
        details.update(reason="language_mixing", mixing_scripts=mixing.scripts, prompt_script=mixing.prompt_script)
        return Score(float(language_penalty), details)
    if not finished:
        return Score(0.0, {**details, "reason": "unfinished"})
    if extracted is None:
        in_reasoning = extract_boxed(reasoning) is not None
        return Score(0.0, {**details, "reason": "box_only_in_reasoning" if in_reasoning else "no_box"})
    if not extracted.strip():
        return Score(0.0, {**details, "reason": "empty_box"})
    result = equivalent(extracted, reference, timeout=timeout)
    details.update(
        method=result.method,
        timeout=result.timed_out,
        reason="timeout" if result.timed_out else ("correct" if result.equal else "wrong"),
    )
    if result.error:
        details["error"] = result.error
    return Score(1.0 if result.equal else 0.0, details)
