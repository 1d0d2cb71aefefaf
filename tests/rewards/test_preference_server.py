"""The RLHF and IF+RM rewards pointed at a reward-model server: a real `cascade serve
reward-model` process on loopback, with a misbehaving proxy in front of it where a test needs
errors, hangs or slowness. Remote scores equal local ones; a failed server gives no verdict
(Score.no_verdict: left out of training, not scored 0)."""

import json
import os
import subprocess
import sys
import time

import pytest
from reward_model_assets import ProxyServer, build_reward_model, free_port, serve_reward_model

from cascade_rl.llm.pooling import RewardModelClient
from cascade_rl.rewards.combine import combine
from cascade_rl.rewards.registry import PreflightError, preflight, score_batch

SERVER_MAX = 1024


@pytest.fixture(scope="module")
def rm_path(tmp_path_factory):
    return build_reward_model(tmp_path_factory.mktemp("rm"))


@pytest.fixture(scope="module")
def server(rm_path, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with serve_reward_model(rm_path, "--max-length", str(SERVER_MAX), "--served-model-name", "rm", log=log) as url:
        yield url


PROMPT = [{"role": "user", "content": "what is 3 plus 1?"}]
RESPONSES = [
    "<think>hello world hello world</think>The answer is 4.",
    "The answer is 4.",
    "hello world hello world hello world",
    "The answer is 4. Ответ четыре.",  # language mixing: batch minimum - 10
    "<think>The answer is",  # unfinished thinking: scored whole
]


def requests():
    return [{"messages": PROMPT, "prompt": PROMPT[0]["content"], "response": r} for r in RESPONSES]


def if_requests():
    follows = ["The answer is 4.", "the answer is 4.", "THE ANSWER IS 4.", "The Answer Is 4."]
    return [
        {
            "messages": PROMPT,
            "prompt": PROMPT[0]["content"],
            "response": r,
            "instruction_id_list": ["change_case:english_lowercase"],
            "kwargs": [{}],
            "group": "0:no_think",
        }
        for r in follows
    ]


def test_served_rewards_equal_local_rewards(server, rm_path):
    for domain, batch in (("preference", requests()), ("if_rm", if_requests())):
        local = score_batch(domain, batch, {"reward_model": str(rm_path)})
        remote = score_batch(domain, batch, {"reward_model": f"{server}#rm", "max_length": 512})
        assert [s.reward for s in remote] == pytest.approx([s.reward for s in local], abs=1e-5)
        remote_rm, local_rm = ([s.details["rm_score"] for s in scores] for scores in (remote, local))
        assert remote_rm == pytest.approx(local_rm, abs=1e-5)
        assert not any("error" in s.details or s.masked for s in remote)
    scores = score_batch("preference", requests(), {"reward_model": server})
    assert scores[3].details["language_mixing"] and scores[3].reward == pytest.approx(
        min(s.details["rm_score"] for s in scores) - 10
    )


def test_concurrency_limit_is_held(server, rm_path):
    with ProxyServer(server, delay=0.3) as proxy:
        client = RewardModelClient(f"{proxy.base_url}#rm", max_concurrency=3)
        conversations = [PROMPT + [{"role": "assistant", "content": f"The answer is {i}."}] for i in range(9)]
        results = client.score(conversations)
    assert all(r.error is None for r in results) and len(proxy.bodies) == 9
    assert proxy.max_in_flight == 3
    body = proxy.bodies[0]
    assert body["model"] == "rm" and body["use_activation"] is False and body["messages"][-1]["role"] == "assistant"


def test_server_errors_are_retried_with_backoff(server, rm_path):
    batch = requests()[:1]
    expected = score_batch("preference", batch, {"reward_model": server})[0].reward
    with ProxyServer(server, fail_first=2, fail_status=503) as proxy:
        options = {"reward_model": proxy.base_url, "backoff_base": 0.2, "max_retries": 3}
        (scored,) = score_batch("preference", batch, options)
    assert scored.reward == pytest.approx(expected, abs=1e-5) and scored.masked is None
    assert len(proxy.arrivals) == 3
    first_wait, second_wait = (b - a for a, b in zip(proxy.arrivals, proxy.arrivals[1:]))
    assert first_wait >= 0.2 and second_wait >= 0.4  # 0.2 * 2**attempt, exponential


def test_a_hanging_server_times_out_and_gives_no_verdict():
    with ProxyServer(None, hang=True) as proxy:
        options = {"reward_model": proxy.base_url, "timeout": 0.5, "max_retries": 1, "backoff_base": 0.05}
        options["max_concurrency"] = 2
        start = time.monotonic()
        scores = score_batch("preference", requests() * 4, options)
        elapsed = time.monotonic() - start
        seen = len(proxy.bodies)
    assert all(s.masked for s in scores) and "rm_score" not in scores[0].details
    assert any("timed out" in s.masked for s in scores) and scores[0].details["no_verdict"] == scores[0].masked
    # a language-mixed response without a score takes no part in the batch minimum either
    assert scores[3].details["language_mixing"] and scores[3].masked
    # fail fast: the first failure stops the batch from waiting out a timeout per request
    assert seen <= 2 * 2 and elapsed < 10
    assert "not sent" in scores[-1].masked


def test_an_if_rm_rollout_without_a_score_has_no_verdict_and_leaves_the_group(server, rm_path):
    with ProxyServer(server, fail_first=1, fail_status=500) as proxy:
        scores = score_batch("if_rm", if_requests(), {"reward_model": proxy.base_url, "max_retries": 0})
    failed = [s for s in scores if s.masked or "rm_error" in s.details]
    assert len(failed) == 1
    # whichever request failed: no verdict when its instructions hold, its 0 when they do not
    (failed,) = failed
    assert (failed.masked is not None) == (failed.details["if_reward"] == 1.0)
    assert "HTTP 500" in (failed.masked or failed.details["rm_error"])
    # the three scored rollouts are z-scored among themselves, the failed one left out
    kept = [s for s in scores if "rm_score" in s.details]
    expected = combine([s.details["if_reward"] for s in kept], [s.details["rm_score"] for s in kept], [0] * 3)
    assert [s.reward for s in kept] == pytest.approx(expected)


def test_an_if_rm_rollout_that_breaks_an_instruction_keeps_its_zero_without_the_reward_model():
    with ProxyServer(None, fail_first=100, fail_status=503) as proxy:
        batch = if_requests()[:2]
        options = {"reward_model": proxy.base_url, "max_retries": 0}
        breaks, follows = score_batch("if_rm", batch, options)
    assert follows.masked and "HTTP 503" in follows.masked  # R_IF = 1: the RM score decides, none came
    assert breaks.masked is None and breaks.reward == 0.0 and "HTTP 503" in breaks.details["rm_error"]


def test_preflight_passes_a_live_server_and_names_a_dead_one(server, rm_path):
    preflight("preference", {"reward_model": f"{server}#rm", "max_length": SERVER_MAX}, timeout=30)
    preflight("if_rm", {"reward_model": str(rm_path)}, timeout=1)
    dead = f"http://127.0.0.1:{free_port()}"
    start = time.monotonic()
    with pytest.raises(PreflightError) as error:
        preflight("if_rm", {"reward_model": dead}, timeout=2)
    message = str(error.value)
    assert time.monotonic() - start < 10 and "\n" not in message
    assert message.startswith("reward_options.if_rm.reward_model: ") and dead in message and "within 2 s" in message


@pytest.mark.parametrize(
    "options, message",
    [
        ({"max_length": 4 * SERVER_MAX}, "greater than max_model_len"),
        ({"reward_model": "{server}#other"}, "does not exist"),
        ({"max_length": 0}, "max_length must be a positive integer"),
        ({"reward_model": "/no/such/checkpoint"}, "neither a checkpoint directory nor an http(s):// URL"),
    ],
)
def test_preflight_names_a_misconfigured_option(server, options, message):
    options = {"reward_model": server, **options}
    options["reward_model"] = options["reward_model"].format(server=server)
    with pytest.raises(PreflightError, match=message.replace("(", r"\(").replace(")", r"\)")):
        preflight("preference", options, timeout=30)


def test_cascade_score_checks_the_server_before_scoring(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"domain": "preference", "prompt": "hi", "response": "hello"}) + "\n")
    dead = f"http://127.0.0.1:{free_port()}"
    result = subprocess.run(
        [sys.executable, "-m", "cascade_rl.cli", "score", str(source), "--wait", "1"]
        + ["--option", f"preference.reward_model={dead}#rm"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 2 and not (tmp_path / "in.scored.jsonl").exists()
    (line,) = result.stderr.strip().splitlines()
    assert "reward_options.preference.reward_model" in line and dead in line
