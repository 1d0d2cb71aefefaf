"""Sampling metrics for evaluation: avg@k, pass@k, majority@k, best@k (SPEC section 9).

Pure math at the ground of the layer map (DESIGN.md, "Layers"): benchmarks and reports
(``eval/``), the SWE pipeline's candidate ranking (``swe/rank.py``) and anything else that
counts samples use the same definitions.

Every function takes plain Python lists, one inner list per prompt holding that prompt's
samples in generation order, and returns a fraction in [0, 1] averaged over prompts (the
report multiplies by 100). Sample correctness is a bool or a number in [0, 1] (partial
credit, e.g. a patch similarity); pass@k needs binary correctness.

- **avg@k** -- pass@1 averaged over k samples: per prompt the mean correctness of its first k
  samples, then the mean over prompts (the paper's headline number, k = 4..64).
- **pass@k** -- the unbiased estimator of Chen et al. (2021) from n >= k samples with c
  correct: ``1 - C(n - c, k) / C(n, k)``, computed in the numerically stable product form
  ``1 - prod_{i = n - c + 1}^{n} (1 - k / i)`` (no huge binomials).
- **majority@k** -- the most frequent normalised answer among the first k samples is
  correct. Samples without an answer (None or empty after normalisation) do not vote. Ties
  between equally frequent answers go to the answer that appeared first among the k samples
  (deterministic, independent of hashing). A prompt with no answer at all scores 0.
- **best@k** -- a selection score picks one of the first k samples (e.g. the SWE ranking of
  SPEC 7.3: pass rate, then vote count, then shortness -- pass a tuple to encode such a
  lexicographic order); the chosen sample's correctness counts. Ties go to the earliest sample.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

Correctness = bool | float
T = TypeVar("T")


def _check_k(k: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


def _check_prompts(per_prompt: Sequence[Sequence[Any]], name: str) -> None:
    if len(per_prompt) == 0:
        raise ValueError(f"{name}: no prompts given (an empty list has no mean)")


def _first_k(samples: Sequence[T], k: int, prompt_index: int) -> Sequence[T]:
    if len(samples) < k:
        raise ValueError(f"prompt {prompt_index} has {len(samples)} sample(s), fewer than k={k}")
    return samples[:k]


def _as_score(value: Correctness, prompt_index: int) -> float:
    score = float(value)
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"prompt {prompt_index}: correctness {value!r} is outside [0, 1]")
    return score


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def avg_at_k(correct: Sequence[Sequence[Correctness]], k: int | None = None) -> float:
    """pass@1 averaged over the first ``k`` samples of each prompt (all samples if ``k`` is
    None), then averaged over prompts."""
    _check_prompts(correct, "avg@k")
    per_prompt = []
    for index, samples in enumerate(correct):
        size = len(samples) if k is None else k
        _check_k(size)
        chosen = _first_k(samples, size, index)
        per_prompt.append(_mean([_as_score(value, index) for value in chosen]))
    return _mean(per_prompt)


def standard_error(per_prompt: Sequence[float]) -> float:
    """Standard error of a benchmark value that is the mean of per-prompt scores (sample
    standard deviation over prompts / sqrt(prompts)); 0 with fewer than two prompts."""
    n = len(per_prompt)
    if n < 2:
        return 0.0
    mean = sum(per_prompt) / n
    return (sum((v - mean) ** 2 for v in per_prompt) / (n - 1) / n) ** 0.5


def pass_at_k_estimate(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one prompt with ``n`` samples of which ``c`` are correct."""
    _check_k(k)
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if n < k:
        raise ValueError(f"pass@{k} needs at least k={k} samples, got n={n}")
    if n - c < k:
        return 1.0
    survive_all_wrong = 1.0
    for i in range(n - c + 1, n + 1):
        survive_all_wrong *= 1.0 - k / i
    return 1.0 - survive_all_wrong


def pass_at_k(correct: Sequence[Sequence[bool]], k: int) -> float:
    """Mean over prompts of the unbiased pass@k estimate from each prompt's samples."""
    _check_prompts(correct, "pass@k")
    estimates = []
    for index, samples in enumerate(correct):
        if any(value not in (0, 1) for value in samples):
            raise ValueError(f"prompt {index}: pass@k needs binary correctness, got {list(samples)!r}")
        estimates.append(pass_at_k_estimate(len(samples), sum(bool(v) for v in samples), k))
    return _mean(estimates)


def normalize_answer(answer: str | None) -> str:
    """Default answer key for voting: lower-cased, surrounding space stripped, inner runs of
    whitespace collapsed. Pass your own normaliser for domain equivalence (e.g. math)."""
    if answer is None:
        return ""
    return re.sub(r"\s+", " ", answer.strip().lower())


def majority_vote(
    answers: Sequence[str | None], normalize: Callable[[str | None], str] = normalize_answer
) -> int | None:
    """Index of the first sample carrying the most frequent normalised answer, or None when no
    sample has an answer. Ties go to the answer seen first."""
    keys = [normalize(answer) for answer in answers]
    counts = Counter(key for key in keys if key)
    if not counts:
        return None
    top = max(counts.values())
    return next(index for index, key in enumerate(keys) if key and counts[key] == top)


def _paired(
    per_sample: Sequence[Sequence[T]], correct: Sequence[Sequence[Correctness]], k: int, what: str
) -> Iterator[tuple[int, Sequence[T], Sequence[Correctness]]]:
    """Validate a per-sample list against ``correct`` prompt by prompt; yield
    (prompt index, first k entries, that prompt's correctness)."""
    _check_k(k)
    _check_prompts(per_sample, what)
    if len(per_sample) != len(correct):
        raise ValueError(f"{what}: {len(per_sample)} prompts but correct has {len(correct)}")
    for index, (samples, prompt_correct) in enumerate(zip(per_sample, correct)):
        if len(samples) != len(prompt_correct):
            raise ValueError(
                f"{what}: prompt {index} has {len(samples)} entries but {len(prompt_correct)} correctness values"
            )
        yield index, _first_k(samples, k, index), prompt_correct


def majority_at_k(
    answers: Sequence[Sequence[str | None]],
    correct: Sequence[Sequence[Correctness]],
    k: int,
    normalize: Callable[[str | None], str] = normalize_answer,
) -> float:
    """Fraction of prompts whose majority answer among the first ``k`` samples is correct.

    ``answers[p][j]`` is sample j's extracted answer; ``correct[p][j]`` its correctness as judged
    by the domain's verifier (so equivalence beyond string equality is the verifier's job).
    """
    scores = []
    for index, voters, prompt_correct in _paired(answers, correct, k, "majority@k"):
        winner = majority_vote(voters, normalize)
        scores.append(0.0 if winner is None else _as_score(prompt_correct[winner], index))
    return _mean(scores)


def best_at_k(selection_scores: Sequence[Sequence[Any]], correct: Sequence[Sequence[Correctness]], k: int) -> float:
    """Fraction of prompts whose highest-selection-score sample among the first ``k`` is correct.

    Selection scores may be numbers or tuples (compared lexicographically); ties go to the
    earliest sample.
    """
    scores = []
    for index, candidates, prompt_correct in _paired(selection_scores, correct, k, "best@k"):
        chosen = max(range(k), key=lambda j: (candidates[j], -j))
        scores.append(_as_score(prompt_correct[chosen], index))
    return _mean(scores)
