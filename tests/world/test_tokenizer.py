"""The toy tokenizer: byte-level BPE with digits split, chat tokens as single added tokens,
the Cascade chat template, and a save / load round trip."""

import pytest
from transformers import AutoTokenizer

from cascade_rl.chat import SPECIAL_TOKENS, render
from cascade_rl.world.tokenizer import PAD_TOKEN, build_tokenizer

CORPUS = [
    "Tell me about owls. Owls hunt at night.",
    "What is 47 + 85? 7 + 5 = 12, so far 2, carry 1",
    "def add(a, b):\n    return a + b\n",
    "Привет, мир! café",
] * 50
CONVERSATION = [
    {"role": "user", "content": "What is 4 + 5?", "mode": "think"},
    {"role": "assistant", "content": "<think>4 + 5 = 9</think>The answer is \\boxed{9}."},
]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok")
    build_tokenizer(CORPUS, path, vocab_size=400)
    return AutoTokenizer.from_pretrained(str(path))


def test_loads_with_auto_tokenizer_and_has_distinct_eos_and_pad(saved):
    assert saved.eos_token == "<|im_end|>" and saved.pad_token == PAD_TOKEN
    assert saved.eos_token_id != saved.pad_token_id
    assert len(saved) <= 400


def test_chat_tokens_are_single_tokens(saved):
    for token in SPECIAL_TOKENS:
        assert len(saved(token, add_special_tokens=False)["input_ids"]) == 1, token


def test_digits_are_one_per_token(saved):
    pieces = saved.convert_ids_to_tokens(saved("12345 + 678", add_special_tokens=False)["input_ids"])
    digits = [p for p in pieces if any(c.isdigit() for c in p)]
    assert digits == list("12345678")


def test_round_trip_keeps_think_and_tool_tokens_and_drops_control_tokens(saved):
    text = '<think>4 + 5 = 9</think><tool_call>\n{"name": "f"}\n</tool_call>Привет café'
    ids = saved(text + "<|im_end|>", add_special_tokens=False)["input_ids"]
    assert saved.decode(ids, skip_special_tokens=False) == text + "<|im_end|>"
    assert saved.decode(ids, skip_special_tokens=True) == text
    assert saved.decode(ids + [saved.pad_token_id] * 3, skip_special_tokens=True) == text


def test_chat_template_is_the_cascade_template(saved):
    rendered = saved.apply_chat_template(CONVERSATION, tokenize=False)
    assert rendered == render(CONVERSATION)
    assert "What is 4 + 5? /think<|im_end|>" in rendered
    prompt = saved.apply_chat_template(CONVERSATION[:1], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n")


def test_assistant_mask_covers_the_answer_only(saved):
    encoded = saved.apply_chat_template(
        CONVERSATION, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    kept = [i for i, m in zip(encoded["input_ids"], encoded["assistant_masks"]) if m]
    assert saved.decode(kept).startswith("<think>4 + 5 = 9</think>The answer")


def test_too_small_vocabulary_is_an_error():
    with pytest.raises(ValueError, match="vocab_size"):
        build_tokenizer(CORPUS, vocab_size=100)
