"""Checks before any compute (DESIGN convention 5): every file a recipe reads exists, a sub-stage's
own data included, each missing one named by its field."""

import pytest

from cascade_rl.recipe import RecipeError, parse_recipe
from cascade_rl.train.preflight import check_inputs, input_paths


def test_a_substages_own_data_is_checked_before_any_compute(tmp_path):
    (tmp_path / "first.jsonl").write_text('{"prompt": "p", "domain": "math", "answer": "1"}\n')
    stage = {
        "kind": "grpo",
        "name": "g",
        "curriculum": [
            {"max_response_length": 8, "data": str(tmp_path / "first.jsonl")},
            {"max_response_length": 8, "data": [{"path": str(tmp_path / "second.jsonl")}]},
        ],
    }
    recipe = parse_recipe({"name": "r", "model": {"path": "m"}, "stages": [stage]})
    assert [field for field, _ in input_paths(recipe)] == [
        "stages[0] (g).curriculum[0].data[0].path",
        "stages[0] (g).curriculum[1].data[0].path",
    ]
    with pytest.raises(RecipeError, match=r"stages\[0\] \(g\)\.curriculum\[1\]\.data\[0\]\.path: data file not found"):
        check_inputs(recipe, {})
