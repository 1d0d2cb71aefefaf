"""Codeforces Elo estimate of a model from simulated contest participation (SPEC section 9,
seed appendix E).

Per contest the model makes N independent submissions per problem (N = 8 by default); k of
them are correct. Real submissions are sequential and only wrong ones *before* the first
accepted one are penalised; with the k correct and N - k wrong submissions ordered uniformly at
random over the C(N, k) orders, the expected number of penalised submissions is
``(N - k) / (k + 1)``. Standard Codeforces rules then give the model's result:

- regular rounds: a solved problem is worth its maximum points minus 50 per expected
  penalty; an unsolved problem scores 0 and carries no penalty;
- ICPC-style rounds (Educational, Div. 3, Div. 4): solved problems count, ties broken by
  penalty time, 10 minutes per expected wrong submission on solved problems only.

The model is ranked among the n human contestants of the real scoreboard (rank m,
1 <= m <= n + 1) and its performance rating R solves

    m = 1 + sum_i 1 / (1 + 10^((R - R_i) / 400))

with R_i the humans' pre-contest ratings; the reported Elo is the mean over contests.

Assumptions, where the appendix is silent (each documented and, where it matters, an option):

- **Rank equation**: the appendix cites "the standard Elo rating definition" and writes the
  sum without the leading 1. The standard (Codeforces) expected rank, or seed, is
  ``1 + sum_i P(i beats the model)``; only this form covers the stated range of m, [1, n + 1],
  and gives a model in the middle of a field of equally rated humans their rating. It is the
  default (``rank_equation="codeforces"``); ``"as_written"`` solves the sum without the 1.
- **Solve time**: the model has no wall clock in the contest, so it is taken to submit at
  minute 0: no time decay of points in regular rounds, no solve time in ICPC penalty.
- **Ties**: humans with exactly the model's result share its place; the model takes the
  middle of the tied places, m = 1 + (humans strictly better) + (humans tied) / 2.
- **Point floor**: Codeforces never awards less than 30% of a solved problem's maximum;
  ``min_points_fraction`` (0.3) keeps that rule (set 0 to drop it).
- **No root**: the expected rank tends to 1 (resp. n + 1) only as R goes to +inf (-inf), so a
  rank at or beyond that limit has no finite solution; the bisection then returns the bound
  of its search interval (``rating_bounds``, default -1000..5000).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

ContestStyle = Literal["regular", "icpc"]
RankEquation = Literal["codeforces", "as_written"]

DEFAULT_SUBMISSIONS = 8
PENALTY_POINTS = 50.0
PENALTY_MINUTES = 10.0
_TIE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Problem:
    """One contest problem; ``max_points`` is needed for regular rounds only."""

    name: str
    max_points: float | None = None


@dataclass(frozen=True)
class Standing:
    """A scoreboard result: ``points`` for regular rounds; ``solved`` and ``penalty_minutes``
    for ICPC-style rounds."""

    points: float = 0.0
    solved: int = 0
    penalty_minutes: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Contestant(Standing):
    """One human on the final scoreboard: their result and pre-contest ``rating``."""

    rating: float


@dataclass(frozen=True)
class Contest:
    name: str
    style: ContestStyle
    problems: tuple[Problem, ...]
    contestants: tuple[Contestant, ...]

    def __post_init__(self) -> None:
        if self.style not in ("regular", "icpc"):
            raise ValueError(f"contest {self.name!r}: style must be 'regular' or 'icpc', got {self.style!r}")
        if not self.contestants:
            raise ValueError(f"contest {self.name!r} has no human contestants to rank against")
        if not self.problems:
            raise ValueError(f"contest {self.name!r} has no problems")
        if self.style == "regular":
            missing = [p.name for p in self.problems if p.max_points is None or p.max_points <= 0]
            if missing:
                raise ValueError(f"contest {self.name!r} (regular round): problems {missing} need positive max_points")


@dataclass(frozen=True)
class ContestResult:
    """The model's correct-submission count per problem of ``contest`` (same order), out of
    ``submissions`` attempts each."""

    contest: Contest
    correct: tuple[int, ...]
    submissions: int = DEFAULT_SUBMISSIONS

    def __post_init__(self) -> None:
        if len(self.correct) != len(self.contest.problems):
            raise ValueError(
                f"contest {self.contest.name!r}: {len(self.correct)} correct counts for "
                f"{len(self.contest.problems)} problems"
            )
        for problem, k in zip(self.contest.problems, self.correct):
            if not 0 <= k <= self.submissions:
                raise ValueError(
                    f"contest {self.contest.name!r}, problem {problem.name!r}: "
                    f"correct={k} outside 0..{self.submissions}"
                )


@dataclass(frozen=True)
class EloEstimate:
    elo: float
    per_contest: dict[str, float]


def expected_penalties(submissions: int, correct: int) -> float:
    """Expected wrong submissions before the first correct one, (N - k) / (k + 1), for k >= 1.
    Unsolved problems (k = 0) carry no penalty, so this returns 0 for them."""
    if submissions < 1 or not 0 <= correct <= submissions:
        raise ValueError(f"need 0 <= k <= N and N >= 1, got k={correct}, N={submissions}")
    if correct == 0:
        return 0.0
    return (submissions - correct) / (correct + 1)


def model_standing(result: ContestResult, min_points_fraction: float = 0.3) -> Standing:
    """The model's scoreboard line for its contest under the rules in the module docstring."""
    contest = result.contest
    solved = [(p, k) for p, k in zip(contest.problems, result.correct) if k > 0]
    penalties = [expected_penalties(result.submissions, k) for _, k in solved]
    if contest.style == "icpc":
        return Standing(solved=len(solved), penalty_minutes=PENALTY_MINUTES * sum(penalties))
    points = sum(
        max(p.max_points - PENALTY_POINTS * e, min_points_fraction * p.max_points)
        for (p, _), e in zip(solved, penalties)
    )
    return Standing(points=points, solved=len(solved))


def _compare(human: Contestant, model: Standing, style: ContestStyle) -> int:
    """+1 if the human placed above the model, -1 below, 0 tied."""
    if style == "regular":
        difference = human.points - model.points
    elif human.solved != model.solved:
        difference = human.solved - model.solved
    else:
        difference = model.penalty_minutes - human.penalty_minutes
    if abs(difference) <= _TIE_TOLERANCE:
        return 0
    return 1 if difference > 0 else -1


def model_rank(contest: Contest, standing: Standing) -> float:
    """m = 1 + humans strictly better + half of the humans tied with the model."""
    outcomes = [_compare(human, standing, contest.style) for human in contest.contestants]
    return 1.0 + outcomes.count(1) + outcomes.count(0) / 2.0


def expected_rank(
    rating: float, opponent_ratings: Sequence[float], rank_equation: RankEquation = "codeforces"
) -> float:
    """Expected place of a contestant rated ``rating`` among the opponents (decreasing in rating)."""
    beaten_by = sum(1.0 / (1.0 + 10.0 ** ((rating - other) / 400.0)) for other in opponent_ratings)
    return beaten_by + (1.0 if rank_equation == "codeforces" else 0.0)


def performance_rating(
    rank: float,
    opponent_ratings: Sequence[float],
    rank_equation: RankEquation = "codeforces",
    rating_bounds: tuple[float, float] = (-1000.0, 5000.0),
    tolerance: float = 1e-6,
) -> float:
    """Solve expected_rank(R) = rank for R by bisection (expected rank falls monotonically in R)."""
    if not opponent_ratings:
        raise ValueError("need at least one opponent rating")
    if rank_equation not in ("codeforces", "as_written"):
        raise ValueError(f"rank_equation must be 'codeforces' or 'as_written', got {rank_equation!r}")
    low, high = rating_bounds
    if not low < high:
        raise ValueError(f"rating_bounds must be (low, high) with low < high, got {rating_bounds}")
    if rank >= expected_rank(low, opponent_ratings, rank_equation):
        return low
    if rank <= expected_rank(high, opponent_ratings, rank_equation):
        return high
    for _ in range(200):
        if high - low <= tolerance:
            break
        middle = (low + high) / 2.0
        if expected_rank(middle, opponent_ratings, rank_equation) > rank:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def contest_rating(
    result: ContestResult,
    *,
    rank_equation: RankEquation = "codeforces",
    min_points_fraction: float = 0.3,
    rating_bounds: tuple[float, float] = (-1000.0, 5000.0),
) -> float:
    """The model's performance rating in one contest."""
    contest = result.contest
    rank = model_rank(contest, model_standing(result, min_points_fraction))
    ratings = [human.rating for human in contest.contestants]
    return performance_rating(rank, ratings, rank_equation, rating_bounds)


def codeforces_elo(
    results: Sequence[ContestResult],
    *,
    rank_equation: RankEquation = "codeforces",
    min_points_fraction: float = 0.3,
    rating_bounds: tuple[float, float] = (-1000.0, 5000.0),
) -> EloEstimate:
    """Mean performance rating over contests (the paper's reported Codeforces Elo)."""
    if not results:
        raise ValueError("codeforces_elo needs at least one contest result")
    names = [result.contest.name for result in results]
    if len(set(names)) != len(names):
        raise ValueError(f"contest names must be unique, got {names}")
    per_contest = {
        result.contest.name: contest_rating(
            result, rank_equation=rank_equation, min_points_fraction=min_points_fraction, rating_bounds=rating_bounds
        )
        for result in results
    }
    elo = math.fsum(per_contest.values()) / len(per_contest)
    return EloEstimate(elo=elo, per_contest=per_contest)
