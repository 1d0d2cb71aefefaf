"""Ranking candidate patches (SPEC section 7.3): best@k, majority@k, pass@k and curves over k.

For the first k samples of an instance (generation order), only candidates with a non-empty
patch take part:

* **best@k** -- candidates that break a regression test are dropped (when every candidate
  breaks one, all of them stay: ranking still has to choose); the winner has the highest
  combined pass rate (regression tests passed + reproduction tests resolved, over all of
  them), ties broken by the majority vote (how many of the k samples produced the same
  normalised patch, :func:`cascade_rl.rewards.swe.patch_key`), then by the smallest edit
  (fewest changed lines), then the shortest patch text, then the earliest sample.
* **majority@k** -- the most frequent normalised patch (ties: the one seen first), as in
  :func:`cascade_rl.metrics.majority_vote`.
* **pass@k** -- the unbiased estimator over all n samples with c resolving the instance by its
  gold tests (FAIL_TO_PASS and PASS_TO_PASS); only where gold results exist.

A "resolved" flag per candidate comes from the gold tests when the instance has them.

**The headline** (:func:`headline`; the paper's SWE-bench Verified numbers, 37.2 for the 8B and
43.1 for the 14B model, seed sections 5 and 7.2): pass@1 *averaged over k independent runs* --
run j submits the j-th sample of every instance, unselected; its resolution rate is the share
of instances that sample resolves; the headline is the mean over the k runs with its standard
error over runs (sample standard deviation of the k rates / sqrt(k)), the paper's "average of
four runs at temperature 0.6". best@k -- one patch per instance chosen from the k samples by
validation, i.e. test-time scaling -- is reported beside it under its own name, never as the
headline.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from cascade_rl.metrics import majority_vote, pass_at_k_estimate, standard_error
from cascade_rl.rewards.swe import patch_key


@dataclass(frozen=True)
class RankedCandidate:
    """What ranking needs to know about one sample (``patch`` is "" when it has none)."""

    index: int
    patch: str
    regression_ok: bool = True
    pass_rate: float = 0.0
    resolved: bool | None = None

    @cached_property
    def key(self) -> str:
        return repr(patch_key(self.patch)) if self.patch else ""

    @cached_property
    def changed_lines(self) -> int:
        return sum(1 for line in self.patch.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---")))


def _first_k(candidates: Sequence[RankedCandidate], k: int) -> list[RankedCandidate]:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return [c for c in sorted(candidates, key=lambda c: c.index)[:k] if c.patch]


def select_best(candidates: Sequence[RankedCandidate], k: int) -> RankedCandidate | None:
    """The best@k choice among the first ``k`` samples (module docstring), or None."""
    pool = _first_k(candidates, k)
    votes = Counter(c.key for c in pool)
    survivors = [c for c in pool if c.regression_ok] or pool
    if not survivors:
        return None
    return max(survivors, key=lambda c: (c.pass_rate, votes[c.key], -c.changed_lines, -len(c.patch), -c.index))


def select_majority(candidates: Sequence[RankedCandidate], k: int) -> RankedCandidate | None:
    """The majority@k choice among the first ``k`` samples, or None."""
    pool = _first_k(candidates, k)
    winner = majority_vote([c.key for c in pool], normalize=lambda key: key or "")
    return None if winner is None else pool[winner]


def default_ks(n: int) -> list[int]:
    """1, 2, 4, ... up to n, and n itself."""
    ks, k = [], 1
    while k < n:
        ks.append(k)
        k *= 2
    return ks + [n] if n >= 1 else []


def curves(
    instances: Iterable[Sequence[RankedCandidate]], ks: Sequence[int] | None = None
) -> dict[str, dict[int, float]]:
    """Resolution rates over k for instances with gold results: ``best@k`` and ``majority@k``
    (the chosen patch resolves the instance) and ``pass@k`` (unbiased estimate). Instances
    without gold results, or with fewer than k samples, are left out of that k."""
    gold = [list(c) for c in instances if c and all(x.resolved is not None for x in c)]
    if ks is None:
        ks = default_ks(max((len(c) for c in gold), default=0))
    result: dict[str, dict[int, float]] = {"best@k": {}, "majority@k": {}, "pass@k": {}}
    for k in ks:
        eligible = [c for c in gold if len(c) >= k]
        if not eligible:
            continue
        result["best@k"][k] = _mean(_resolved(select_best(c, k)) for c in eligible)
        result["majority@k"][k] = _mean(_resolved(select_majority(c, k)) for c in eligible)
        result["pass@k"][k] = _mean(pass_at_k_estimate(len(c), sum(bool(x.resolved) for x in c), k) for c in eligible)
    return result


def _resolved(candidate: RankedCandidate | None) -> float:
    return float(bool(candidate and candidate.resolved))


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def headline(runs: Sequence[Sequence[bool]], best: Sequence[bool] | None = None) -> dict:
    """pass@1 averaged over runs (module docstring): ``runs[j][i]`` says whether run j resolved
    instance i (every run over the same instances); ``best[i]``: whether the best@k patch of
    instance i resolved it. Percent values, as the paper prints them."""
    if not runs or not runs[0]:
        raise ValueError("the headline needs at least one run over at least one instance")
    if len({len(run) for run in runs}) != 1 or (best is not None and len(best) != len(runs[0])):
        raise ValueError("every run (and best@k) must cover the same instances")
    rates = [100.0 * sum(map(bool, run)) / len(run) for run in runs]
    per_instance = [sum(bool(run[i]) for run in runs) / len(runs) for i in range(len(runs[0]))]
    result = {
        "pass@1": sum(rates) / len(rates),
        "pass@1_stderr": standard_error(rates),
        "runs": len(runs),
        "per_run": rates,
        "instances": len(runs[0]),
        "pass@1_stderr_instances": 100.0 * standard_error(per_instance),
    }
    if best is not None:
        result[f"best@{len(runs)}"] = 100.0 * sum(map(bool, best)) / len(best)
    return result


def runs_of(instances: Sequence[Sequence[RankedCandidate]]) -> list[list[bool]]:
    """The k runs of instances with gold results: run j is each instance's j-th sample (k: the
    most samples of an instance; a missing sample, or one without a patch, resolves nothing)."""
    if not instances:
        return []
    k = max(len(candidates) for candidates in instances)
    by_index = [{c.index: c for c in candidates} for candidates in instances]
    return [
        [bool(sample.patch and sample.resolved) if (sample := samples.get(j)) else False for samples in by_index]
        for j in range(k)
    ]
