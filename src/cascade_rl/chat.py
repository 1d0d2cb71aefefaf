"""The chat format of Cascade RL (SPEC section 2) and how responses are read back.

* ChatML turns with a ` /think` or ` /no_think` flag appended to **each user turn** (same flag on
  every turn = global control, different flags = per-turn switching); no ``enable_thinking``
  template switch and no empty ``<think></think>`` block in non-thinking mode.
* Thinking responses are ``<think>reasoning</think>answer``. :func:`split_thinking` separates
  the two; a response that opened ``<think>`` and never closed it is *unfinished* and has no
  answer. Every scorer scores the answer part unless it says otherwise.
* Tools are listed in the system prompt inside ``<tools></tools>``; calls are made inside
  ``<tool_call></tool_call>`` as JSON (Qwen3 convention). :func:`with_tools` writes a row's
  tools into its system message exactly as the template renders them, for every path that
  renders prompts without a ``tools`` argument (RL, evaluation).

The Jinja template lives in ``templates/cascade_chatml.jinja``; :func:`install_chat_template`
puts it on any Hugging Face tokenizer, :func:`render` renders it without one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from typing import Any, Literal, NamedTuple

Mode = Literal["think", "no_think"]
MODES: tuple[Mode, ...] = ("think", "no_think")

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
#: Tokens a tokenizer for this format should treat as special / added tokens.
SPECIAL_TOKENS = (
    IM_START,
    IM_END,
    THINK_OPEN,
    THINK_CLOSE,
    TOOL_CALL_OPEN,
    TOOL_CALL_CLOSE,
    "<tools>",
    "</tools>",
    "<tool_response>",
    "</tool_response>",
)

_FLAG_RE = re.compile(r"\s/(think|no_think)\s*$")


class ThinkingSplit(NamedTuple):
    """A response cut at ``</think>``: what the model thought, what it answered, and whether
    the thinking was closed (``finished``). Unfinished responses have ``answer == ""``."""

    reasoning: str
    answer: str
    finished: bool


def split_thinking(response: str) -> ThinkingSplit:
    """Split a response into reasoning and answer (SPEC section 2).

    * ``<think>r</think>a`` -> (r, a, True); the answer is the text after the *first*
      ``</think>``, stripped.
    * ``<think>r`` with no closing tag -> (r, "", False): unfinished, no answer.
    * ``r</think>a`` (the opening tag was part of the prompt) -> (r, a, True).
    * a non-thinking response (no tags) -> ("", whole text, True).
    """
    text = response or ""
    close = text.find(THINK_CLOSE)
    if close >= 0:
        head = text[:close]
        opened = head.find(THINK_OPEN)
        reasoning = head[opened + len(THINK_OPEN) :] if opened >= 0 else head
        return ThinkingSplit(reasoning.strip(), text[close + len(THINK_CLOSE) :].strip(), True)
    opened = text.find(THINK_OPEN)
    if opened >= 0:
        return ThinkingSplit(text[opened + len(THINK_OPEN) :].strip(), "", False)
    return ThinkingSplit("", text.strip(), True)


def prompt_mode(prompt: str | Sequence[dict] | None, default: Mode = "think") -> Mode:
    """The thinking mode a prompt asks for: the flag of its last user turn, else ``default``.

    Accepts rendered text or a list of chat messages (``mode`` key or a flag in the content).
    """
    if prompt is None:
        return default
    if isinstance(prompt, str):
        flags = re.findall(r" /(think|no_think)(?=<\|im_end\|>|\s*$)", prompt)
        return flags[-1] if flags else default  # type: ignore[return-value]
    for message in reversed(list(prompt)):
        if message.get("role") != "user":
            continue
        if message.get("mode") in MODES:
            return message["mode"]
        match = _FLAG_RE.search(message.get("content") or "")
        return match.group(1) if match else default  # type: ignore[return-value]
    return default


def with_mode(messages: Sequence[dict], mode: Mode) -> list[dict]:
    """Copy of ``messages`` whose user turns all carry ``mode`` (global control)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    out = []
    for message in messages:
        message = dict(message)
        if message.get("role") == "user":
            message["content"] = _FLAG_RE.sub("", message.get("content") or "")
            message["mode"] = mode
        out.append(message)
    return out


def template_reads_modes(template: str | None) -> bool:
    """Whether a chat template knows thinking modes (the Cascade template, Qwen3's soft switch):
    it mentions ``no_think`` or ``enable_thinking``. A template that does not (a plain
    instruction model's, e.g. SmolLM2's) gets no mode flags: they would be stray text."""
    return bool(template) and ("no_think" in template or "enable_thinking" in template)


def without_modes(messages: Sequence[dict]) -> list[dict]:
    """Copy of ``messages`` without ``mode`` keys and without trailing ` /think` / ` /no_think`
    flags on user turns: the prompt as a model without thinking modes reads it."""
    out = []
    for message in messages:
        message = {key: value for key, value in message.items() if key != "mode"}
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            message["content"] = _FLAG_RE.sub("", message["content"])
        out.append(message)
    return out


def last_user_text(prompt: str | Sequence[dict] | None) -> str:
    """The text of the last user turn without its flag (used e.g. to detect the prompt's
    language). Plain strings are returned without a trailing flag."""
    if prompt is None:
        return ""
    if isinstance(prompt, str):
        turns = re.findall(r"<\|im_start\|>user\n(.*?)(?:<\|im_end\|>|$)", prompt, flags=re.S)
        text = turns[-1] if turns else prompt
        return _FLAG_RE.sub("", text)
    for message in reversed(list(prompt)):
        if message.get("role") == "user":
            return _FLAG_RE.sub("", message.get("content") or "")
    return ""


@lru_cache(maxsize=1)
def chat_template() -> str:
    """The project's Jinja chat template (see the module docstring)."""
    return (resources.files("cascade_rl") / "templates" / "cascade_chatml.jinja").read_text()


def install_chat_template(tokenizer: Any) -> Any:
    """Put the Cascade chat template on a Hugging Face tokenizer and make sure the ChatML end
    token is its EOS token (so generation stops at the end of a turn). Returns the tokenizer."""
    tokenizer.chat_template = chat_template()
    vocab = tokenizer.get_vocab()
    if IM_END in vocab:
        tokenizer.eos_token = IM_END
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def render(
    messages: Sequence[dict],
    tools: Sequence[dict] | None = None,
    *,
    add_generation_prompt: bool = False,
    default_mode: Mode = "think",
) -> str:
    """Render a conversation with the Cascade template, without needing a tokenizer."""
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(
        conversations=[list(messages)],
        tools=list(tools) if tools else None,
        chat_template=chat_template(),
        add_generation_prompt=add_generation_prompt,
        default_mode=default_mode,
    )
    return rendered[0]


def tools_system_content(tools: Sequence[dict] | str, system: str | None = None) -> str:
    """The system message content that lists ``tools`` inside ``<tools></tools>`` (after the
    text of ``system``, if any) exactly as the chat template renders it when given ``tools``:
    rendered by the template itself, so the two cannot drift apart."""
    tools = _tool_list(tools)
    probe = [{"role": "user", "content": "x"}]
    head = [{"role": "system", "content": system}] if system else []
    full, tail = render(head + probe, tools), render(probe)
    return full[: -len(tail)].removeprefix(f"{IM_START}system\n").removesuffix(f"{IM_END}\n")


def with_tools(messages: Sequence[dict], tools: Sequence[dict] | str | None) -> list[dict]:
    """Copy of ``messages`` whose system message lists ``tools`` (SPEC section 2), so that a
    prompt rendered *without* a ``tools`` argument reads exactly like one rendered with them.

    This is how a row's own tools reach the model wherever prompts are rendered as plain
    conversations: RL prompts (TRL's GRPO renders every prompt of a batch with one global
    ``tools`` list, or none) and evaluation prompts, locally or through a server. An existing
    first system message keeps its text before the tools block; a prompt whose system message
    already lists tools, and an empty ``tools``, are returned unchanged."""
    messages = [dict(m) for m in messages]
    tools = _tool_list(tools) if tools else []
    if not tools:
        return messages
    system = messages[0] if messages and messages[0].get("role") == "system" else None
    if system is not None and "<tools>" in (system.get("content") or ""):
        return messages
    if system is None:
        return [{"role": "system", "content": tools_system_content(tools)}, *messages]
    system["content"] = tools_system_content(tools, system.get("content") or "")
    return messages


def _tool_list(tools: Sequence[dict] | str) -> list[dict]:
    """Tools given as a list of JSON schemas or as one JSON text of that list (SFT rows)."""
    if isinstance(tools, str):
        tools = json.loads(tools)
    if not isinstance(tools, (list, tuple)) or not all(isinstance(tool, dict) for tool in tools):
        raise ValueError(f"tools must be a list of JSON schema objects, got {str(tools)[:80]!r}")
    return list(tools)


def parse_tool_calls(answer: str) -> list[dict]:
    """The JSON objects inside ``<tool_call>`` blocks of an answer, in order. A block whose
    content is not a JSON object with a ``name`` is returned as ``{"invalid": text}``."""
    calls = []
    for body in re.findall(r"<tool_call>(.*?)</tool_call>", answer or "", flags=re.S):
        try:
            call = json.loads(body.strip())
        except json.JSONDecodeError:
            calls.append({"invalid": body.strip()})
            continue
        calls.append(call if isinstance(call, dict) and "name" in call else {"invalid": body.strip()})
    return calls


def stop_token_ids(tokenizer: Any) -> set[int]:
    """Token ids that end a response: the EOS id(s) and the pad id."""
    ids: set[int] = set()
    for value in (getattr(tokenizer, "eos_token_id", None), getattr(tokenizer, "pad_token_id", None)):
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return ids


def decode_response(tokenizer: Any, ids: Sequence[int], stop_ids: set[int] | None = None) -> str:
    """Decode generated ids into response text, dropping trailing end/pad tokens but keeping
    tags such as ``<think>`` and ``<tool_call>`` even where a tokenizer marks them special
    (``skip_special_tokens=True`` would erase them and the thinking split with them)."""
    stops = stop_token_ids(tokenizer) if stop_ids is None else stop_ids
    ids = [int(i) for i in ids]
    while ids and ids[-1] in stops:
        ids.pop()
    return tokenizer.decode(ids, skip_special_tokens=False)


def token_count(
    tokenizer: Any,
    messages: Sequence[dict],
    *,
    tools: Sequence[Any] | str | None = None,
    add_generation_prompt: bool = False,
) -> int:
    """Length in tokens of a conversation rendered with the tokenizer's chat template."""
    if isinstance(tools, str):
        tools = json.loads(tools)
    ids = tokenizer.apply_chat_template(
        list(messages),
        tools=list(tools) if tools else None,
        tokenize=True,
        return_dict=False,
        add_generation_prompt=add_generation_prompt,
    )
    return len(ids)


def tool_turn_text(tool_messages: Sequence[dict], *, template: str | None = None, end_of_turn: str = IM_END) -> str:
    """The text a multi-turn rollout appends after an assistant turn that called tools: everything
    the chat template writes after that turn's ``end_of_turn`` token, i.e. the ``tool_messages``
    (role ``tool``) rendered as the template renders tool results, then the next assistant
    turn's generation prompt. With the Cascade template (default) that is
    ``"\\n<|im_start|>user\\n<tool_response>\\n...\\n</tool_response><|im_end|>\\n<|im_start|>assistant\\n"``.

    Rendered by the template itself (``template``: a Jinja chat template, e.g. a tokenizer's;
    default the Cascade template), the way TRL builds its tool suffix, so what the model reads after a call is
    exactly what the template would show in a whole conversation. The rollout engine appends
    the model's own tokens up to and including its end-of-turn token, then this text; the
    tokens of this text are not the model's and are masked from the loss."""
    from transformers.utils.chat_template_utils import render_jinja_template

    if not tool_messages or any(message.get("role") != "tool" for message in tool_messages):
        raise ValueError("tool_turn_text needs one or more messages of role 'tool'")
    head = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]

    def rendered(messages: list[dict], generation: bool) -> str:
        text, _ = render_jinja_template(
            conversations=[messages],
            chat_template=template or chat_template(),
            add_generation_prompt=generation,
        )
        return text[0]

    prefix, full = rendered(head, False), rendered(head + [dict(m) for m in tool_messages], True)
    cut = prefix.rfind(end_of_turn)
    if cut < 0 or not full.startswith(prefix[: cut + len(end_of_turn)]):
        raise ValueError(f"the chat template does not end an assistant turn with {end_of_turn!r}")
    return full[cut + len(end_of_turn) :]


_PROBE_TOOL = "cascade_probe_tool"


def _renders(template: str, messages: list[dict], tools: list[dict] | None = None) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    try:
        text, _ = render_jinja_template(conversations=[messages], tools=tools, chat_template=template)
    except Exception:  # noqa: BLE001 - a template that cannot render the probe does not show it
        return ""
    return text[0]


def template_shows_tools(template: str | None) -> bool:
    """Whether a chat template renders a ``tools`` argument (the Cascade template, Qwen's); a
    plain instruction model's (SmolLM2's) drops it without a word."""
    tool = {"type": "function", "function": {"name": _PROBE_TOOL, "description": "", "parameters": {}}}
    return template is None or _PROBE_TOOL in _renders(template, [{"role": "user", "content": "x"}], [tool])


def template_shows_tool_calls(template: str | None) -> bool:
    """Whether a chat template renders an assistant message's ``tool_calls``."""
    call = {"type": "function", "function": {"name": _PROBE_TOOL, "arguments": "{}"}}
    messages = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    return template is None or _PROBE_TOOL in _renders(template, messages)


def calls_as_text(message: dict) -> dict:
    """Copy of an assistant ``message`` whose ``tool_calls`` are written into its content as the
    Cascade template writes them (``<tool_call>`` blocks, rendered by the template itself): what
    the model generates in RL and what :func:`parse_tool_calls` reads back."""
    if not message.get("tool_calls"):
        return dict(message)
    turn = {k: v for k, v in message.items() if k != "reasoning_content"}
    text = render([{"role": "user", "content": "x"}, turn], default_mode="no_think")
    start = text.rindex(f"{IM_START}assistant\n") + len(f"{IM_START}assistant\n")
    rest = {k: v for k, v in message.items() if k != "tool_calls"}
    return {**rest, "content": text[start:].removesuffix(f"{IM_END}\n")}


def for_template(messages: Sequence[dict], tools: Any, template: str | None) -> tuple[list[dict], Any]:
    """A conversation and its tools as ``template`` can show them: where it drops the ``tools``
    argument, the tools go into the system message (:func:`with_tools`, as RL prompts do) and
    none are passed; where it drops ``tool_calls``, each call is written into its turn
    (:func:`calls_as_text`). Unchanged for a template that shows both."""
    messages = [dict(m) for m in messages]
    if tools and not template_shows_tools(template):
        messages, tools = with_tools(messages, tools), None
    if any(m.get("tool_calls") for m in messages) and not template_shows_tool_calls(template):
        messages = [calls_as_text(m) if m.get("role") == "assistant" else m for m in messages]
    return messages, tools
