"""OpenAICompatGenerator against a real ``transformers serve`` on loopback (the tiny chat model
of llm_helpers.py), through a real proxy that fails, hangs, delays and counts requests."""

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from llm_helpers import CHAT_RESPONSE, ProxyServer, free_port

from cascade_rl.chat import parse_tool_calls, split_thinking
from cascade_rl.llm import (
    GenerationError,
    LocalGenerator,
    OpenAICompatGenerator,
    agenerate_many,
    generate_many,
    join_reasoning,
)
from cascade_rl.llm.base import Sampling
from cascade_rl.llm.openai_compat import choice_text

HELLO = [{"role": "user", "content": "hello"}]
FAST = {"backoff_base": 0.05, "timeout": 30.0}


@pytest.fixture(scope="module")
def server(transformers_server, chat_model_path):
    """Base URL of the real server, warmed up (the first request loads the model)."""
    OpenAICompatGenerator(transformers_server, str(chat_model_path)).generate(HELLO, Sampling(max_tokens=1))
    return transformers_server


def client(base_url, model_path, **options):
    """A client of transformers serve, which refuses skip_special_tokens (the first test shows the fallback)."""
    return OpenAICompatGenerator(base_url, str(model_path), **{**FAST, "keep_special_tokens": False, **options})


def test_server_text_equals_local_text_with_thinking_rejoined(server, chat_model_path):
    local = LocalGenerator(chat_model_path)
    with ProxyServer(server) as proxy:
        generator = client(proxy.base_url, chat_model_path, keep_special_tokens=True)
        texts = generator.generate(
            [{"role": "user", "content": "hello", "mode": "no_think"}], Sampling(n=3, temperature=1.0)
        )
        assert texts == local.generate(HELLO, Sampling(n=3, temperature=1.0)) == [CHAT_RESPONSE] * 3
        # the server answers in two fields; the backend rejoined them
        assert (
            generator.generate(HELLO, Sampling(max_tokens=2))
            == local.generate(HELLO, Sampling(max_tokens=2))
            == ["<think>r"]
        )
        first, retried = proxy.bodies[0], proxy.bodies[1]
        assert first["n"] == 3 and first["messages"] == [{"role": "user", "content": "hello /no_think"}]
        # transformers serve refuses vLLM's skip_special_tokens: asked again without it, and never again
        assert first["skip_special_tokens"] is False
        assert retried == {key: value for key, value in first.items() if key != "skip_special_tokens"}
        assert generator.keeps_special_tokens is False
        # transformers serve ignores n: one choice came back, the other two were asked separately
        assert len(proxy.bodies) == 5 and all("n" not in body for body in proxy.bodies[2:])
        assert all("skip_special_tokens" not in body for body in proxy.bodies[1:])
        assert generator.server_honours_n is False
        assert generator.generate(HELLO, Sampling(n=2)) == [CHAT_RESPONSE] * 2
        assert len(proxy.bodies) == 7 and all("n" not in body for body in proxy.bodies[5:])


def test_top_k_goes_into_the_request_body_only_when_set(server, chat_model_path):
    """vLLM and SGLang read top_k from the body. A server without it (transformers serve, OpenAI's
    own API) refuses the request, and the error names the field: a top-k dropped quietly would
    sample from another distribution than the one asked for."""
    with ProxyServer(server) as proxy:
        generator = client(proxy.base_url, chat_model_path)
        with pytest.raises(GenerationError, match="top_k"):
            generator.generate(HELLO, Sampling(temperature=1.0, top_k=20))
        assert proxy.bodies[0]["top_k"] == 20 and len(proxy.bodies) == 1  # a client error: not retried
        assert generator.generate(HELLO, Sampling(temperature=1.0)) == [CHAT_RESPONSE]
        assert "top_k" not in proxy.bodies[1]
    with pytest.raises(ValueError, match="top_k"):
        generator.generate(HELLO, Sampling(top_k=1.5))  # type: ignore[arg-type]


def test_join_reasoning_at_its_boundary():
    assert join_reasoning("r", "ok") == "<think>r</think>ok"
    assert join_reasoning(None, "plain") == "plain"
    assert join_reasoning("", "plain") == "plain"
    assert join_reasoning("r", "<think>r</think>ok") == "<think>r</think>ok"  # already joined
    assert join_reasoning("still thinking", None, finished=False) == "<think>still thinking"
    assert join_reasoning("r", "cut answ", finished=False) == "<think>r</think>cut answ"
    assert join_reasoning("r", None) == "<think>r</think>"
    # vLLM >= 0.10 names the field `reasoning`
    vllm = {"message": {"content": "\n\n42", "reasoning": "\nadd\n"}, "finish_reason": "stop"}
    assert choice_text(vllm) == "<think>\nadd\n</think>\n\n42"
    assert (
        choice_text({"message": {"content": None, "reasoning_content": "x"}, "finish_reason": "length"}) == "<think>x"
    )
    # tool calls parsed out by the server go back in the Cascade template's form
    call = {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    text = choice_text(
        {
            "message": {"content": "Let me check.", "reasoning_content": "r", "tool_calls": [call]},
            "finish_reason": "tool_calls",
        }
    )
    assert (
        text == '<think>r</think>Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": '
        '{"city": "Paris"}}\n</tool_call>'
    )
    assert parse_tool_calls(split_thinking(text).answer) == [{"name": "get_weather", "arguments": {"city": "Paris"}}]


def test_5xx_is_retried_with_growing_backoff(server, chat_model_path):
    with ProxyServer(server, fail_first=2, fail_status=503) as proxy:
        generator = client(proxy.base_url, chat_model_path, backoff_base=0.1)
        assert generator.generate(HELLO) == [CHAT_RESPONSE]
        gaps = [b - a for a, b in zip(proxy.arrivals, proxy.arrivals[1:])]
    assert len(gaps) == 2 and gaps[0] >= 0.1 and gaps[1] >= 0.2


def test_429_waits_as_long_as_retry_after_says(server, chat_model_path):
    with ProxyServer(server, fail_first=1, fail_status=429, retry_after="0.6") as proxy:
        assert client(proxy.base_url, chat_model_path, backoff_base=0.01).generate(HELLO) == [CHAT_RESPONSE]
        assert len(proxy.arrivals) == 2 and proxy.arrivals[1] - proxy.arrivals[0] >= 0.6


def test_retries_run_out_with_a_clear_error(server, chat_model_path):
    with ProxyServer(server, fail_first=100, fail_status=502) as proxy:
        with pytest.raises(GenerationError, match=r"HTTP 502.*after 3 attempts"):
            client(proxy.base_url, chat_model_path, max_retries=2).generate(HELLO)
        assert len(proxy.arrivals) == 3


def test_client_errors_are_not_retried(server, chat_model_path):
    with ProxyServer(server, fail_first=100, fail_status=401) as proxy:
        with pytest.raises(GenerationError, match="HTTP 401"):
            client(proxy.base_url, chat_model_path).generate(HELLO)
        assert len(proxy.arrivals) == 1


def test_a_hanging_server_times_out_per_request():
    with ProxyServer(None, hang=True) as proxy:
        generator = OpenAICompatGenerator(proxy.base_url, "any", timeout=0.3, max_retries=1, backoff_base=0.05)
        start = time.monotonic()
        with pytest.raises(GenerationError, match="timed out after 2 attempt"):
            generator.generate(HELLO)
        assert time.monotonic() - start < 3.0 and len(proxy.arrivals) == 2


def test_connection_errors_are_retried_then_reported():
    generator = OpenAICompatGenerator(
        f"http://127.0.0.1:{free_port()}/v1", "any", max_retries=2, backoff_base=0.01, timeout=5
    )
    with pytest.raises(GenerationError, match=r"connection failed.*after 3 attempt"):
        generator.generate(HELLO)


def test_concurrency_stays_within_the_limit(server, chat_model_path):
    conversations = [[{"role": "user", "content": f"q{i}"}] for i in range(6)]
    with ProxyServer(server, delay=0.2) as proxy:
        generator = client(proxy.base_url, chat_model_path, max_concurrency=2)
        assert generate_many(generator, conversations) == [[CHAT_RESPONSE]] * 6
        assert proxy.max_in_flight == 2  # requests did overlap, and never beyond the limit
        with ThreadPoolExecutor(4) as pool:  # blocking calls from many threads share the limit
            assert list(pool.map(generator.generate, conversations[:4])) == [[CHAT_RESPONSE]] * 4
        assert proxy.max_in_flight == 2 and len(proxy.bodies) == 10

    with ProxyServer(server, delay=0.2) as proxy:  # the async path, on the caller's own loop
        generator = client(proxy.base_url, chat_model_path, max_concurrency=3)
        assert asyncio.run(agenerate_many(generator, conversations)) == [[CHAT_RESPONSE]] * 6
        assert proxy.max_in_flight == 3


def test_bad_configuration_is_named():
    with pytest.raises(ValueError, match="base_url"):
        OpenAICompatGenerator("localhost:8000", "m")
    with pytest.raises(ValueError, match="max_concurrency"):
        OpenAICompatGenerator("http://localhost:8000/v1", "m", max_concurrency=0)
    with pytest.raises(ValueError, match="temperature"):
        OpenAICompatGenerator("http://localhost:8000/v1", "m").generate(HELLO, Sampling(temperature=-1))
