"""The registry (DESIGN conventions 4 and 9): explicit, no duplicates, and every verifiable
domain scores its own gold answer 1.0 and a known wrong answer lower."""

import pytest

from cascade_rl.rewards.base import Score
from cascade_rl.rewards.registry import REGISTRY, RewardDomain, _build, get_domain, score_batch

FILES = {"calc.py": "def add(a, b):\n    return a - b\n"}
GOLDEN = (
    "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n"
    " def add(a, b):\n-    return a - b\n+    return a + b\n"
)


def swe_answer(new_line):
    return (
        "<think>add subtracts</think>```diff\n### calc.py\n<<<<<<< SEARCH\n    return a - b\n=======\n"
        f"{new_line}\n>>>>>>> REPLACE\n```"
    )


CASES = {
    "math": ({"answer": "42"}, "<think>6*7=42</think>The answer is \\boxed{42}.", "<think>6*7=41</think>\\boxed{41}"),
    "ifeval": (
        {"instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{}]},
        "all lowercase here.",
        "Not Lowercase.",
    ),
    "code": (
        {"tests": {"inputs": ["2 3\n"], "outputs": ["5\n"]}},
        "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
        "```python\na, b = map(int, input().split())\nprint(a - b)\n```",
    ),
    "swe": ({"files": FILES, "golden_patch": GOLDEN}, swe_answer("    return a + b"), swe_answer("    return b - a")),
    "tool_call": (
        {"expected_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>',
    ),
    "multiple_choice": ({"answer": "C"}, "<think>Paris</think>Answer: C", "<think>Madrid</think>Answer: B"),
    "mcqa": (
        {"options": [{"A": "Madrid"}, {"B": "Rome"}, {"C": "Paris"}], "expected_answer": "C"},
        "<think>Paris</think>\\boxed{C}",
        "<think>Paris</think>Answer: C",
    ),
    "structured_output": (
        {"schema_str": '{"type": "object", "properties": {"city": {"type": "string"}}}', "schema_type": "json"},
        '{"city": "Paris"}',
        '{"city": "Paris", "country": "France"}',
    ),
    "workplace": (
        {"ground_truth": [{"name": "email_delete_email", "arguments": '{"email_id": "00000057"}'}]},
        '<tool_call>\n{"name": "email_delete_email", "arguments": {"email_id": "00000057"}}\n</tool_call>',
        '<tool_call>\n{"name": "email_delete_email", "arguments": {"email_id": "00000058"}}\n</tool_call>',
    ),
}
#: domains scored by a reward model: gold/wrong for them is chosen/rejected, tested with a
#: trained RM in tests/train/test_reward_model.py
MODEL_DOMAINS = {"preference", "if_rm"}


def test_every_registered_domain_is_covered_here():
    assert set(REGISTRY) - MODEL_DOMAINS == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gold_scores_one_and_wrong_scores_lower(name):
    reference, gold, wrong = CASES[name]
    scores = score_batch(name, [{**reference, "response": gold}, {**reference, "response": wrong}])
    assert scores[0].reward == 1.0, scores[0].details
    assert scores[1].reward < 1.0


def test_duplicates_are_rejected_and_unknown_names_listed():
    domain = RewardDomain("x", (), "", scorer="cascade_rl.rewards.math:score")
    with pytest.raises(ValueError, match="twice"):
        _build([domain, domain])
    with pytest.raises(KeyError, match="known: .*math"):
        get_domain("astrology")


def test_dotted_user_scorer_and_errors_become_zero():
    assert get_domain("tiny_assets:contains_answer").scorer == "tiny_assets:contains_answer"
    scores = score_batch("tiny_assets:contains_answer", [{"response": "it is 4", "answer": "4"}, {"response": "x"}])
    assert scores[0] == Score(1.0, scores[0].details)
    assert scores[1].reward == 0.0 and "TypeError" in scores[1].details["error"]  # missing 'answer'
