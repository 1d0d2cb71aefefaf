import json

import pytest

from cascade_rl.chat import last_user_text, parse_tool_calls, prompt_mode, render, split_thinking, with_mode


def test_split_thinking_cases():
    assert split_thinking("<think>plan</think>\n\nThe answer") == ("plan", "The answer", True)
    assert split_thinking("<think>never closed") == ("never closed", "", False)
    assert split_thinking("prefilled</think>ans") == ("prefilled", "ans", True)
    assert split_thinking("just text") == ("", "just text", True)
    assert split_thinking("") == ("", "", True)
    # a box only inside the reasoning is not part of the answer
    assert "boxed" not in split_thinking("<think>\\boxed{3}</think>no box").answer


def test_every_user_turn_gets_its_flag():
    text = render(
        [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "<think>r</think>x"},
            {"role": "user", "content": "b", "mode": "no_think"},
            {"role": "assistant", "content": "y"},
            {"role": "user", "content": "c /think"},
        ],
        add_generation_prompt=True,
    )
    assert "<|im_start|>user\na /think<|im_end|>" in text
    assert "<|im_start|>user\nb /no_think<|im_end|>" in text
    assert "c /think /think" not in text and "c /think<|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")
    assert "<think></think>" not in text and "enable_thinking" not in text


def test_global_no_think_has_no_empty_think_block():
    text = render([{"role": "user", "content": "hi"}], add_generation_prompt=True, default_mode="no_think")
    assert text == "<|im_start|>user\nhi /no_think<|im_end|>\n<|im_start|>assistant\n"


def test_tools_in_system_prompt_and_tool_calls_round_trip():
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    text = render(
        [
            {"role": "system", "content": "You help."},
            {"role": "user", "content": "weather?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
            },
            {"role": "tool", "content": "sunny"},
        ],
        tools=tools,
    )
    system = text.split("<|im_end|>")[0]
    assert "You help." in system and "<tools>" in system and '"get_weather"' in system
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in text
    assert "<tool_response>\nsunny\n</tool_response>" in text
    calls = parse_tool_calls(text.split("<|im_start|>assistant\n")[1])
    assert calls == [{"name": "get_weather", "arguments": {"city": "Paris"}}]


def test_prompt_mode_and_last_user_text():
    messages = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "y"},
        {"role": "user", "content": "z /no_think"},
    ]
    assert prompt_mode(messages) == "no_think"
    assert prompt_mode(with_mode(messages, "think")) == "think"
    assert last_user_text(messages) == "z"
    rendered = render(with_mode(messages, "no_think"), add_generation_prompt=True)
    assert prompt_mode(rendered) == "no_think" and last_user_text(rendered) == "z"


def test_install_on_a_real_tokenizer_and_tokenize_round_trip(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from cascade_rl.chat import SPECIAL_TOKENS, install_chat_template

    raw = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]")
    tokenizer.add_special_tokens({"additional_special_tokens": list(SPECIAL_TOKENS)})
    install_chat_template(tokenizer)
    assert tokenizer.eos_token == "<|im_end|>"
    tokenizer.save_pretrained(tmp_path)
    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(tmp_path)
    messages = [{"role": "user", "content": "hi", "mode": "no_think"}]
    assert loaded.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == render(
        messages, add_generation_prompt=True
    )


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "get_time", "description": "Time in a city: ünïcode"}},
]


def test_with_tools_reads_exactly_like_rendering_with_tools():
    from cascade_rl.chat import with_tools

    plain = [{"role": "user", "content": "weather in Paris?"}]
    system = [{"role": "system", "content": "You help."}, *plain]
    for messages in (plain, system):
        for generation in (True, False):
            expected = render(messages, TOOLS, add_generation_prompt=generation)
            assert render(with_tools(messages, TOOLS), add_generation_prompt=generation) == expected
            # tools given as one JSON text (SFT rows) read the same
            assert render(with_tools(messages, json.dumps(TOOLS)), add_generation_prompt=generation) == expected
    assert with_tools(plain, None) == plain and with_tools(plain, []) == plain
    once = with_tools(system, TOOLS)
    assert with_tools(once, TOOLS) == once  # a prompt that lists its tools already is left alone
    assert system[0]["content"] == "You help."  # the input is not modified
    with pytest.raises(ValueError, match="tools must be a list"):
        with_tools(plain, [["not a schema"]])


def test_a_template_that_drops_tools_and_calls_gets_them_written_into_the_messages(smollm2_tiny):
    """SmolLM2's template renders only each message's content: tools go into the system message
    and each call into its turn as the Cascade template writes it; a template that shows both
    gets the conversation unchanged."""
    from cascade_rl.chat import (
        calls_as_text,
        chat_template,
        for_template,
        parse_tool_calls,
        render,
        template_shows_tool_calls,
        template_shows_tools,
        with_tools,
    )

    plain = (smollm2_tiny / "chat_template.jinja").read_text()
    assert not template_shows_tools(plain) and not template_shows_tool_calls(plain)
    assert template_shows_tools(chat_template()) and template_shows_tool_calls(chat_template())
    tools = [{"type": "function", "function": {"name": "lookup", "description": "d", "parameters": {}}}]
    calls = [{"type": "function", "function": {"name": "lookup", "arguments": {"q": "a"}}},
             {"type": "function", "function": {"name": "lookup", "arguments": '{"q": "b"}'}}]  # fmt: skip
    turn = {"role": "assistant", "content": "Looking.", "tool_calls": calls}
    messages = [{"role": "user", "content": "Find a and b."}, turn]
    shown, left = for_template(messages, tools, plain)
    assert left is None and shown[0] == with_tools(messages[:1], tools)[0]
    assert shown[-1] == calls_as_text(turn) and "tool_calls" not in shown[-1]
    assert shown[-1]["content"].startswith("Looking.\n<tool_call>")
    assert parse_tool_calls(shown[-1]["content"]) == [{"name": "lookup", "arguments": {"q": q}} for q in "ab"]
    rendered = render([messages[0], turn], default_mode="no_think")  # exactly the Cascade template's text
    assert rendered.endswith(f"<|im_start|>assistant\n{shown[-1]['content']}<|im_end|>\n")
    assert for_template(messages, tools, chat_template()) == (messages, tools)
