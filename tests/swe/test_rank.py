"""Ranking candidate patches: best@k, majority@k, pass@k and curves over k."""

import pytest

from cascade_rl.rewards.swe_edits import unified_diff
from cascade_rl.swe.rank import RankedCandidate as C
from cascade_rl.swe.rank import curves, default_ks, select_best, select_majority

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
