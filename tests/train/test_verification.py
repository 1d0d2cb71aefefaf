"""One step's verification (train/verification.py; issue 39 item 1, issue 45 items 1-2): each
rollout is scored as it finishes, on a bounded pool, while the others are still generated, with
the rewards of the synchronous path; a group scorer's group when its last rollout finishes; a
scorer's "no verdict" kept as a masked rollout, never a 0."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest
import tiny_assets
from transformers import AutoTokenizer

from cascade_rl.train.verification import RolloutScorer, _union

ADD_ONE = {"inputs": ["1\n", "5\n"], "outputs": ["2\n", "6\n"]}


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


@pytest.fixture(scope="module")
def tokenizer(tiny_checkpoint):
    return AutoTokenizer.from_pretrained(tiny_checkpoint)


def encode(tokenizer, texts):
    return [tokenizer.encode(t, add_special_tokens=False) + [tokenizer.eos_token_id] for t in texts]


def columns(references, domain=None):
    count = len(references)
    out = {"_ref": [json.dumps(r) for r in references], "_pidx": list(range(count)), "_mode": ["think"] * count}
    if domain is not None:
        out["_domain"] = [domain] * count
    return out


def generate(verification, ids, gap: float) -> float:
    """What an engine does: hand each rollout over as it finishes, ``gap`` seconds apart; returns
    when the last one finished."""
    for index, tokens in enumerate(ids):
        time.sleep(gap)
        verification.finished(index, tokens)
    return time.perf_counter()


PROGRAMS = [
    fenced("import time\ntime.sleep(0.4)\nprint(int(input()) + 1)"),  # right, slow (0.4 s a test)
    fenced("import time\ntime.sleep(0.4)\nprint(int(input()))"),  # wrong, slow
    fenced("print(int(input()) + 1)"),  # right
    fenced("print(int(input()) + 2)"),  # wrong answer
    "no program at all",
    fenced("print(int(input()) + 1)"),
]


def test_code_rollouts_are_verified_as_they_finish_with_the_synchronous_rewards(tokenizer):
    """The sandbox runs each program while later rollouts are still being generated; the step's
    verdicts are those of scoring the batch after generation."""
    prompts = ["add one"] * len(PROGRAMS)
    ids = encode(tokenizer, PROGRAMS)
    refs = columns([{"tests": ADD_ONE}] * len(PROGRAMS), domain="code")
    sync = RolloutScorer(tokenizer, workers=2).verify(prompts, refs)
    generate(sync, ids, 0.3)
    synchronous = sync.collect(ids)
    eager = RolloutScorer(tokenizer, workers=2, asynchronous=True).verify(prompts, refs)
    generated_at = generate(eager, ids, 0.3)
    asynchronous = eager.collect(ids)
    rewards = [r.reward for r in asynchronous]
    assert rewards == [r.reward for r in synchronous] == [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    first_verdict_started = min(start for start, _ in eager.intervals)
    assert first_verdict_started < generated_at - 0.5  # verified while the later rollouts were generated
    timing, before = eager.timing(), sync.timing()
    assert timing["time/verification_hidden"] > 0.6 and timing["verify/hidden_share"] > 0.7
    assert before["time/verification_hidden"] == 0.0 and before["time/verification"] > 0.4  # all of it after
    calls = [r.call for r in asynchronous if r.call]
    assert len(calls) == len(PROGRAMS) and all(c["calls"] == 1 for c in calls)  # one call per rollout
    assert [r.call["calls"] for r in synchronous if r.call] == [1.0]  # the synchronous path: one batch


def test_the_pool_runs_at_most_the_reward_workers_at_once(tokenizer):
    domain = "tiny_assets:slow_parity"
    scorer = RolloutScorer(tokenizer, workers=2, asynchronous=True, options={domain: {"delay": 0.2}})
    texts = [f"answer {i}" for i in range(6)]
    tiny_assets.SCORING.update(active=0, most=0, calls=0)
    verification = scorer.verify(texts, columns([{}] * 6, domain=domain))
    generate(verification, encode(tokenizer, texts), 0.0)
    rollouts = verification.collect(encode(tokenizer, texts))
    assert tiny_assets.SCORING["most"] == 2 and tiny_assets.SCORING["calls"] == 6
    assert [r.reward for r in rollouts] == [float(ord("a") % 2)] * 6


def test_rollouts_no_engine_reported_are_scored_when_the_step_collects(tokenizer):
    """An engine without per-request completion (TRL's server mode) reports nothing: the step
    scores everything when it collects; tokens reported and returned must agree."""
    domain = "tiny_assets:first_char_parity"
    texts = ["abc", "bcd", "cde"]
    ids = encode(tokenizer, texts)
    scorer = RolloutScorer(tokenizer, asynchronous=True)
    verification = scorer.verify(texts, columns([{}] * 3, domain=domain))
    verification.finished(1, ids[1])
    assert [r.reward for r in verification.collect(ids)] == [1.0, 0.0, 1.0]
    other = scorer.verify(texts, columns([{}] * 3, domain=domain))
    other.finished(0, ids[1])
    with pytest.raises(RuntimeError, match="rollout 0: the generation engine reported other tokens"):
        other.collect(ids)


def test_a_verifier_that_fails_leaves_its_rollouts_without_a_verdict(tokenizer):
    domain = "tiny_assets:fails_on"
    texts = ["a fine answer", "a FAIL answer", "b fine answer"]
    for asynchronous in (False, True):
        scorer = RolloutScorer(tokenizer, asynchronous=asynchronous)
        rollouts = scorer(texts, encode(tokenizer, texts), **columns([{}] * 3, domain=domain))
        assert [r.reward for r in rollouts] == [1.0, None, 0.0]
        assert rollouts[1].masked.startswith("scorer raised ConnectionError: verifier at 127.0.0.1:9 refused")
        assert rollouts[0].masked is None and rollouts[1].error


def judge_requests(judge_url: str) -> int:
    with urllib.request.urlopen(judge_url.removesuffix("/v1") + "/stats", timeout=5) as answer:
        return json.loads(answer.read())["requests"]


def test_a_group_is_judged_once_when_its_last_rollout_finishes(tokenizer, judge_url):
    """The pairwise judge gets a prompt's whole group at once: circular pairs over 3 responses are
    3 judge calls per group, sent when the group's last rollout ends, not before."""
    texts = ["x quality=5", "y quality=2", "z quality=1", "x quality=1", "y quality=4", "z quality=4"]
    ids = encode(tokenizer, texts)
    options = {"genrm": {"judge": f"{judge_url}#judge"}}
    verification = RolloutScorer(tokenizer, options=options, asynchronous=True).verify(
        ["Say something."] * 6, columns([{}] * 6, domain="genrm"), groups=[0, 0, 0, 1, 1, 1], group_size=3
    )
    before = judge_requests(judge_url)
    for index in (0, 3, 1, 4):
        verification.finished(index, ids[index])
    time.sleep(0.3)
    assert judge_requests(judge_url) == before  # no group has ended
    verification.finished(2, ids[2])  # group 0's last
    deadline = time.monotonic() + 10
    while judge_requests(judge_url) < before + 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert judge_requests(judge_url) == before + 3
    verification.finished(5, ids[5])
    rollouts = verification.collect(ids)
    assert judge_requests(judge_url) == before + 6
    # (0,1): 5 vs 2; (1,2): 2 vs 1; (2,0): 1 vs 5. Group 1: (3,4): 1 vs 4; (4,5) tie at 4, ranking 3: +0.5 / -0.5
    assert [r.reward for r in rollouts] == [5.0, 2.0, 1.0, 1.0, pytest.approx(4.25), pytest.approx(3.75)]
    heads = [r.call for r in rollouts if r.call]
    assert [h["judge_calls"] for h in heads] == [3.0, 3.0] and all(h["judge_seconds"] > 0 for h in heads)


def test_the_union_of_busy_intervals():
    assert _union([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0), (4.0, 3.0)]) == 4.0
    assert _union([]) == 0.0


def test_verification_threads_do_not_outlive_the_step(tokenizer):
    domain = "tiny_assets:slow_parity"
    before = {t.name for t in threading.enumerate()}
    scorer = RolloutScorer(tokenizer, workers=3, asynchronous=True, options={domain: {"delay": 0.01}})
    verification = scorer.verify(["a"] * 4, columns([{}] * 4, domain=domain))
    ids = encode(tokenizer, ["a"] * 4)
    generate(verification, ids, 0.0)
    verification.collect(ids)
    assert not {t.name for t in threading.enumerate() if t.name.startswith("cascade-verify")} - before


def test_an_episodes_verdict_is_its_rollouts_and_an_episode_without_one_is_masked(tokenizer):
    """A multi-turn episode was judged by its environment when it ended (``_episode``): the step
    keeps that verdict, never scores the transcript again, counts the model's tokens only, and
    masks an episode whose environment reached no verdict; single-turn rows beside them are
    verified as usual."""
    texts = ["abc", "a transcript the workplace scorer cannot read", "another one"]
    ids = encode(tokenizer, texts)
    cols = columns([{}] * 3)
    cols["_domain"] = ["tiny_assets:first_char_parity", "workplace", "workplace"]
    episodes = [
        None,
        {"reward": 1.0, "details": {"turns": 2, "failed_calls": 0}, "masked": None, "model_tokens": 3},
        {"reward": 0.0, "details": {}, "masked": "OSError: database gone", "model_tokens": 2},
    ]
    for asynchronous in (False, True):
        verification = RolloutScorer(tokenizer, asynchronous=asynchronous).verify(texts, cols)
        rollouts = verification.collect(ids, episodes=episodes)
        assert [r.reward for r in rollouts] == [1.0, 1.0, None]
        assert rollouts[1].numbers == {"turns": 2.0, "failed_calls": 0.0} and rollouts[1].length == 3
        assert rollouts[2].masked == "OSError: database gone" and rollouts[0].length == len(ids[0])
