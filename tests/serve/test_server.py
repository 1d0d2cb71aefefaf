"""`cascade serve reward-model` as a real process on loopback: vLLM's Pooling API shapes, the
same scores as local scoring, truncation to the last tokens, errors, batching."""

import json
import math
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from reward_model_assets import build_reward_model, serve_reward_model

from cascade_rl.rewards.preference import RewardModel

SERVER_MAX = 2048


@pytest.fixture(scope="module")
def rm_path(tmp_path_factory):
    return build_reward_model(tmp_path_factory.mktemp("rm"))


@pytest.fixture(scope="module")
def local(rm_path):
    return RewardModel(rm_path, device="cpu")


@pytest.fixture(scope="module")
def server(rm_path, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with serve_reward_model(
        rm_path, "--max-length", str(SERVER_MAX), "--batch-size", "4", "--served-model-name", "tiny-rm", log=log
    ) as url:
        yield url


def post(url, body, path="/pooling"):
    request = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def get(url, path):
    with urllib.request.urlopen(url + path, timeout=30) as response:
        return json.loads(response.read())


def conversation(question, answer):
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


CONVERSATIONS = [conversation(f"what is {a} plus 1?", f"The answer is {a + 1}.") for a in range(3)] + [
    conversation("hello", "hello world, how are you today? fine thanks.")
]


def test_chat_requests_score_as_the_local_model(server, local):
    expected = local.score(CONVERSATIONS)
    for messages, value in zip(CONVERSATIONS, expected):
        status, body = post(server, {"model": "tiny-rm", "messages": messages, "use_activation": False})
        assert status == 200
        assert body["object"] == "list" and body["model"] == "tiny-rm" and body["id"].startswith("pool-")
        (item,) = body["data"]
        assert item["index"] == 0 and item["object"] == "pooling"
        assert item["data"] == [pytest.approx(value, abs=1e-5)]
        assert body["usage"]["prompt_tokens"] == len(local.encode(local.render(messages)))
    # vLLM's default for a one-label classifier: the sigmoid of the score; the model name may be left out
    status, body = post(server, {"messages": CONVERSATIONS[0]})
    assert body["data"][0]["data"] == [pytest.approx(1 / (1 + math.exp(-expected[0])))]


def test_completion_form_scores_each_string_with_special_tokens(server, local):
    texts = [local.render(c) for c in CONVERSATIONS]
    status, body = post(server, {"input": texts, "use_activation": False, "task": "classify"})
    assert status == 200 and [d["index"] for d in body["data"]] == [0, 1, 2, 3]
    expected = local.score_ids([local.encode(t, add_special_tokens=True) for t in texts])
    assert [d["data"][0] for d in body["data"]] == pytest.approx(expected, abs=1e-5)


def test_long_inputs_keep_their_last_tokens(server, local):
    long = conversation("tell me a story. " * 400, "once upon a time, the end.")
    ids = local.encode(local.render(long))
    assert len(ids) > SERVER_MAX
    status, body = post(server, {"messages": long, "use_activation": False, "truncate_prompt_tokens": 600})
    assert body["data"][0]["data"][0] == pytest.approx(local.score_ids([ids[-600:]])[0], abs=1e-5)
    assert body["usage"]["prompt_tokens"] == 600
    # unset (or -1): the server's --max-length, still from the end
    for extra in ({}, {"truncate_prompt_tokens": -1}):
        status, body = post(server, {"messages": long, "use_activation": False, **extra})
        assert body["data"][0]["data"][0] == pytest.approx(local.score_ids([ids[-SERVER_MAX:]])[0], abs=1e-5)
    assert local.score_ids([ids[-600:]]) != pytest.approx(local.score_ids([ids[:600]]), abs=1e-3)


@pytest.mark.parametrize(
    "body, status, message",
    [
        ({"model": "other", "messages": CONVERSATIONS[0]}, 404, "does not exist"),
        ({"messages": CONVERSATIONS[0], "truncate_prompt_tokens": SERVER_MAX + 1}, 400, "greater than max_model_len"),
        ({"messages": CONVERSATIONS[0], "task": "embed"}, 400, "not supported"),
        ({"messages": []}, 400, "non-empty list"),
        ({"input": ""}, 400, "give 'messages'"),
        ({"messages": [{"content": "no role"}]}, 400, "messages[0]"),
    ],
)
def test_bad_requests_get_vllm_style_errors(server, body, status, message):
    got, answer = post(server, body)
    assert got == status and answer["error"]["code"] == status and message in answer["error"]["message"]


def test_health_and_models(server):
    assert get(server, "/health")["status"] == "ok"
    (card,) = get(server, "/v1/models")["data"]
    assert card["id"] == "tiny-rm" and card["max_model_len"] == SERVER_MAX


def test_concurrent_requests_share_forward_passes(server, local):
    long = [conversation("tell me a story. " * 60 + str(i), "the end.") for i in range(12)]
    before = get(server, "/health")
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda m: post(server, {"messages": m, "use_activation": False}), long))
    after = get(server, "/health")
    assert [a[1]["data"][0]["data"][0] for a in answers] == pytest.approx(local.score(long), abs=1e-5)
    inputs, passes = after["inputs"] - before["inputs"], after["forward_passes"] - before["forward_passes"]
    assert inputs == 12 and passes < 12  # requests that arrived while the model ran were scored together
