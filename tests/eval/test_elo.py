"""Codeforces Elo estimate (SPEC section 9, seed appendix E): penalty arithmetic, ranking, rating.

Defaults are the appendix's (its rank equation as written, no points floor); ``CF`` marks the
Codeforces options (the seed with its leading 1, the 30% floor)."""

import math
from itertools import combinations

import pytest

from cascade_rl.eval.elo import (
    Contest,
    Contestant,
    ContestResult,
    Problem,
    codeforces_elo,
    contest_rating,
    expected_penalties,
    expected_rank,
    model_rank,
    model_standing,
    performance_rating,
)

CF = {"rank_equation": "codeforces"}


def regular_contest(points_and_ratings, name="Round 1", max_points=(500, 1000, 1500)):
    return Contest(
        name=name,
        style="regular",
        problems=tuple(Problem(chr(65 + i), p) for i, p in enumerate(max_points)),
        contestants=tuple(Contestant(rating=r, points=p) for p, r in points_and_ratings),
    )


@pytest.mark.parametrize(
    "n, k, expected",
    [
        (8, 0, 0.0),  # unsolved: no penalty
        (8, 1, 3.5),  # 7 / 2
        (8, 3, 1.25),  # 5 / 4
        (8, 7, 0.125),  # 1 / 8
        (8, 8, 0.0),
        (1, 1, 0.0),
    ],
)
def test_expected_penalties_table(n, k, expected):
    assert expected_penalties(n, k) == pytest.approx(expected)


@pytest.mark.parametrize("k", range(1, 9))
def test_expected_penalties_equal_the_average_over_all_submission_orders(k):
    n = 8
    orders = list(combinations(range(n), k))  # positions of the correct submissions
    wrong_before_first = [min(positions) for positions in orders]
    assert expected_penalties(n, k) == pytest.approx(sum(wrong_before_first) / len(orders))


def test_regular_round_points_minus_50_per_expected_penalty():
    contest = regular_contest([(0, 1500)])
    standing = model_standing(ContestResult(contest, correct=(8, 1, 0)))
    # A: 500 - 0; B: 1000 - 50 * 3.5 = 825; C unsolved: 0 and no penalty
    assert standing.points == pytest.approx(1325.0)
    assert standing.solved == 2


def test_regular_round_has_no_points_floor_unless_the_codeforces_floor_is_asked_for():
    contest = regular_contest([(0, 1500)], max_points=(200,))
    assert model_standing(ContestResult(contest, correct=(1,))).points == pytest.approx(25.0)  # 200 - 50 * 3.5
    assert model_standing(ContestResult(contest, correct=(1,)), min_points_fraction=0.3).points == pytest.approx(60.0)


def test_icpc_round_adds_10_minutes_per_expected_wrong_submission_on_solved_problems():
    contest = Contest(
        "Educational 1", "icpc", (Problem("A"), Problem("B"), Problem("C")), (Contestant(rating=1500, solved=1),)
    )
    standing = model_standing(ContestResult(contest, correct=(2, 8, 0)))
    assert standing.solved == 2
    assert standing.penalty_minutes == pytest.approx(20.0)  # (8-2)/(2+1) = 2 wrong -> 20 min; C: none


def test_rank_counts_better_humans_and_splits_ties():
    contest = regular_contest([(2000, 1500), (1325, 1500), (1325, 1500), (500, 1500)])
    standing = model_standing(ContestResult(contest, correct=(8, 1, 0)))  # 1325 points
    assert model_rank(contest, standing) == pytest.approx(3.0)  # 1 + 1 better + 2 tied / 2


def test_icpc_rank_orders_by_solved_then_penalty():
    humans = [(3, 100), (2, 10), (2, 20), (2, 30), (1, 0)]
    contest = Contest(
        "Div3",
        "icpc",
        (Problem("A"), Problem("B")),
        tuple(Contestant(rating=1500, solved=s, penalty_minutes=p) for s, p in humans),
    )
    standing = model_standing(ContestResult(contest, correct=(2, 8)))  # 2 solved, 20 minutes
    assert model_rank(contest, standing) == pytest.approx(3.5)  # 1 + 2 better + 1 tie / 2


def test_appendix_equation_half_the_field_above_gives_the_field_rating():
    # as written: m = sum 1 / (1 + 10^((R - R_i) / 400)); m = n / 2 among equals -> 10^x = 1
    for n in (2, 6, 40):
        assert performance_rating(n / 2, [1731] * n) == pytest.approx(1731, abs=1e-3)


@pytest.mark.parametrize("n", [2, 5, 40])
def test_codeforces_seed_middle_of_an_equally_rated_field_gets_its_rating(n):
    assert performance_rating((n + 2) / 2, [1731] * n, **CF) == pytest.approx(1731, abs=1e-3)


def test_hand_computed_rating_for_a_shared_first_place():
    # rank 1.5 among two humans rated 1500
    # as written: 1.5 = 2 / (1 + 10^x) -> 10^x = 1/3; Codeforces: 0.5 = 2 / (1 + 10^x) -> 10^x = 3
    assert performance_rating(1.5, [1500, 1500]) == pytest.approx(1500 - 400 * math.log10(3), abs=1e-3)
    assert performance_rating(1.5, [1500, 1500], **CF) == pytest.approx(1500 + 400 * math.log10(3), abs=1e-3)


@pytest.mark.parametrize(
    "equation, ranks",
    [("as_written", (0.2, 1, 2, 3.5, 5, 5.8)), ("codeforces", (1.2, 2, 3, 4.5, 6, 6.8))],
)
def test_rating_falls_strictly_as_rank_worsens(equation, ranks):
    ratings = [800, 1200, 1500, 1900, 2400, 3000]
    performances = [performance_rating(m, ratings, rank_equation=equation) for m in ranks]
    assert all(a > b for a, b in zip(performances, performances[1:]))
    assert all(
        expected_rank(p, ratings, rank_equation=equation) == pytest.approx(m, abs=1e-6)
        for p, m in zip(performances, ranks)
    )


def test_unreachable_ranks_return_the_search_bounds():
    # as written, the sum over two equals never reaches 2: rank 2 of 3 places has no finite rating
    assert performance_rating(2.0, [1500, 1500]) == -1000.0
    assert performance_rating(1.0, [1500, 1500]) == pytest.approx(1500, abs=1e-3)
    # Codeforces form: a clean first place has no finite solution -> upper bound of the search
    assert performance_rating(1.0, [1500, 1500], **CF) == 5000.0
    assert performance_rating(3.0, [1500, 1500], rating_bounds=(0, 4000), **CF) == 0.0


def test_contest_rating_end_to_end():
    # model scores 1325 (see above) and ties the 2nd/3rd humans -> rank 3 among five
    contest = regular_contest([(2000, 1900), (1325, 1600), (1325, 1400), (500, 1200), (0, 1000)])
    ratings = [1900, 1600, 1400, 1200, 1000]
    rating = contest_rating(ContestResult(contest, correct=(8, 1, 0)))
    assert expected_rank(rating, ratings) == pytest.approx(3.0, abs=1e-6)
    assert 1200 < rating < 1400  # as written, place 3 of 6 reads as 3 of 5
    codeforces = contest_rating(ContestResult(contest, correct=(8, 1, 0)), **CF)
    assert expected_rank(codeforces, ratings, rank_equation="codeforces") == pytest.approx(3.0, abs=1e-6)
    assert 1400 < codeforces < 1600


def test_codeforces_elo_is_the_mean_over_contests():
    # R1: 500 points, one of four humans rated 1500 above -> rank 2: 2 = 4 / (1 + 10^x), 10^x = 1
    r1 = regular_contest([(600, 1500), (400, 1500), (300, 1500), (200, 1500)], name="R1", max_points=(500,))
    # R2: four humans rated 1600, two above -> rank 3: 3 = 4 / (1 + 10^x), 10^x = 1/3
    r2 = regular_contest([(600, 1600), (550, 1600), (100, 1600), (0, 1600)], name="R2", max_points=(500,))
    estimate = codeforces_elo([ContestResult(r1, correct=(8,)), ContestResult(r2, correct=(8,))])
    expected_r2 = 1600 - 400 * math.log10(3)
    assert estimate.per_contest == pytest.approx({"R1": 1500.0, "R2": expected_r2}, abs=1e-3)
    assert estimate.elo == pytest.approx((1500.0 + expected_r2) / 2, abs=1e-3)
    assert [c.rank for c in estimate.contests] == [2.0, 3.0]


def test_codeforces_option_mean_over_contests():
    # R1: between two humans rated 1500 -> rank 2: 1 = 2 / (1 + 10^x) -> 1500
    r1 = regular_contest([(600, 1500), (400, 1500)], name="R1", max_points=(500,))
    # R2: three humans rated 1600, two above the model -> rank 3: 2 = 3 / (1 + 10^x), 10^x = 1/2
    r2 = regular_contest([(600, 1600), (550, 1600), (100, 1600)], name="R2", max_points=(500,))
    estimate = codeforces_elo([ContestResult(r1, correct=(8,)), ContestResult(r2, correct=(8,))], **CF)
    expected_r2 = 1600 + 400 * math.log10(0.5)
    assert estimate.per_contest == pytest.approx({"R1": 1500.0, "R2": expected_r2}, abs=1e-3)
    assert estimate.elo == pytest.approx((1500.0 + expected_r2) / 2, abs=1e-3)


def test_solving_nothing_ties_the_humans_who_scored_nothing():
    contest = regular_contest([(500, 1500), (0, 1500), (0, 1500)], max_points=(500,))
    # rank 1 + 1 + 2/2 = 3 among three equals
    # Codeforces: 2 = 3 / (1 + 10^x) -> 10^x = 1/2; as written, 3 = 3 / (1 + 10^x) has no root
    assert contest_rating(ContestResult(contest, correct=(0,)), **CF) == pytest.approx(
        1500 + 400 * math.log10(0.5), abs=1e-3
    )
    assert contest_rating(ContestResult(contest, correct=(0,))) == -1000.0


def test_submissions_may_differ_per_problem():
    contest = regular_contest([(0, 1500)], max_points=(500, 1000))
    standing = model_standing(ContestResult(contest, correct=(1, 2), submissions=(4, 5)))
    # A: 500 - 50 * 3/2 = 425; B: 1000 - 50 * 3/3 = 950
    assert standing.points == pytest.approx(1375.0)


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: ContestResult(regular_contest([(0, 1500)]), correct=(1, 2)), "2 correct counts for 3 problems"),
        (lambda: ContestResult(regular_contest([(0, 1500)]), correct=(9, 0, 0)), "outside 0..8"),
        (lambda: regular_contest([(0, 1500)], max_points=(500, None)), "need positive max_points"),
        (lambda: Contest("X", "marathon", (Problem("A", 1),), (Contestant(rating=1500),)), "style must be"),
        (lambda: Contest("X", "icpc", (Problem("A"),), ()), "no human contestants"),
        (lambda: codeforces_elo([]), "at least one contest"),
    ],
)
def test_bad_input_is_named(build, message):
    with pytest.raises(ValueError, match=message):
        build()
