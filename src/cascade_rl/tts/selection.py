"""Which surviving candidate to submit (SPEC section 8: "pick one with a selection heuristic").

The paper submits, per subtask and round, the candidate chosen by the **Tail-10** heuristic of
Fu et al. (2025), *Deep Think with Confidence* (DeepConf). DeepConf scores a response by its
*tail confidence*: the mean token confidence over its last 2,048 tokens, where a token's
confidence is minus the mean log-probability of the k most likely tokens at that position
(high when the model was sure); "-10" is its filter that keeps the top 10% of responses by that
score. Submitting one response, we submit the most confident of that top 10%: the candidate
with the highest tail confidence. Why the tail: the end of a response is where the answer (the
code) is written, and low confidence there flags guessed code more sharply than the average
over a long reasoning trace. :mod:`cascade_rl.tts.sampling` computes the confidence from
token log-probabilities (a forward pass for a local model, ``logprobs`` for a server).

Heuristics (``--selection``; a dotted path ``package.module:function`` plugs in another):

* ``tail10`` (default, the paper's): highest tail confidence; candidates without a confidence
  (a backend that returns no log-probabilities) rank below those with one, ties and a set
  without any confidence go to the earliest candidate.
* ``first``: the earliest surviving candidate. Candidates are independent samples, so this is
  a uniformly random pick among the survivors; the baseline to compare tail10 with.
* ``shortest``: the shortest program (fewest characters), an Occam's-razor tie-breaker often
  used for code.

A heuristic is ``select(candidates) -> int``: the position, in ``candidates``, of the one to
submit; candidates carry ``index``, ``text``, ``code`` and ``confidence``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

TAIL_TOKENS = 2048  # DeepConf's tail window
TOP_LOGPROBS = 20  # k of the token confidence (DeepConf requests 20 log-probabilities)


@dataclass(frozen=True)
class Candidate:
    index: int  # position among the round's generations for the subtask
    text: str  # the whole response
    code: str  # the program extracted from its answer
    confidence: float | None  # tail confidence, None when the backend gave no log-probabilities


Heuristic = Callable[[Sequence[Candidate]], int]


def tail10(candidates: Sequence[Candidate]) -> int:
    """The candidate with the highest tail confidence (see the module docstring)."""
    ranked = sorted(
        range(len(candidates)),
        key=lambda i: (candidates[i].confidence is not None, candidates[i].confidence or 0.0, -i),
        reverse=True,
    )
    return ranked[0]


def first(candidates: Sequence[Candidate]) -> int:
    return 0


def shortest(candidates: Sequence[Candidate]) -> int:
    return min(range(len(candidates)), key=lambda i: (len(candidates[i].code), i))


HEURISTICS: dict[str, Heuristic] = {"tail10": tail10, "first": first, "shortest": shortest}


def resolve_heuristic(name: str) -> Heuristic:
    """A heuristic by name, or ``package.module:function``; ``ValueError`` names the choices."""
    if name in HEURISTICS:
        return HEURISTICS[name]
    module_name, sep, attribute = name.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"unknown selection heuristic {name!r}: use one of {sorted(HEURISTICS)} or module:function")
    try:
        heuristic = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"selection heuristic {name!r} cannot be imported ({error})") from None
    if not callable(heuristic):
        raise ValueError(f"selection heuristic {name!r} is not callable")
    return heuristic


def needs_confidence(heuristic: Heuristic) -> bool:
    """Whether candidates should carry token confidences (costs log-probabilities)."""
    return heuristic is tail10 or getattr(heuristic, "needs_confidence", False)


def token_confidence(top_logprobs: Sequence[float]) -> float:
    """DeepConf's token confidence: minus the mean of the top-k log-probabilities."""
    return -sum(top_logprobs) / len(top_logprobs) if top_logprobs else 0.0


def tail_confidence(per_token: Sequence[float], tail_tokens: int = TAIL_TOKENS) -> float | None:
    """Mean token confidence over the last ``tail_tokens`` tokens (None for an empty response)."""
    tail = list(per_token)[-tail_tokens:]
    return sum(tail) / len(tail) if tail else None
