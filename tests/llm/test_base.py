"""The shared contract: mode flags, argument checks, spec loading, running many requests."""

import asyncio
import threading

import pytest
from llm_helpers import CHAT_RESPONSE

from cascade_rl.llm import (
    Generator,
    LocalGenerator,
    OpenAICompatGenerator,
    agenerate_many,
    apply_modes,
    generate_many,
    load_generator,
)
from cascade_rl.llm.base import Sampling

HELLO = [{"role": "user", "content": "hello"}]


def test_apply_modes_flags_user_turns_once_and_drops_the_key():
    messages = [
        {"role": "system", "content": "s", "mode": "think"},
        {"role": "user", "content": "a", "mode": "no_think"},
        {"role": "user", "content": "b /think", "mode": "no_think"},
        {"role": "user", "content": "c"},
    ]
    assert apply_modes(messages) == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "a /no_think"},
        {"role": "user", "content": "b /think"},
        {"role": "user", "content": "c"},
    ]
    assert apply_modes(messages, "no_think")[3] == {"role": "user", "content": "c /no_think"}
    assert messages[1] == {"role": "user", "content": "a", "mode": "no_think"}  # input untouched
    with pytest.raises(ValueError, match="default_mode"):
        apply_modes(messages, "fast")


def test_load_generator_reads_every_spec_form(chat_model_path):
    for spec in (
        f"local:{chat_model_path}",
        str(chat_model_path),
        {"model_path": str(chat_model_path), "default_mode": "no_think"},
    ):
        generator = load_generator(spec)
        assert isinstance(generator, LocalGenerator) and isinstance(generator, Generator)
        assert generator.generate(HELLO) == [CHAT_RESPONSE]
    for spec in (
        "openai:http://127.0.0.1:9/v1#org/model@main",
        "http://127.0.0.1:9/v1#org/model@main",
        {"base_url": "http://127.0.0.1:9/v1", "model": "org/model@main", "max_concurrency": 3},
    ):
        generator = load_generator(spec)
        assert isinstance(generator, OpenAICompatGenerator) and isinstance(generator, Generator)
        assert (generator.base_url, generator.model) == ("http://127.0.0.1:9/v1", "org/model@main")
    assert generator.max_concurrency == 3  # dict options reach the constructor


@pytest.mark.parametrize(
    "spec, message",
    [
        ("http://h:8000/v1", "names no model"),
        ("/no/such/dir", "cannot read generator spec"),
        ({"model": "m"}, "needs 'base_url'"),
        ({"base_url": "http://h/v1"}, "needs a 'model'"),
        ("local:/no/such/dir", "model directory not found"),
    ],
)
def test_load_generator_names_what_is_wrong(spec, message):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        load_generator(spec)


class OnlyGenerate:
    """A user's own backend with nothing but ``generate`` / ``agenerate`` (no batching)."""

    def __init__(self, inner: LocalGenerator) -> None:
        self.inner, self.threads = inner, set()

    def generate(self, messages, sampling=Sampling()):
        self.threads.add(threading.get_ident())
        return [text.upper() for text in self.inner.generate(messages, sampling)]

    async def agenerate(self, messages, sampling=Sampling()):
        return await asyncio.to_thread(self.generate, messages, sampling)


def test_generate_many_serves_backends_without_batching(chat_model_path):
    backend = OnlyGenerate(LocalGenerator(chat_model_path))
    assert isinstance(backend, Generator)
    conversations = [[{"role": "user", "content": f"q{i}"}] for i in range(4)]
    assert generate_many(backend, conversations, Sampling(n=2), max_workers=2) == [[CHAT_RESPONSE.upper()] * 2] * 4
    assert threading.get_ident() not in backend.threads  # ran in the pool
    assert asyncio.run(agenerate_many(backend, conversations[:2])) == [[CHAT_RESPONSE.upper()]] * 2
