"""The pairwise GenRM reward (Cascade 2's RLHF; NeMo Gym's genrm_compare): pairs, the judge's reply
format, the tie-breaking mean, the length terms, and the judge served by real HTTP servers -- a
scripted judge process (genrm_judge.py, rules known in advance) and ``transformers serve`` with a
tiny model that always answers the same JSON. A judge that fails gives no verdict."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from cascade_rl.rewards.genrm import (
    DEFAULT_TEMPLATE,
    Comparison,
    aggregate,
    comparison_pairs,
    judge_messages,
    length_adjustments,
    parse_judgement,
)
from cascade_rl.rewards.registry import score_batch, score_groups

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "llm"))
from llm_helpers import SURE, build_chain_model, free_port, wait_for_http  # noqa: E402

PROMPT = [{"role": "user", "content": "What is 2 + 2?"}]


# ----------------------------------------------------------------------------- pairs and replies
def test_pairs_are_circular_or_all_pairs_with_both_orders_and_repeats_on_request():
    assert comparison_pairs("circular", 4) == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert comparison_pairs("all_pairs", 3) == [(0, 1), (0, 2), (1, 2)]
    assert comparison_pairs("all_pairs", 3, both_orders=True) == [(0, 1), (0, 2), (1, 2), (1, 0), (2, 0), (2, 1)]
    assert comparison_pairs("circular", 2, judges_per_pair=2) == [(0, 1), (1, 0)] * 2
    assert comparison_pairs("circular", 1) == []
    with pytest.raises(ValueError, match="strategy must be one of circular, all_pairs"):
        comparison_pairs("round_robin", 4)


@pytest.mark.parametrize(
    "reply, expected",
    [
        ('I prefer the first.\n{"score_1": 4, "score_2": 2, "ranking": 2}', (4.0, 2.0, 2.0)),
        # fenced json blocks first (the first usable object there), then the last top-level object
        ('```json\n{"score_1": 5, "score_2": 1, "ranking": 1}\n``` then {"ranking": 6}', (5.0, 1.0, 1.0)),
        (
            '{"score_1": 1, "score_2": 1, "ranking": 6} changed my mind {"score_1": 2, "score_2": 5, "ranking": 5}',
            (2.0, 5.0, 5.0),
        ),
        ('{"overall": {"score_1": 3, "score_2": 4, "ranking": 4}, "rubric": []}', (3.0, 4.0, 4.0)),
        ('{"score_1": "4"}', (4.0, None, None)),  # a missing key takes the caller's default
        ('{"note": "a } inside a string", "score_1": 2, "score_2": 2, "ranking": 4}', (2.0, 2.0, 4.0)),
        ('{"unrelated": 1} and {"score_1": 5, "score_2": 4, "ranking": 1', None),  # the only candidate never closes
        ('{"score_1": null, "score_2": 3}', None),
        ('{"score_1": NaN, "score_2": 3, "ranking": 3}', None),
        ('{"outer": {"score_1": 5, "score_2": 1, "ranking": 1}, oops}', None),  # invalid span: not looked into
        ("Both are fine.", None),
    ],
)
def test_the_judges_reply_is_read_as_nemo_gym_reads_it(reply, expected):
    assert parse_judgement(reply) == expected


def test_ties_are_broken_by_the_ranking_and_each_reward_is_the_mean_of_its_comparisons():
    comparisons = [
        Comparison(0, 1, 4.0, 2.0, 2.0),
        Comparison(1, 2, 3.0, 3.0, 2.0),  # tie, ranking 2 favours the first: 3 + 1.5, 3 - 1.5
        Comparison(2, 0, 3.0, 3.0, 5.0),  # tie, ranking 5 favours the second: 3 - 1.5, 3 + 1.5
    ]
    assert aggregate(comparisons, 3) == [pytest.approx(4.25), pytest.approx(3.25), pytest.approx(1.5)]
    failed = [Comparison(0, 1, 5.0, 1.0, 1.0), Comparison(1, 2, failure="judge failed: timed out")]
    assert aggregate(failed, 3) == [5.0, 1.0, None]  # no judged comparison: no reward
    assert aggregate([], 1, default_score=3.0) == [3.0]


def test_length_terms_reward_the_shortest_top_response_and_centre_the_group_penalty():
    scores = [4.0, 4.0, 2.0, 1.0]
    # the shortest answer (index 2) is not in the top 20 %: no bonus; the shortest reasoning (index 1) is
    bonus = length_adjustments(scores, [9, 3, 0, 5], [6, 8, 2, 9], reasoning_bonus=0.5, answer_bonus=0.3)
    assert bonus == [0.0, 0.5, 0.0, 0.0]
    penalty = length_adjustments(scores, [0, 0, 0, 0], [10, 20, 30, 10], answer_length_penalty=0.4)
    weights = [1.0, 0.5, 0.0, 1.0]  # 1 - (length - shortest) / span, then centred on their mean 0.625
    assert penalty == pytest.approx([0.4 * (w - 0.625) for w in weights]) and sum(penalty) == pytest.approx(0.0)
    assert length_adjustments([3.0], [5], [5], answer_bonus=1.0) == [0.0]


def test_the_judge_sees_the_prompt_and_the_answers_in_the_chosen_format():
    roles = judge_messages(PROMPT, "four", "4", prompt="roles", principle="Be concise.")
    assert [m["role"] for m in roles] == ["user", "principle", "response_1", "response_2"]
    assert roles[-1]["content"] == "4"
    (text,) = judge_messages(PROMPT, "four", "{x}", prompt=DEFAULT_TEMPLATE, principle=None)
    assert "[user]\nWhat is 2 + 2?" in text["content"] and "<response_2>\n{x}\n</response_2>" in text["content"]
    assert '{"score_1": <1-5>, "score_2": <1-5>, "ranking": <1-6>}' in text["content"]  # other braces stay
    (custom,) = judge_messages(
        PROMPT, "a", "b", prompt="Q: {conversation} | {response_1} vs {response_2}{principle}", principle="Prefer b."
    )
    assert custom["content"].startswith("Q: [user]\nWhat is 2 + 2? | a vs b\n") and "Prefer b." in custom["content"]
    flagged = [{"role": "user", "content": "What is 2 + 2? /think", "mode": "think"}]
    assert judge_messages(flagged, "a", "b", prompt="{conversation}", principle=None)[0]["content"] == (
        "[user]\nWhat is 2 + 2?"
    )  # the policy's thinking switch is not part of the request the judge reads


# ----------------------------------------------------------------------------- a scripted judge server
# judge_url: tests/conftest.py (the scripted judge, genrm_judge.py, in its own process)
def stats(judge_url: str, path: str = "/stats") -> dict:
    with urllib.request.urlopen(judge_url.removesuffix("/v1") + path, timeout=5) as answer:
        return json.loads(answer.read())


def group(*responses, **fields):
    return [{"messages": PROMPT, "prompt": PROMPT[0]["content"], "response": r, **fields} for r in responses]


def rewards(scores):
    return [None if s.masked else s.reward for s in scores]


def test_circular_and_all_pairs_rewards_from_a_served_judge(judge_url):
    responses = group("<think>add</think>4 quality=5", "four quality=2", "<think>hm</think>5 quality=1")
    circular = score_batch("genrm", responses, {"judge": f"{judge_url}#judge"})
    # (0,1): 5 vs 2; (1,2): 2 vs 1; (2,0): 1 vs 5
    assert rewards(circular) == [5.0, 2.0, 1.0]
    assert circular[0].details["judge_calls"] == 3 and circular[0].details["comparisons"] == 2
    assert circular[0].details["judge_seconds"] > 0 and circular[0].details["unparsed"] == 0
    everyone = score_batch("genrm", responses * 2, {"judge": f"{judge_url}#judge", "strategy": "all_pairs"})
    assert everyone[0].details["judge_calls"] == 15  # one group of six (same prompt): C(6, 2) comparisons


def test_both_orders_cancel_the_judges_position_bias(judge_url):
    # equal scores: this judge's ranking favours whichever response it sees first
    responses = group("four", "4")
    one_order = score_batch("genrm", responses, {"judge": f"{judge_url}#judge", "strategy": "all_pairs"})
    assert rewards(one_order) == [3.5, 2.5]
    both = score_batch(
        "genrm", responses, {"judge": f"{judge_url}#judge", "strategy": "all_pairs", "both_orders": True}
    )
    assert rewards(both) == [3.0, 3.0] and both[0].details["tiebreak_rate"] == 1.0


def test_nvidia_roles_format_and_the_thinking_of_the_reply_is_ignored(judge_url):
    # the reply's thinking holds a decoy object; the answer's object decides, in either format
    for prompt in ("roles", DEFAULT_TEMPLATE):
        scores = score_batch(
            "genrm", group("a quality=4", "b quality=3 FENCED"), {"judge": f"{judge_url}#judge", "prompt": prompt}
        )
        assert rewards(scores) == [4.0, 3.0], prompt


def test_an_unusable_reply_is_asked_again_then_counts_as_neutral(judge_url):
    options = {"judge": f"{judge_url}#judge", "parse_retries": 2, "parse_retry_sleep": 0.01}
    scores = score_batch("genrm", group("quality=5 GARBAGE", "quality=1"), options)
    assert rewards(scores) == [3.0, 3.0]  # default 3.0 each, tie at ranking 3.5: no adjustment
    assert scores[0].details["unparsed"] == 2 and scores[0].details["judge_calls"] == 6  # 2 pairs x 3 asks
    assert scores[0].masked is None  # a reply was received: a neutral verdict, as NeMo Gym's


def test_a_failing_judge_gives_no_verdict_and_other_comparisons_still_count(judge_url):
    judge = {"base_url": judge_url, "model": "judge", "max_retries": 0}
    # circular over 4: response 1 makes its two comparisons fail; 0 and 2 keep one judged comparison each
    scores = score_batch("genrm", group("quality=4", "quality=2 FAIL", "quality=3", "quality=1"), {"judge": judge})
    assert rewards(scores) == [4.0, None, 3.0, 1.0]
    assert "judge failed" in scores[1].masked and "HTTP 500" in scores[1].masked
    assert scores[0].details["judge_failures"] == 2 and scores[0].details["comparisons"] == 1


def test_a_hanging_judge_times_out_fails_fast_and_masks_the_groups(judge_url):
    judge = {"base_url": judge_url, "model": "judge", "timeout": 0.5, "max_retries": 0, "max_concurrency": 2}
    groups = [group(f"HANG {i}", f"HANG {i}b", group=str(i)) for i in range(4)]
    start = time.monotonic()
    scored = score_groups("genrm", groups, {"judge": judge, "cooldown": 30.0}, workers=2)
    elapsed = time.monotonic() - start
    masked = [s.masked for g in scored for s in g]
    assert all(masked) and any("timed out" in reason for reason in masked)
    # after the first timeouts the guard fails the other comparisons at once, without sending them
    assert elapsed < 5 and sum("not sent" in reason for reason in masked) >= 4


def test_the_concurrency_limit_holds_across_groups(judge_url):
    judge = {"base_url": judge_url, "model": "judge", "max_concurrency": 3}
    groups = [group(f"SLOW quality={1 + i % 5}", f"SLOW {i}", f"SLOW x{i}", group=str(i)) for i in range(4)]
    stats(judge_url, "/reset")
    start = time.monotonic()
    scored = score_groups("genrm", groups, {"judge": judge}, workers=4)
    elapsed = time.monotonic() - start
    assert all(s.masked is None for g in scored for s in g)
    assert stats(judge_url)["max_in_flight"] == 3  # 12 comparisons of 0.3 s, three at a time
    assert elapsed >= 4 * 0.3


def test_a_principle_reaches_the_judge_from_the_row_or_the_options(judge_url):
    # a tie; this judge favours the first response unless told "tiebreak=second"
    options = {"judge": f"{judge_url}#judge", "strategy": "all_pairs"}
    assert rewards(score_batch("genrm", group("a", "b"), options)) == [3.5, 2.5]
    rows = group("a", "b", principle="tiebreak=second")
    assert rewards(score_batch("genrm", rows, {**options, "prompt": "roles"})) == [2.5, 3.5]
    assert rewards(score_batch("genrm", group("a", "b"), {**options, "principle": "tiebreak=second"})) == [2.5, 3.5]


def test_a_group_of_one_gets_the_default_score_without_a_judge_call():
    (score,) = score_batch("genrm", group("alone"), {"judge": "http://127.0.0.1:9/v1#never-asked"})
    assert score.reward == 3.0 and score.details["judge_calls"] == 0 and score.masked is None


# ----------------------------------------------------------------------------- transformers serve
JSON_PARTS = ('{"score_1": 4', ', "score_2": 2', ', "ranking": 2}')
#: a tiny model that answers every prompt with {"score_1": 4, "score_2": 2, "ranking": 2}
JSON_JUDGE = {"\n": {JSON_PARTS[0]: SURE}, JSON_PARTS[0]: {JSON_PARTS[1]: SURE}, JSON_PARTS[1]: {JSON_PARTS[2]: SURE}}


@pytest.fixture(scope="module")
def transformers_judge(tmp_path_factory):
    import os

    model = build_chain_model(tmp_path_factory.mktemp("json-judge"), JSON_JUDGE, JSON_PARTS)
    port = free_port()
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        OMP_NUM_THREADS="1",
        HF_HUB_CACHE=str(tmp_path_factory.mktemp("hub-cache")),
    )
    cli = Path(sys.executable).with_name("transformers")
    command = [
        str(cli),
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        "cpu",
        "--log-level",
        "warning",
    ]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/health", process)
        yield f"http://127.0.0.1:{port}/v1#{model}"
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=15)
        process.kill()


def test_a_transformers_serve_judge_and_the_position_effect_it_shows(transformers_judge):
    # every reply: the first response 4, the second 2 -- all pairs over three responses
    options = {"judge": transformers_judge, "strategy": "all_pairs", "max_tokens": 8}
    assert rewards(score_batch("genrm", group("x", "y", "z"), options)) == [4.0, 3.0, 2.0]
    assert rewards(score_batch("genrm", group("x", "y", "z"), {**options, "both_orders": True})) == [3.0, 3.0, 3.0]


def test_preflight_passes_a_live_judge_and_names_a_dead_one(judge_url):
    from cascade_rl.rewards.registry import PreflightError, preflight

    preflight("genrm", {"judge": f"{judge_url}#judge"}, timeout=10)
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(PreflightError) as error:
        preflight("genrm", {"judge": {"base_url": dead, "model": "judge"}}, timeout=1)
    message = str(error.value)
    assert message.startswith("reward_options.genrm.judge: no judge server answers at") and dead in message
