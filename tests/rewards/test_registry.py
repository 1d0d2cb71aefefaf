"""The registry (DESIGN conventions 4 and 9): explicit, no duplicates, and every verifiable
domain scores its own gold answer 1.0 and a known wrong answer lower; group scorers get each
prompt's group whole; a scorer that raises gives no verdict; every domain's options are declared
once and checked (issue 39)."""

import inspect
from typing import Any

import pytest

from cascade_rl.rewards.base import Score
from cascade_rl.rewards.preference import SERVER_OPTIONS
from cascade_rl.rewards.registry import (
    REGISTRY,
    OptionError,
    RewardDomain,
    _build,
    accepted_options,
    check_options,
    check_required_options,
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


# ----------------------------------------------------------------------------- options (issue 39)
#: keyword parameters of per-response scorers that are not options: what a row may carry besides
#: its declared reference fields (a batch or group scorer takes the rows as its requests, so
#: every keyword parameter of it is an option), and what the registry or a library caller passes
ROW_FIELDS = {"prompt", "messages", "group", "problem_statement", "tools", "choices", "template_metadata"}
ROW_FIELDS |= {"schema_type", "response_mode", "tool_name", "tool_payload_key", "calls", "database"}
PASSED = {"pool", "workers"}


def keyword_parameters(function) -> tuple[dict, bool]:
    """A function's named parameters after the first (the response or the requests) with their
    defaults (``inspect.Parameter.empty`` for none), and whether it takes ``**kwargs``."""
    parameters = list(inspect.signature(function).parameters.values())[1:]
    forwards = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    return {p.name: p.default for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD}, forwards


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_declared_options_are_the_scorers_own(name):
    """The one declaration of a domain's options (RewardDomain.options) is pinned to its scorers'
    signatures: every option a signature takes is declared, every declared option is taken (or
    forwarded to the reward-model server client), and each default reads as its declared type."""
    domain = REGISTRY[name]
    taken, forwards = {}, False
    for function, rows in (
        (domain.load_scorer(), ROW_FIELDS),
        (domain.load_batch_scorer(), set()),
        (domain.load_group_scorer(), set()),
    ):
        if function is not None:
            parameters, forwarded = keyword_parameters(function)
            skipped = PASSED | rows | (set(domain.fields) if rows else set())
            taken.update({k: v for k, v in parameters.items() if k not in skipped})
            forwards |= forwarded
    declared = set(domain.options)
    assert set(taken) <= declared, f"{name}: options in the signature but not declared: {set(taken) - declared}"
    extra = declared - set(taken)
    assert extra <= (set(SERVER_OPTIONS) if forwards else set()), f"{name}: declared but not taken: {extra}"
    defaults = {k: v for k, v in taken.items() if v is not inspect.Parameter.empty}
    assert check_options(name, defaults) == defaults


def test_an_unknown_option_names_the_domain_and_what_it_accepts():
    with pytest.raises(OptionError, match=r"math\.languge_penalty: unknown option; math accepts: language_penalty, "):
        check_options("math", {"languge_penalty": -1})
    with pytest.raises(OptionError, match=r"math\.language_penalty: .*valid number.*'abc'"):
        check_options("math", {"language_penalty": "abc"})
    with pytest.raises(OptionError, match=r"code\.time_limit: .*greater than 0"):
        check_options("code", {"time_limit": 0})
    assert check_options("math", {"language_penalty": "-1"}) == {"language_penalty": -1.0}
    assert check_options("tool_call", {"strict_types": "false"}) == {"strict_types": False}
    with pytest.raises(OptionError, match=r"preference\.reward_model: missing"):
        check_required_options("preference", {})


def test_a_user_scorer_takes_the_options_of_its_signature():
    assert check_options("tiny_assets:contains_answer", {"anything": 1}) == {"anything": 1}  # it takes **_
    assert accepted_options(get_domain("cascade_rl.rewards.math:score"))["timeout"] is Any
    with pytest.raises(OptionError, match="unknown option"):
        check_options("cascade_rl.rewards.math:score", {"languge_penalty": 1})


def test_score_batch_refuses_an_undeclared_option_before_it_scores_anything(monkeypatch):
    """Issue 39: `code` with `time_limt` fell back to one-by-one scoring with the typo dropped,
    paying the sandbox twice. Now nothing is scored."""
    import cascade_rl.rewards.code as code

    monkeypatch.setattr(code, "shared_pool", lambda *_: pytest.fail("the sandbox was used"))
    monkeypatch.setattr(code, "score", lambda *_, **__: pytest.fail("scored one by one"))
    with pytest.raises(OptionError, match=r"code\.time_limt: unknown option"):
        score_batch("code", [{"response": "x", "tests": {"inputs": ["1"], "outputs": ["1"]}}], {"time_limt": 2})


def test_a_batch_scorer_that_raises_gives_no_verdict_without_a_second_pass(monkeypatch):
    import cascade_rl.rewards.code as code

    class DeadPool:
        def submit_job(self, *_):
            raise RuntimeError("sandbox pool died")

    calls = []
    monkeypatch.setattr(code, "shared_pool", lambda *_: DeadPool())
    monkeypatch.setattr(code, "score", lambda *args, **kwargs: calls.append(args) or Score(1.0))
    tests = {"inputs": [""], "outputs": ["1"]}
    requests = [{"response": f"```python\nprint({i})\n```", "tests": tests} for i in (1, 2)]
    scores = score_batch("code", requests, {"time_limit": 2})
    assert calls == []
    assert [s.masked for s in scores] == ["code batch scorer failed: RuntimeError: sandbox pool died"] * 2
    assert all(s.reward == 0.0 and "sandbox pool died" in s.details["error"] for s in scores)
