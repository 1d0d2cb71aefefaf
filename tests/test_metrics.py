"""avg@k, pass@k, majority@k, best@k against hand-computed values (SPEC section 9)."""

from fractions import Fraction
from math import comb

import pytest

from cascade_rl.metrics import (
    avg_at_k,
    best_at_k,
    majority_at_k,
    majority_vote,
    normalize_answer,
    pass_at_k,
    pass_at_k_estimate,
)


@pytest.mark.parametrize(
    "correct, k, expected",
    [
        ([[1, 0, 1, 1], [0, 0, 0, 0]], None, 0.375),  # (3/4 + 0) / 2
        ([[1, 0, 1, 1], [0, 0, 0, 0]], 2, 0.25),  # first two samples: (1/2 + 0) / 2
        ([[True, True], [True, False], [False, False]], 2, 0.5),
        ([[0.5, 1.0]], None, 0.75),  # partial credit averages too
        ([[1, 1, 1]], 3, 1.0),
    ],
)
def test_avg_at_k(correct, k, expected):
    assert avg_at_k(correct, k) == pytest.approx(expected)


@pytest.mark.parametrize(
    "n, c, k, expected",
    [
        (5, 2, 1, 0.4),  # 1 - C(3,1)/C(5,1) = 1 - 3/5
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (5, 2, 3, 0.9),  # 1 - C(3,3)/C(5,3) = 1 - 1/10
        (5, 2, 4, 1.0),  # fewer than k wrong samples: some draw of k always has a correct one
        (10, 3, 5, 11 / 12),  # 1 - C(7,5)/C(10,5) = 1 - 21/252
        (4, 0, 2, 0.0),  # c = 0
        (4, 4, 4, 1.0),  # c = n
        (1000, 1, 1, 0.001),
    ],
)
def test_pass_at_k_estimate_table(n, c, k, expected):
    assert pass_at_k_estimate(n, c, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("n, c, k", [(200, 37, 50), (64, 1, 32), (1024, 512, 100)])
def test_pass_at_k_product_form_matches_exact_binomials(n, c, k):
    exact = 1 - Fraction(comb(n - c, k), comb(n, k))
    assert pass_at_k_estimate(n, c, k) == pytest.approx(float(exact), rel=1e-12, abs=1e-15)


def test_pass_at_k_averages_prompts():
    # prompt 1: n=5, c=2, k=2 -> 0.7; prompt 2: n=4, c=0 -> 0
    assert pass_at_k([[1, 1, 0, 0, 0], [0, 0, 0, 0]], 2) == pytest.approx(0.35)


def test_pass_at_1_equals_avg_at_n():
    samples = [[1, 0, 0, 1, 1], [0, 1, 0, 0, 0]]
    assert pass_at_k(samples, 1) == pytest.approx(avg_at_k(samples))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: pass_at_k_estimate(3, 1, 4), "at least k=4 samples"),
        (lambda: pass_at_k_estimate(3, 4, 1), "0 <= c <= n"),
        (lambda: pass_at_k_estimate(3, 1, 0), "positive integer"),
        (lambda: pass_at_k([[1, 0.5]], 1), "binary"),
        (lambda: avg_at_k([[1, 0]], 3), "fewer than k=3"),
        (lambda: avg_at_k([]), "no prompts"),
        (lambda: avg_at_k([[1.5]]), "outside [0, 1]"),
    ],
)
def test_bad_input_is_named(call, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        call()


@pytest.mark.parametrize(
    "answers, correct, k, expected",
    [
        ([["12", "12 ", "13", "7"]], [[1, 1, 0, 0]], 4, 1.0),  # "12" twice after normalisation
        ([["7", "12", "12", "7"]], [[0, 1, 1, 0]], 4, 0.0),  # tie 2-2: "7" was seen first
        ([["12", "7", "7", "12"]], [[1, 0, 0, 1]], 4, 1.0),  # tie 2-2: "12" was seen first
        ([["7", "7", "12", "12", "12"]], [[0, 0, 1, 1, 1]], 4, 0.0),  # only the first k vote
        ([[None, "", "5"]], [[0, 0, 1]], 3, 1.0),  # samples without an answer do not vote
        ([[None, None]], [[0, 0]], 2, 0.0),  # no answer at all: wrong
        ([["  The  Answer", "the answer", "other"]], [[1, 1, 0]], 3, 1.0),
        ([["1", "1", "2"], ["3", "4", "4"]], [[1, 1, 0], [1, 0, 0]], 3, 0.5),
    ],
)
def test_majority_at_k(answers, correct, k, expected):
    assert majority_at_k(answers, correct, k) == pytest.approx(expected)


def test_majority_uses_the_given_normaliser():
    as_int = lambda answer: str(int(answer)) if answer else ""  # noqa: E731
    assert majority_vote(["9", "010", "10"], as_int) == 1  # "010" and "10" are one answer
    assert majority_vote(["9", "010", "10"]) == 0  # as strings: three singletons, first wins
    assert normalize_answer(" A\n b ") == "a b"


@pytest.mark.parametrize(
    "scores, correct, k, expected",
    [
        ([[0.2, 0.9, 0.9, 0.1]], [[1, 0, 1, 1]], 4, 0.0),  # tie at 0.9 -> earliest (index 1)
        ([[0.2, 0.9, 0.9, 0.1]], [[1, 0, 1, 1]], 1, 1.0),  # only the first sample is eligible
        ([[(1.0, 2, -10), (1.0, 3, -50), (0.5, 9, 0)]], [[0, 1, 0]], 3, 1.0),  # lexicographic tuples
        ([[3, 1], [1, 3]], [[0.25, 1.0], [1.0, 0.75]], 2, 0.5),  # chosen samples' partial credit
    ],
)
def test_best_at_k(scores, correct, k, expected):
    assert best_at_k(scores, correct, k) == pytest.approx(expected)


def test_best_and_majority_reject_mismatched_lengths():
    with pytest.raises(ValueError, match="best@k: 2 prompts but correct has 1"):
        best_at_k([[1], [2]], [[1]], 1)
    with pytest.raises(ValueError, match="majority@k: prompt 0 has 2 entries but 1 correctness"):
        majority_at_k([["a", "b"]], [[1]], 1)


def test_standard_error_over_prompts():
    from cascade_rl.metrics import standard_error

    assert standard_error([1.0]) == 0.0 and standard_error([]) == 0.0
    assert standard_error([0.0, 1.0]) == pytest.approx(0.5)  # std 0.7071 / sqrt(2)
    assert standard_error([0.25] * 10) == 0.0


def test_verify_result_records_the_standard_error_in_points():
    from types import SimpleNamespace

    from cascade_rl.eval.benchmarks import verify_result

    bench = SimpleNamespace(name="b", pass_threshold=1.0, metric="avg@k", k=2)
    scores = [[SimpleNamespace(reward=1.0, details={})] * 2, [SimpleNamespace(reward=0.0, details={})] * 2]
    result = verify_result(bench, scores)
    assert result.value == 50.0 and result.extra["stderr"] == pytest.approx(50.0)
