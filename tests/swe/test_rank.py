"""Ranking candidate patches: best@k, majority@k, pass@k and curves over k."""

import statistics

import pytest

from cascade_rl.rewards.swe_edits import unified_diff
from cascade_rl.swe.pipeline import harness_headline
from cascade_rl.swe.rank import RankedCandidate as C
from cascade_rl.swe.rank import curves, default_ks, headline, runs_of, select_best, select_majority

ORIGINAL = {"m.py": "def f(x):\n    return x\n\n\ndef g(y):\n    return y\n"}


def patch(**replacements):
    text = ORIGINAL["m.py"]
    for old, new in replacements.items():
        text = text.replace(old.replace("_", " "), new.replace("_", " "))
    return unified_diff(ORIGINAL, {"m.py": text})


FIX = patch(return_x="return_x_+_1")
FIX_WIDE = unified_diff(ORIGINAL, {"m.py": ORIGINAL["m.py"].replace("return x", "return x + 1")}, context=1)
OTHER = patch(return_y="return_y_+_1")
BIG = patch(return_x="return_x_+_1", return_y="return_y_*_1")


def test_best_drops_regression_breakers_then_prefers_pass_rate():
    candidates = [C(0, OTHER, regression_ok=False, pass_rate=1.0), C(1, FIX, pass_rate=0.5), C(2, BIG, pass_rate=0.8)]
    assert select_best(candidates, 3).index == 2
    assert select_best(candidates, 2).index == 1
    assert select_best(candidates, 1).index == 0  # nothing survives: all stay in the race


def test_best_ties_go_to_votes_then_smaller_edit():
    # FIX and FIX_WIDE differ only in context: one normalised patch with two votes
    candidates = [
        C(0, BIG, pass_rate=0.5),
        C(1, FIX, pass_rate=0.5),
        C(2, FIX_WIDE, pass_rate=0.5),
        C(3, "", pass_rate=1.0),
    ]
    assert select_best(candidates, 4).index == 2  # same change as 1, shorter text (less context)
    # without the votes: same pass rate, FIX is the smaller edit
    assert select_best([C(0, BIG, pass_rate=0.5), C(1, FIX, pass_rate=0.5)], 2).index == 1


def test_majority_counts_normalised_patches_and_ignores_empty_ones():
    candidates = [C(0, OTHER), C(1, FIX), C(2, ""), C(3, FIX_WIDE), C(4, OTHER), C(5, OTHER)]
    assert select_majority(candidates, 4).index == 1
    assert select_majority(candidates, 6).index == 0
    assert select_majority([C(0, ""), C(1, "")], 2) is None
    assert select_best([C(0, "")], 1) is None
    with pytest.raises(ValueError, match="k must be >= 1"):
        select_best(candidates, 0)


def test_curves_over_k():
    solved = [
        C(0, OTHER, resolved=False, pass_rate=0.0),
        C(1, FIX, resolved=True, pass_rate=1.0),
        C(2, OTHER, resolved=False, pass_rate=0.0),
        C(3, OTHER, resolved=False, pass_rate=0.0),
    ]
    unsolved = [C(i, OTHER, resolved=False) for i in range(4)]
    no_gold = [C(i, FIX) for i in range(4)]
    result = curves([solved, unsolved, no_gold])
    assert list(result["pass@k"]) == [1, 2, 4]
    assert result["best@k"] == {1: 0.0, 2: 0.5, 4: 0.5}
    assert result["majority@k"] == {1: 0.0, 2: 0.0, 4: 0.0}
    # pass@k of `solved` (1 of 4): 1/4, 1/2, 1; `unsolved` 0
    assert result["pass@k"] == pytest.approx({1: 0.125, 2: 0.25, 4: 0.5})


def test_default_ks():
    assert default_ks(1) == [1]
    assert default_ks(8) == [1, 2, 4, 8]
    assert default_ks(10) == [1, 2, 4, 8, 10]


def test_headline_is_pass_at_1_over_runs_with_best_at_k_beside_it():
    # 4 runs over 5 instances: 2, 2, 1, 3 resolved; best@4 resolves 4
    runs = [
        [True, True, False, False, False],
        [True, False, True, False, False],
        [True, False, False, False, False],
        [True, True, True, False, False],
    ]
    result = headline(runs, [True, True, True, True, False])
    assert result["per_run"] == [40.0, 40.0, 20.0, 60.0] and result["pass@1"] == pytest.approx(40.0)
    assert result["pass@1_stderr"] == pytest.approx(statistics.stdev([40, 40, 20, 60]) / 2)
    assert result["best@4"] == 80.0 and result["runs"] == 4 and result["instances"] == 5
    assert headline([[True, False]])["pass@1_stderr"] == 0.0  # one run: no spread to measure
    with pytest.raises(ValueError, match="same instances"):
        headline([[True], [True, False]])
    with pytest.raises(ValueError, match="at least one run"):
        headline([])


def test_runs_of_take_the_jth_sample_of_each_instance():
    first = [C(0, "p", resolved=True), C(1, "", resolved=False)]
    second = [C(1, "q", resolved=True), C(0, "r", resolved=False)]
    assert runs_of([first, second]) == [[True, False], [False, True]]
    assert runs_of([first, [C(0, "s", resolved=True)]]) == [[True, True], [False, False]]


def test_headline_from_harness_reports():
    runs = [
        {"resolved_ids": ["a"], "submitted_ids": ["a", "b"]},
        {"resolved_ids": ["a", "b"], "submitted_ids": ["a", "b", "c"]},
    ]
    result = harness_headline(runs, {"resolved_ids": ["b", "c"]})
    assert result["instances"] == 3 and result["per_run"] == pytest.approx([100 / 3, 200 / 3])
    assert result["best@2"] == pytest.approx(200 / 3)
    # the evaluated instances named: unsubmitted ones count as unresolved
    assert harness_headline(runs, instance_ids=["a", "b", "c", "d"])["pass@1"] == pytest.approx(100 * 3 / 8)
    with pytest.raises(ValueError, match="no resolved_ids"):
        harness_headline([{"resolved": 3}])
    with pytest.raises(ValueError, match="name the evaluated instances"):
        harness_headline([{"resolved_ids": []}])
