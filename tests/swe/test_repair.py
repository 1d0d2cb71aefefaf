"""Repair: context within a token budget, k samples, candidate patches and their status."""

import ast

import pytest
from swe_assets import ScriptedGenerator, edit, repair_answer

from cascade_rl.llm.base import Sampling
from cascade_rl.swe.repair import approx_tokens, build_context, candidate_from_response, compress_python, repair
from cascade_rl.swe.repo import Repository

MODULE = '''"""Shipping costs."""

import math
from decimal import Decimal

RATE = 3


class Parcel:
    def __init__(self, weight):
        self.weight = weight

    def volume_weight(self, width, height, depth):
        total = width * height * depth
        return total / 5000

    def label(self):
        return f"parcel of {self.weight} kg"


def shipping_cost(parcel):
    """Cost of sending ``parcel``."""
    billable = max(parcel.weight, 0)
    return math.ceil(billable) * RATE


def insurance(value):
    return Decimal(value) * Decimal("0.01")
'''


def test_whole_files_when_they_fit():
    content, shown = build_context([("ship.py", MODULE)], "anything", budget=None)
    assert shown == {"ship.py": MODULE}
    assert content.startswith('### ship.py\n"""Shipping costs."""')


def test_compression_keeps_imports_definitions_and_the_relevant_body():
    issue = "shipping_cost ignores the billable weight of a parcel: max(parcel.weight) is wrong"
    whole = approx_tokens(MODULE)
    view = compress_python(MODULE, issue, budget=whole - 20)
    assert view is not None and approx_tokens(view) <= whole - 20
    # imports, constants and every definition header survive
    for line in (
        "import math",
        "from decimal import Decimal",
        "RATE = 3",
        "class Parcel:",
        "    def volume_weight(self, width, height, depth):",
        "def insurance(value):",
    ):
        assert line in view
    # the relevant body is shown verbatim, an irrelevant one is elided
    assert "    billable = max(parcel.weight, 0)\n    return math.ceil(billable) * RATE\n" in view
    assert 'Decimal("0.01")' not in view and "    ...\n" in view
    # every shown line is a line of the file, so SEARCH texts copied from it match
    source_lines = set(MODULE.splitlines())
    assert all(line in source_lines or line.strip() == "..." for line in view.splitlines())


def test_budget_too_small_for_the_skeleton_drops_the_file():
    assert compress_python(MODULE, "x", budget=5) is None
    content, shown = build_context([("a.py", "A = 1\n"), ("ship.py", MODULE)], "issue", budget=12)
    assert list(shown) == ["a.py"] and "ship.py" not in content


def test_non_python_text_is_cut_to_its_first_lines():
    text = "".join(f"line {i} of the readme\n" for i in range(100))
    view = compress_python(text + "def broken(:\n", "readme", budget=40)
    assert view.startswith("line 0 of the readme\n") and view.endswith("...\n")
    assert approx_tokens(view) <= 40


def test_budgeted_context_fills_files_in_rank_order():
    small = "def f():\n    return 1\n"
    content, shown = build_context(
        [("first.py", MODULE), ("second.py", small)], "shipping_cost", budget=approx_tokens(MODULE) // 2 + 30
    )
    assert list(shown) == ["first.py", "second.py"]
    assert shown["second.py"] == small and shown["first.py"] != MODULE
    ast.parse(shown["first.py"].replace("...", "pass"))  # still reads as Python


def _reader(files):
    return lambda paths: {p: files[p] for p in paths if p in files}


@pytest.mark.parametrize(
    "response, status, error",
    [
        (repair_answer(edit("ship.py", "RATE = 3\n", "RATE = 4\n")), "ok", None),
        (repair_answer(edit("ship.py", "RATE = 3\n", "RATE = 3\n")), "no_op", None),
        ("<think>", "unparseable", "unfinished thinking"),
        ("<think>done</think>   ", "empty", "blank answer"),
        ("<think>done</think>I cannot fix this.", "unparseable", "no SEARCH/REPLACE edit"),
        (repair_answer(edit("ship.py", "RATE = 5\n", "RATE = 4\n")), "unparseable", "SEARCH text not found"),
        (repair_answer(edit("other.py", "x\n", "y\n")), "unparseable", "file not found"),
    ],
)
def test_candidate_status(response, status, error):
    candidate = candidate_from_response(3, response, _reader({"ship.py": MODULE}))
    assert (candidate.index, candidate.status) == (3, status)
    assert (candidate.error is None) if error is None else (error in candidate.error)
    assert bool(candidate.patch) == (status == "ok")


def test_edits_apply_to_full_files_even_when_the_prompt_showed_a_part(fixture_checkouts):
    path, instance = fixture_checkouts["inventory"]
    repo = Repository.open(path, instance["base_commit"])
    fix = edit("inventory/pricing.py", "    return price * percent / 100\n", "    return price * (1 - percent / 100)\n")
    stock = edit("inventory/stock.py", "    def level(self, sku):\n", "    def level(self, sku):  # read\n")
    generator = ScriptedGenerator(repair=[repair_answer(fix), repair_answer(fix, stock), "<think>"])
    files = [(p, repo.read([p])[p]) for p in ("inventory/pricing.py", "inventory/cart.py")]
    result = repair(
        generator, instance["problem_statement"], files, repo.read, samples=5, sampling=Sampling(temperature=1.0)
    )
    assert generator.calls[0][1] == 5 and generator.calls[0][2]["temperature"] == 1.0
    prompt = result.prompt[0]["content"]
    assert instance["problem_statement"] in prompt and "### inventory/cart.py" in prompt
    assert "<solution>" in prompt
    assert [c.status for c in result.candidates] == ["ok", "ok", "unparseable", "ok", "ok"]
    assert result.counts() == {"ok": 4, "unparseable": 1}
    # stock.py was not in the prompt, but it exists at the base commit: the edit applies
    assert result.candidates[1].files == ["inventory/pricing.py", "inventory/stock.py"]
    assert "diff --git a/inventory/stock.py" in result.candidates[1].patch
    with pytest.raises(ValueError, match="samples must be >= 1"):
        repair(generator, "x", files, repo.read, samples=0)
