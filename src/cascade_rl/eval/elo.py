"""Codeforces Elo estimate of a model from simulated contest participation (SPEC section 9,
seed appendix E), and the contest and sample files ``cascade elo`` reads.

Per contest the model makes N independent submissions per problem (N = 8 in the paper); k of
them are correct. Real submissions are sequential and only wrong ones *before* the first
accepted one are penalised; with the k correct and N - k wrong submissions ordered uniformly at
random over the C(N, k) orders, the expected number of penalised submissions is
``(N - k) / (k + 1)``. Standard Codeforces rules then give the model's result:

- regular rounds: a solved problem is worth its maximum points minus 50 per expected
  penalty; an unsolved problem scores 0 and carries no penalty;
- ICPC-style rounds (Educational, Div. 3, Div. 4): solved problems count, ties broken by
  penalty time, 10 minutes per expected wrong submission on solved problems only.

The model is ranked among the n human contestants of the real scoreboard (rank m,
1 <= m <= n + 1) and its performance rating R solves, exactly as the appendix writes it,

    m = sum_i 1 / (1 + 10^((R - R_i) / 400))

with R_i the humans' pre-contest ratings; the reported Elo is the mean over contests.

Departures from the appendix, each an option and off by default:

- ``rank_equation="codeforces"`` solves ``m = 1 + sum_i ...`` instead: Codeforces' own seed
  (expected place), which covers the whole range m in [1, n + 1] and gives a model in the
  middle of a field of equally rated humans exactly their rating. The appendix's form
  (``"as_written"``, the default) counts every place as one worse, so it rates lower: by
  under 5 points in a field of 5,000 humans, by up to about 80 near the top of a field of
  200, and a place at or below the n-th has no finite solution.
- ``min_points_fraction=0.3`` keeps Codeforces' floor (a solved problem is never worth less
  than 30% of its maximum); the appendix subtracts 50 points per expected penalty without one.

Where the appendix is silent (assumptions, not options):

- **Solve time**: the model has no wall clock in the contest, so it is taken to submit at
  minute 0: no time decay of points in regular rounds, no solve time in ICPC penalty.
- **Ties**: humans with exactly the model's result share its place; the model takes the
  middle of the tied places, m = 1 + (humans strictly better) + (humans tied) / 2.
- **No root**: the right-hand side tends to its bounds only as R goes to +-inf, so a rank at
  or beyond them (e.g. below every human) has no finite solution; the bisection then returns
  the bound of its search interval (``rating_bounds``, default -1000..5000).

Files (:func:`load_contests`, :func:`load_samples`; format in docs/tts.md): a YAML or JSON
contest file lists contests with their style, problems (id, points) and human standings
(inline or a CSV file: ``rating`` with ``points``, or with ``solved`` and ``penalty``); a
JSONL samples file has one row per model sample: the problem id (``problem`` or ``id``) and
whether it was correct (``correct``, or a ``reward`` of 1 as ``cascade eval`` writes). Errors
are one line naming the file and the field (:class:`ContestFileError`).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

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
    submissions: int | tuple[int, ...] = DEFAULT_SUBMISSIONS  # N, or one N per problem

    def __post_init__(self) -> None:
        if len(self.correct) != len(self.contest.problems):
            raise ValueError(
                f"contest {self.contest.name!r}: {len(self.correct)} correct counts for "
                f"{len(self.contest.problems)} problems"
            )
        if len(self.attempts) != len(self.contest.problems):
            raise ValueError(f"contest {self.contest.name!r}: one submission count per problem needed")
        for problem, k, n in zip(self.contest.problems, self.correct, self.attempts):
            if n < 1 or not 0 <= k <= n:
                raise ValueError(f"contest {self.contest.name!r}, problem {problem.name!r}: correct={k} outside 0..{n}")

    @property
    def attempts(self) -> tuple[int, ...]:
        """N per problem."""
        if isinstance(self.submissions, int):
            return (self.submissions,) * len(self.contest.problems)
        return tuple(self.submissions)


@dataclass(frozen=True)
class ContestPerformance:
    """The model's line in one contest: its standing, place m among n humans, and rating."""

    name: str
    style: ContestStyle
    standing: Standing
    rank: float
    contestants: int
    rating: float


@dataclass(frozen=True)
class EloEstimate:
    elo: float
    per_contest: dict[str, float]
    contests: tuple[ContestPerformance, ...] = ()


def expected_penalties(submissions: int, correct: int) -> float:
    """Expected wrong submissions before the first correct one, (N - k) / (k + 1), for k >= 1.
    Unsolved problems (k = 0) carry no penalty, so this returns 0 for them."""
    if submissions < 1 or not 0 <= correct <= submissions:
        raise ValueError(f"need 0 <= k <= N and N >= 1, got k={correct}, N={submissions}")
    if correct == 0:
        return 0.0
    return (submissions - correct) / (correct + 1)


def model_standing(result: ContestResult, min_points_fraction: float = 0.0) -> Standing:
    """The model's scoreboard line for its contest under the rules in the module docstring."""
    contest = result.contest
    solved = [(p, k, n) for p, k, n in zip(contest.problems, result.correct, result.attempts) if k > 0]
    penalties = [expected_penalties(n, k) for _, k, n in solved]
    if contest.style == "icpc":
        return Standing(solved=len(solved), penalty_minutes=PENALTY_MINUTES * sum(penalties))
    points = sum(
        max(p.max_points - PENALTY_POINTS * e, min_points_fraction * p.max_points)
        for (p, _, _), e in zip(solved, penalties)
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
    rating: float, opponent_ratings: Sequence[float], rank_equation: RankEquation = "as_written"
) -> float:
    """Expected place of a contestant rated ``rating`` among the opponents (decreasing in rating)."""
    beaten_by = sum(1.0 / (1.0 + 10.0 ** ((rating - other) / 400.0)) for other in opponent_ratings)
    return beaten_by + (1.0 if rank_equation == "codeforces" else 0.0)


def performance_rating(
    rank: float,
    opponent_ratings: Sequence[float],
    rank_equation: RankEquation = "as_written",
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


def contest_performance(
    result: ContestResult,
    *,
    rank_equation: RankEquation = "as_written",
    min_points_fraction: float = 0.0,
    rating_bounds: tuple[float, float] = (-1000.0, 5000.0),
) -> ContestPerformance:
    """The model's standing, place and performance rating in one contest."""
    contest = result.contest
    standing = model_standing(result, min_points_fraction)
    rank = model_rank(contest, standing)
    ratings = [human.rating for human in contest.contestants]
    rating = performance_rating(rank, ratings, rank_equation, rating_bounds)
    return ContestPerformance(contest.name, contest.style, standing, rank, len(ratings), rating)


def contest_rating(result: ContestResult, **options: Any) -> float:
    """The model's performance rating in one contest (options of :func:`contest_performance`)."""
    return contest_performance(result, **options).rating


def codeforces_elo(
    results: Sequence[ContestResult],
    *,
    rank_equation: RankEquation = "as_written",
    min_points_fraction: float = 0.0,
    rating_bounds: tuple[float, float] = (-1000.0, 5000.0),
) -> EloEstimate:
    """Mean performance rating over contests (the paper's reported Codeforces Elo)."""
    if not results:
        raise ValueError("codeforces_elo needs at least one contest result")
    names = [result.contest.name for result in results]
    if len(set(names)) != len(names):
        raise ValueError(f"contest names must be unique, got {names}")
    performances = tuple(
        contest_performance(
            result, rank_equation=rank_equation, min_points_fraction=min_points_fraction, rating_bounds=rating_bounds
        )
        for result in results
    )
    per_contest = {performance.name: performance.rating for performance in performances}
    elo = math.fsum(per_contest.values()) / len(per_contest)
    return EloEstimate(elo=elo, per_contest=per_contest, contests=performances)


# ----------------------------------------------------------------------------- files


class ContestFileError(ValueError):
    """A contest or samples file that cannot be used; one line naming the file and the field."""


CONTEST_FIELDS = ("name", "style", "problems", "standings")
PROBLEM_FIELDS = ("id", "points")
STANDING_FIELDS = ("rating", "points", "solved", "penalty", "handle", "rank")


def _unknown(entry: dict, known: Sequence[str], where: str) -> None:
    extra = sorted(set(entry) - set(known))
    if extra:
        raise ContestFileError(f"{where}: unknown field '{extra[0]}' (known: {', '.join(known)})")


def _number(value: Any, where: str, *, positive: bool = False) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ContestFileError(f"{where}: expected a number, got {value!r}") from None
    if not math.isfinite(number) or (positive and number <= 0):
        raise ContestFileError(f"{where}: expected a {'positive ' if positive else ''}finite number, got {value!r}")
    return number


def _standing(row: dict, style: ContestStyle, where: str) -> Contestant:
    if row.get("rating") in (None, ""):
        raise ContestFileError(f"{where}: rating: missing (each human's pre-contest rating)")
    rating = _number(row["rating"], f"{where}: rating")
    if style == "regular":
        if row.get("points") in (None, ""):
            raise ContestFileError(f"{where}: points: missing (a regular round ranks by points)")
        return Contestant(rating=rating, points=_number(row["points"], f"{where}: points"))
    if row.get("solved") in (None, ""):
        raise ContestFileError(f"{where}: solved: missing (an ICPC-style round ranks by problems solved)")
    penalty = row.get("penalty")
    return Contestant(
        rating=rating,
        solved=int(_number(row["solved"], f"{where}: solved")),
        penalty_minutes=_number(penalty, f"{where}: penalty") if penalty not in (None, "") else 0.0,
    )


def _standings(value: Any, style: ContestStyle, base: Path, where: str) -> tuple[Contestant, ...]:
    if isinstance(value, str):
        csv_path = base / value
        if not csv_path.is_file():
            raise ContestFileError(f"{where}: file {csv_path} does not exist")
        with open(csv_path, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        return tuple(_standing(row, style, f"{csv_path}:{line}") for line, row in enumerate(rows, 2))
    if not isinstance(value, list) or not value:
        raise ContestFileError(f"{where}: expected a non-empty list of humans or a CSV file name")
    contestants = []
    for position, row in enumerate(value):
        if not isinstance(row, dict):
            raise ContestFileError(f"{where}[{position}]: expected a mapping with rating and points")
        _unknown(row, STANDING_FIELDS, f"{where}[{position}]")
        contestants.append(_standing(row, style, f"{where}[{position}]"))
    return tuple(contestants)


def _contest(entry: Any, base: Path, where: str) -> Contest:
    if not isinstance(entry, dict):
        raise ContestFileError(f"{where}: expected a mapping with {', '.join(CONTEST_FIELDS)}")
    _unknown(entry, CONTEST_FIELDS, where)
    for field in CONTEST_FIELDS:
        if field not in entry:
            raise ContestFileError(f"{where}: {field}: missing")
    style = entry["style"]
    if style not in ("regular", "icpc"):
        raise ContestFileError(f"{where}: style: must be 'regular' or 'icpc', got {style!r}")
    if not isinstance(entry["problems"], list) or not entry["problems"]:
        raise ContestFileError(f"{where}: problems: expected a non-empty list")
    problems = []
    for position, problem in enumerate(entry["problems"]):
        spot = f"{where}.problems[{position}]"
        if not isinstance(problem, dict) or not problem.get("id"):
            raise ContestFileError(f"{spot}: id: missing")
        _unknown(problem, PROBLEM_FIELDS, spot)
        if style == "regular" and "points" not in problem:
            raise ContestFileError(f"{spot}: points: missing (a regular round needs each problem's maximum points)")
        points = _number(problem["points"], f"{spot}: points", positive=True) if "points" in problem else None
        problems.append(Problem(str(problem["id"]), points))
    standings = _standings(entry["standings"], style, base, f"{where}.standings")
    return Contest(str(entry["name"]), style, tuple(problems), standings)


def load_contests(path: str | Path) -> list[Contest]:
    """Contests from a YAML or JSON file (``{"contests": [...]}`` or a bare list)."""
    path = Path(path)
    if not path.is_file():
        raise ContestFileError(f"{path}: no such contest file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise ContestFileError(f"{path}: not valid YAML or JSON ({error})") from None
    entries = data.get("contests") if isinstance(data, dict) else data
    if isinstance(data, dict):
        _unknown(data, ("contests",), str(path))
    if not isinstance(entries, list) or not entries:
        raise ContestFileError(f"{path}: contests: expected a non-empty list of contests")
    contests = [_contest(entry, path.parent, f"{path}: contests[{i}]") for i, entry in enumerate(entries)]
    seen: dict[str, str] = {}
    for i, contest in enumerate(contests):
        if contest.name in seen:
            raise ContestFileError(f"{path}: contests[{i}].name: {contest.name!r} appears twice")
        seen[contest.name] = contest.name
    owners: dict[str, str] = {}
    for contest in contests:
        for problem in contest.problems:
            if problem.name in owners:
                raise ContestFileError(
                    f"{path}: problem id {problem.name!r} is in {owners[problem.name]!r} and {contest.name!r}"
                )
            owners[problem.name] = contest.name
    return contests


def _sample_outcome(row: dict, where: str) -> bool:
    if "correct" in row:
        value = row["correct"]
        if isinstance(value, bool) or value in (0, 1):
            return bool(value)
        raise ContestFileError(f"{where}: correct: expected true/false, got {value!r}")
    if "reward" in row:
        return _number(row["reward"], f"{where}: reward") >= 1.0 - 1e-9
    raise ContestFileError(f"{where}: correct: missing (or a reward, as cascade eval writes)")


def load_samples(path: str | Path, contests: Sequence[Contest], contests_path: str | Path = "") -> list[ContestResult]:
    """The model's samples (JSONL, one row per sample) counted per problem of ``contests``."""
    path = Path(path)
    if not path.is_file():
        raise ContestFileError(f"{path}: no such samples file")
    known = {problem.name for contest in contests for problem in contest.problems}
    attempts: dict[str, int] = {}
    correct: dict[str, int] = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                row = json.loads(line)
            except ValueError as error:
                raise ContestFileError(f"{where}: not valid JSON ({error})") from None
            if not isinstance(row, dict):
                raise ContestFileError(f"{where}: expected a JSON object")
            problem_id = next((row[k] for k in ("problem", "problem_id", "id") if row.get(k) is not None), None)
            if problem_id is None:
                raise ContestFileError(f"{where}: problem: missing (the contest problem id)")
            if str(problem_id) not in known:
                source = contests_path or "the contest file"
                raise ContestFileError(f"{where}: problem: unknown problem id {str(problem_id)!r} (not in {source})")
            problem_id = str(problem_id)
            attempts[problem_id] = attempts.get(problem_id, 0) + 1
            correct[problem_id] = correct.get(problem_id, 0) + _sample_outcome(row, where)
    results = []
    for i, contest in enumerate(contests):
        for j, problem in enumerate(contest.problems):
            if problem.name not in attempts:
                raise ContestFileError(
                    f"{contests_path or 'contest file'}: contests[{i}].problems[{j}]: no samples for "
                    f"problem {problem.name!r} in {path}"
                )
        results.append(
            ContestResult(
                contest,
                tuple(correct[p.name] for p in contest.problems),
                tuple(attempts[p.name] for p in contest.problems),
            )
        )
    return results
