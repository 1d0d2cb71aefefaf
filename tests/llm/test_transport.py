"""One server spec and one HTTP client (llm/transport.py): every served model -- a generator, a
judge, a reward model, a distillation teacher -- is named by the same spec and reached through
the same client, so they read URLs alike and share the retry and concurrency rules."""

import pytest

from cascade_rl.llm import load_generator
from cascade_rl.llm.judge import YesNoJudge
from cascade_rl.llm.pooling import RewardModelClient
from cascade_rl.llm.transport import HttpClient, ServerSpec, is_server_spec, parse_server_spec
from cascade_rl.serve.teacher import TeacherClient


@pytest.mark.parametrize(
    "spec, url, model, root",
    [
        ("http://h:8000/v1#Qwen/Qwen3-8B", "http://h:8000/v1", "Qwen/Qwen3-8B", "http://h:8000"),
        ("openai:https://h/v1/#m", "https://h/v1", "m", "https://h"),
        ("http://h:8000", "http://h:8000", None, "http://h:8000"),
        ("  http://h:8000/pooling#rm ", "http://h:8000/pooling", "rm", "http://h:8000"),
    ],
)
def test_a_server_spec_reads_the_same_everywhere(spec, url, model, root):
    parsed = parse_server_spec(spec)
    assert (parsed.url, parsed.model, parsed.root) == (url, model, root)
    assert is_server_spec(spec)


@pytest.mark.parametrize(
    "spec, kwargs, message",
    [
        ("ftp://h/v1#m", {}, "judge 'ftp://h/v1#m' is not an http"),
        ("http://#m", {}, "is not an http"),
        ("http://h:8000/v1", {"require_model": True}, "names no model; write http://h:8000/v1#MODEL_NAME"),
    ],
)
def test_a_bad_spec_is_named_with_what_it_was_for(spec, kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parse_server_spec(spec, what="judge", **kwargs)


def test_local_paths_are_not_server_specs(tmp_path):
    assert not is_server_spec(str(tmp_path)) and not is_server_spec("local:/models/x") and not is_server_spec(None)


def test_every_served_model_client_is_the_one_http_client():
    """A generator (and the judge on it), a reward-model client and a teacher client parse the
    same spec and carry the same client settings; none holds another client inside."""
    generator = load_generator("openai:http://127.0.0.1:9/v1#m", server={"max_concurrency": 3, "timeout": 5})
    judge = YesNoJudge("http://127.0.0.1:9/v1#judge")
    reward_model = RewardModelClient("http://127.0.0.1:9/v1#rm", max_concurrency=2)
    teacher = TeacherClient("http://127.0.0.1:9#t", max_retries=1)
    for client in (generator, judge.backend, reward_model, teacher):
        assert isinstance(client, HttpClient)
        assert not any(isinstance(value, HttpClient) for value in vars(client).values())
    assert (generator.base_url, generator.model, generator.max_concurrency, generator.timeout) == (
        "http://127.0.0.1:9/v1",
        "m",
        3,
        5.0,
    )
    assert (reward_model.base_url, reward_model.url, reward_model.model) == (
        "http://127.0.0.1:9",
        "http://127.0.0.1:9/pooling",
        "rm",
    )
    assert (teacher.base_url, teacher.model, teacher.max_retries) == ("http://127.0.0.1:9", "t", 1)
    assert str(ServerSpec("http://h/v1", "m")) == "http://h/v1#m"
