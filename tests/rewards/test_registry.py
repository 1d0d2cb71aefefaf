"""The registry (DESIGN conventions 4 and 9): explicit, no duplicates, and every verifiable
domain scores its own gold answer 1.0 and a known wrong answer lower; group scorers get each
prompt's group whole; a scorer that raises gives no verdict."""

import pytest

from cascade_rl.rewards.base import Score
from cascade_rl.rewards.registry import (
    REGISTRY,
    RewardDomain,
    _build,
    get_domain,
    score_batch,
    score_groups,
    score_samples,
)

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
#: trained RM in tests/train/test_reward_model.py, and with a pairwise judge in tests/rewards/test_genrm.py
MODEL_DOMAINS = {"preference", "if_rm", "genrm"}


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


def test_dotted_user_scorer_and_a_scorer_that_raises_gives_no_verdict():
    assert get_domain("tiny_assets:contains_answer").scorer == "tiny_assets:contains_answer"
    scores = score_batch("tiny_assets:contains_answer", [{"response": "it is 4", "answer": "4"}, {"response": "x"}])
    assert scores[0] == Score(1.0, scores[0].details) and scores[0].masked is None
    # a missing 'answer' is not the response's fault: no verdict, the exception kept
    assert scores[1].masked.startswith("scorer raised TypeError") and "TypeError" in scores[1].details["error"]
    assert scores[1].details["no_verdict"] == scores[1].masked


def rank_in_group(requests, *, bonus=0.0):
    """A group scorer: each response's rank by length within its group, plus ``bonus``."""
    if any(r["response"] == "boom" for r in requests):
        raise RuntimeError("judge exploded")
    if any(r["response"] == "short" for r in requests):
        return [Score(1.0)]
    order = sorted(range(len(requests)), key=lambda i: len(requests[i]["response"]))
    return [Score(order.index(i) + bonus, {"size": len(requests)}) for i in range(len(requests))]


GROUPED = RewardDomain("grouped", (), "rank by length in the group", group_scorer="test_registry:rank_in_group")


def test_a_group_scorer_sees_each_group_whole_and_answers_in_request_order():
    requests = [
        {"response": "ccc", "group": "a"},
        {"response": "x", "group": "b"},
        {"response": "a", "group": "a"},
        {"response": "bb", "group": "a"},
        {"response": "yy", "group": "b"},
    ]
    for workers in (1, 3):
        scores = score_batch(GROUPED, requests, {"bonus": 10.0}, workers=workers)
        assert [s.reward for s in scores] == [12.0, 10.0, 10.0, 11.0, 11.0]
        assert [s.details["size"] for s in scores] == [3, 2, 3, 3, 2]
    # without a group key, the prompt is the group
    by_prompt = [{"response": r, "prompt": p} for r, p in (("aa", "p"), ("b", "q"), ("a", "p"))]
    assert [s.reward for s in score_batch(GROUPED, by_prompt)] == [1.0, 0.0, 0.0]


def test_a_group_scorer_that_raises_or_miscounts_gives_its_group_no_verdict():
    groups = [[{"response": "ok"}, {"response": "boom"}], [{"response": "a"}, {"response": "bb"}]]
    groups.append([{"response": "short"}, {"response": "x"}])
    scored = score_groups(GROUPED, groups)
    assert [s.masked is not None for s in scored[0]] == [True, True]
    assert "RuntimeError: judge exploded" in scored[0][0].masked
    assert [s.reward for s in scored[1]] == [0.0, 1.0] and all(s.masked is None for s in scored[1])
    assert all("gave 1 scores for 2 responses" in s.masked for s in scored[2])


def test_groups_of_a_per_response_domain_and_evaluation_samples_keep_their_shape():
    reference, gold, wrong = CASES["multiple_choice"]
    scored = score_groups(
        "multiple_choice", [[{**reference, "response": gold}], [{**reference, "response": wrong}] * 2]
    )
    assert [[s.reward for s in group] for group in scored] == [[1.0], [0.0, 0.0]]
    rows = [{"prompt": [{"role": "user", "content": "q"}], "domain": "tiny_assets:contains_answer", "reference": {}}]
    (samples,) = score_samples(rows, [["a", "b"]], {})
    assert all(s.masked for s in samples)  # no 'answer' in the reference: no verdict, not a wrong answer
