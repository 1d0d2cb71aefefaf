"""The row shapes every stage reads (docs/data-formats.md): chat messages, SFT rows and
preference pairs, normalised from the layouts users bring (SPEC sections 3-4). Pure functions
of one row; a malformed row raises ValueError with the reason (the loaders count and skip it).
"""

from __future__ import annotations

import json
from typing import Any

ROLES = ("system", "user", "assistant", "tool")


def as_messages(value: Any, what: str = "prompt") -> list[dict]:
    """A chat given as a string (one user turn) or a list of ``{role, content}`` dicts."""
    if isinstance(value, str):
        if not value.strip():
            raise ValueError(f"empty {what}")
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise ValueError(f"{what} is not a string or a list of messages")
    messages = []
    for message in value:
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise ValueError(f"{what} has a message without a valid role ({'/'.join(ROLES)})")
        content = message.get("content")
        if content is None and not message.get("tool_calls"):
            raise ValueError(f"{what} has a message without content")
        messages.append(_clean_message(message))
    return messages


def _clean_message(message: dict) -> dict:
    """Keep the keys the template reads; tool-call arguments become JSON text so that rows
    with different tools share one Arrow schema without null-filled argument fields."""
    out = {"role": message["role"], "content": message.get("content") or ""}
    if message.get("mode") in ("think", "no_think"):
        out["mode"] = message["mode"]
    if isinstance(message.get("reasoning_content"), str) and message["reasoning_content"]:
        out["content"] = f"<think>{message['reasoning_content']}</think>{out['content']}"
    if message.get("tool_calls"):
        calls = []
        for call in message["tool_calls"]:
            function = call.get("function", call)
            arguments = function.get("arguments", {})
            calls.append(
                {
                    "function": {
                        "name": str(function.get("name", "")),
                        "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                    }
                }
            )
        out["tool_calls"] = calls
    return out


def normalise_sft(row: dict) -> dict:
    messages = as_messages(row.get("messages"), "messages")
    if not any(m["role"] == "assistant" for m in messages):
        raise ValueError("messages have no assistant turn to learn")
    out = {"messages": messages, "source": str(row.get("source") or "general")}
    tools = row.get("tools")
    if tools:
        if not isinstance(tools, list):
            raise ValueError("tools is not a list")
        # One JSON text per row (TRL's SFTTrainer reads it back): rows with different tools would
        # otherwise be merged into one Arrow schema with null-filled fields.
        out["tools"] = json.dumps([json.loads(t) if isinstance(t, str) else t for t in tools])
    return out


def normalise_preference(row: dict) -> dict:
    """TRL's (prompt, chosen, rejected) or HelpSteer3's (context, response1, response2,
    overall_preference; ties dropped as in the paper)."""
    if "overall_preference" in row:
        preference = row["overall_preference"]
        if not isinstance(preference, (int, float)):
            raise ValueError("overall_preference is not a number")
        if preference == 0:
            raise ValueError("tie (overall_preference 0)")
        first, second = row.get("response1"), row.get("response2")
        chosen, rejected = (second, first) if preference > 0 else (first, second)
        prompt = row.get("context")
    else:
        prompt, chosen, rejected = row.get("prompt"), row.get("chosen"), row.get("rejected")
    prompt_messages = as_messages(prompt, "prompt")
    return {"prompt": prompt_messages, "chosen": _answer(chosen, "chosen"), "rejected": _answer(rejected, "rejected")}


def _answer(value: Any, what: str) -> list[dict]:
    if isinstance(value, str):
        if not value.strip():
            raise ValueError(f"empty {what}")
        return [{"role": "assistant", "content": value}]
    messages = as_messages(value, what)
    if messages[-1]["role"] != "assistant":
        raise ValueError(f"{what} does not end with an assistant message")
    return messages
