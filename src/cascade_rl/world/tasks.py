"""The one shape every toy-world generator produces, and how it becomes data rows (issue 4).

A :class:`Task` is one request with its gold response (reasoning + answer) and the reference
fields its reward domain scores against. :func:`sft_row`, :func:`rl_row` turn it into the row
schemas of ``docs/data-formats.md`` so that the toy world and real datasets share one code path.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from cascade_rl.chat import THINK_CLOSE, THINK_OPEN, TOOL_CALL_CLOSE, TOOL_CALL_OPEN, Mode

#: SFT ``source`` values of docs/data-formats.md.
Source = Literal["general", "math", "code", "science", "tool", "swe"]


@dataclass(frozen=True)
class Task:
    """One toy-world request.

    ``prompt``: the messages before the assistant turn (no ``/think`` flag: the stage sets it);
    ``reasoning``: the gold thinking trace ('' when the task has none); ``answer``: the gold
    answer after ``</think>`` (``no_think_answer`` overrides it in non-thinking mode);
    ``reference``: the scorer's reference fields (``answer``, ``tests``, ...);
    ``tools``: JSON schemas shown in the system prompt; ``tool_calls``: the gold calls
    (``{"name", "arguments"}``) made after the answer text; ``kind``: the generator family (for
    per-family statistics); ``source``: the SFT source tag.
    """

    domain: str
    kind: str
    prompt: tuple[dict, ...]
    answer: str
    source: Source
    reasoning: str = ""
    no_think_answer: str | None = None
    reference: dict[str, Any] = field(default_factory=dict)
    tools: tuple[dict, ...] | None = None
    tool_calls: tuple[dict, ...] = ()

    @property
    def request(self) -> str:
        """The last user turn's text."""
        return next(m["content"] for m in reversed(self.prompt) if m["role"] == "user")

    def content(self, mode: Mode) -> str:
        """The assistant message's ``content`` in ``mode`` (tool calls not included)."""
        if mode == "no_think":
            return self.no_think_answer if self.no_think_answer is not None else self.answer
        return f"{THINK_OPEN}{self.reasoning}{THINK_CLOSE}{self.answer}"

    def response(self, mode: Mode) -> str:
        """The gold assistant text in ``mode``, as the chat template renders it."""
        return render_tool_calls(self.content(mode), self.tool_calls)


def render_tool_calls(content: str, calls: Sequence[dict]) -> str:
    """``content`` followed by ``calls`` the way the Cascade chat template writes them."""
    blocks = []
    for index, call in enumerate(calls):
        separator = "\n" if content or index else ""
        blocks.append(
            f'{separator}{TOOL_CALL_OPEN}\n{{"name": "{call["name"]}", "arguments": '
            f"{json.dumps(call['arguments'])}}}\n{TOOL_CALL_CLOSE}"
        )
    return content + "".join(blocks)


def assistant_message(task: Task, mode: Mode) -> dict[str, Any]:
    """The gold assistant message; tool calls go in ``tool_calls`` with JSON-encoded
    arguments (OpenAI style, which also keeps Arrow from merging argument schemas)."""
    message: dict[str, Any] = {"role": "assistant", "content": task.content(mode)}
    if task.tool_calls:
        message["tool_calls"] = [
            {"type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
            for c in task.tool_calls
        ]
    return message


def sft_row(task: Task, mode: Mode, row_id: str) -> dict[str, Any]:
    """An SFT row: the prompt with ``mode`` on its user turns plus the gold response."""
    messages = [dict(m, mode=mode) if m["role"] == "user" else dict(m) for m in task.prompt]
    messages.append(assistant_message(task, mode))
    row: dict[str, Any] = {"id": row_id, "messages": messages, "source": task.source}
    if task.tools:
        row["tools"] = list(task.tools)
    return row


def rl_row(task: Task, row_id: str) -> dict[str, Any]:
    """An RL-prompt / benchmark row: prompt, domain, reference fields and the generator
    family (``kind``, for per-family statistics); no mode flag."""
    row: dict[str, Any] = {
        "id": row_id,
        "prompt": [dict(m) for m in task.prompt],
        "domain": task.domain,
        "kind": task.kind,
    }
    row.update(task.reference)
    if task.tools:
        row["tools"] = list(task.tools)
    return row


def user(text: str) -> tuple[dict, ...]:
    """A one-turn prompt."""
    return ({"role": "user", "content": text},)


def pick(rng: random.Random, options: Sequence[Any]) -> Any:
    """``rng.choice`` that names the problem on an empty sequence."""
    if not options:
        raise ValueError("cannot pick from an empty sequence")
    return options[rng.randrange(len(options))]
