"""LocalGenerator on tiny real checkpoints: exact texts (thinking tags kept, stop and padding
tokens gone), sampling parameters honoured, batching, modes, threads, bad input."""

import asyncio
import json
import shutil
import threading

import pytest
import torch
from llm_helpers import CHAT_RESPONSE, JUDGE_P_YES
from transformers import AutoTokenizer

from cascade_rl.chat import split_thinking
from cascade_rl.llm import LocalGenerator, generate_many
from cascade_rl.llm.base import Sampling

HELLO = [{"role": "user", "content": "hello"}]
YES_TEXT, NO_TEXT = "<judgement>YES</judgement>", "<judgement>NO</judgement>"


@pytest.fixture(scope="module")
def chat(chat_model_path):
    return LocalGenerator(chat_model_path, batch_size=4)


@pytest.fixture(scope="module")
def judge_lm(judge_model_path):
    return LocalGenerator(judge_model_path)


def test_thinking_tags_survive_although_they_are_special_tokens(chat):
    ids = chat.tokenizer.encode(CHAT_RESPONSE, add_special_tokens=False)
    assert chat.tokenizer.decode(ids, skip_special_tokens=True) == "rok"  # what a naive decode gives
    texts = chat.generate(HELLO, Sampling(n=3, temperature=1.0))
    assert texts == [CHAT_RESPONSE] * 3  # no <|im_end|>, no padding, tags kept
    assert split_thinking(texts[0]) == ("r", "ok", True)


def test_token_limit_leaves_the_thinking_unfinished(chat):
    assert chat.generate(HELLO, Sampling(max_tokens=2)) == ["<think>r"]
    assert not split_thinking("<think>r").finished


def test_batches_of_uneven_prompts_come_back_in_order(chat):
    conversations = [
        HELLO,
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "a much longer question " * 5},
            {"role": "assistant", "content": "<think>x</think>y"},
            {"role": "user", "content": "and?"},
        ],
        HELLO,
    ]
    # batch_size 4 with n=2 means two prompts per forward pass, so two passes here
    assert generate_many(chat, conversations, Sampling(n=2, temperature=0.8)) == [[CHAT_RESPONSE] * 2] * 3


def test_samples_are_independent_and_follow_temperature_top_p_and_top_k(judge_lm):
    torch.manual_seed(0)
    free = judge_lm.generate(HELLO, Sampling(n=40, temperature=1.0, top_p=1.0, max_tokens=8))
    assert set(free) == {YES_TEXT, NO_TEXT}
    assert abs(free.count(YES_TEXT) / 40 - JUDGE_P_YES) <= 0.2  # P(YES) = 0.75, seeded
    assert judge_lm.generate(HELLO, Sampling(n=20, temperature=0.05, max_tokens=8)) == [YES_TEXT] * 20
    # nucleus 0.7 < P(YES) = 0.75 keeps YES alone
    assert judge_lm.generate(HELLO, Sampling(n=20, temperature=1.0, top_p=0.7, max_tokens=8)) == [YES_TEXT] * 20
    assert judge_lm.generate(HELLO, Sampling(n=3, temperature=0, max_tokens=8)) == [YES_TEXT] * 3
    # top-k 1 keeps the likeliest token alone (YES), whatever the temperature
    assert (
        judge_lm.generate(HELLO, Sampling(n=20, temperature=1.0, top_p=1.0, top_k=1, max_tokens=8)) == [YES_TEXT] * 20
    )


def test_modes_become_flags_on_user_turns(chat_model_path):
    generator = LocalGenerator(chat_model_path, default_mode="no_think")
    prompt = generator.render_prompt(
        [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c", "mode": "think"},
            {"role": "user", "content": "d /think"},
        ]
    )
    assert "user\na /no_think<|im_end|>" in prompt
    assert "user\nc /think<|im_end|>" in prompt and "user\nd /think<|im_end|>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_tokenizer_without_template_gets_the_cascade_template(chat_model_path, tmp_path):
    bare = shutil.copytree(chat_model_path, tmp_path / "bare")
    (bare / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((bare / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(config))
    assert not AutoTokenizer.from_pretrained(bare, local_files_only=True).chat_template
    generator = LocalGenerator(bare)
    assert generator.render_prompt(HELLO) == "<|im_start|>user\nhello /think<|im_end|>\n<|im_start|>assistant\n"
    assert generator.generate(HELLO) == [CHAT_RESPONSE]


def test_threads_and_event_loops_can_share_one_generator(chat):
    results, errors = [], []

    def work():
        try:
            results.append(chat.generate(HELLO, Sampling(n=2)))
        except Exception as error:  # surfaced below
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and results == [[CHAT_RESPONSE] * 2] * 4

    async def both():
        return await asyncio.gather(chat.agenerate(HELLO), chat.agenerate_batch([HELLO, HELLO]))

    assert asyncio.run(both()) == [[CHAT_RESPONSE], [[CHAT_RESPONSE], [CHAT_RESPONSE]]]


def test_bad_input_is_named(chat, tmp_path):
    with pytest.raises(FileNotFoundError, match="model directory not found"):
        LocalGenerator(tmp_path / "missing")
    with pytest.raises(ValueError, match="n must be"):
        chat.generate(HELLO, Sampling(n=0))
    with pytest.raises(ValueError, match="top_p"):
        chat.generate(HELLO, Sampling(top_p=0))
    with pytest.raises(ValueError, match="top_k"):
        chat.generate(HELLO, Sampling(top_k=-1))
    with pytest.raises(ValueError, match="messages"):
        chat.generate("hello")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode"):
        chat.generate([{"role": "user", "content": "x", "mode": "fast"}])
    with pytest.raises(ValueError, match="dtype"):
        LocalGenerator(chat.model_path, dtype="float99")
