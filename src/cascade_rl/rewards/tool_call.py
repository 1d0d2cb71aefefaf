"""Tool-call accuracy: does the answer make exactly the expected function calls? (SPEC
sections 2 and 9, BFCL-style tool calling; the toy world's ``tool-call`` benchmark.)

``score(response, expected_calls=[...])`` reads the answer (the text after ``</think>``;
unfinished thinking scores 0), parses its ``<tool_call>`` blocks with
:func:`cascade_rl.chat.parse_tool_calls` and compares them with ``expected_calls``:

* reward 1 when the calls match one to one, in any order (parallel calls are unordered, as in
  BFCL's AST checker): same function name and the same arguments;
* reward 0 otherwise: a missing, extra or malformed call, a wrong name or argument; an answer
  that calls tools when none are expected (``expected_calls == []``), or the reverse.

Arguments are compared as JSON values: the same keys; strings equal after stripping and case
folding; numbers equal by value (``3 == 3.0``; booleans are not numbers); lists element-wise,
objects key-wise. ``expected_calls`` items are ``{"name", "arguments"}`` or OpenAI-style
``{"function": {"name", "arguments"}}``; arguments may be a dict or a JSON string.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from cascade_rl.chat import parse_tool_calls, split_thinking
from cascade_rl.rewards.base import Score


def score(response: str, *, expected_calls: Sequence[Mapping[str, Any]], prompt: Any = None) -> Score:
    """1.0 when the answer's tool calls match ``expected_calls`` (see the module docstring)."""
    expected = [_normalise_call(call, f"expected_calls[{i}]") for i, call in enumerate(_as_list(expected_calls))]
    split = split_thinking(response)
    if not split.finished:
        return Score(
            0.0, {"error": "unfinished thinking: no answer after <think>", "expected": len(expected), "parsed": 0}
        )
    calls = parse_tool_calls(split.answer)
    details: dict[str, Any] = {"expected": len(expected), "parsed": len(calls)}
    invalid = [call["invalid"] for call in calls if "invalid" in call]
    if invalid:
        details["error"] = f"malformed <tool_call> block: {invalid[0][:80]!r}"
        return Score(0.0, details)
    try:
        made = [_normalise_call(call, "answer call") for call in calls]
    except ValueError as error:
        details["error"] = str(error)
        return Score(0.0, details)
    details["matched"] = _matched(made, expected)
    return Score(1.0 if details["matched"] == len(expected) == len(made) else 0.0, details)


def _as_list(expected_calls: Any) -> list:
    if isinstance(expected_calls, str):
        try:
            expected_calls = json.loads(expected_calls)
        except json.JSONDecodeError as error:
            raise ValueError(f"expected_calls is not valid JSON: {error}") from None
    if not isinstance(expected_calls, (list, tuple)):
        raise ValueError(f"expected_calls must be a list of calls, got {type(expected_calls).__name__}")
    return list(expected_calls)


def _normalise_call(call: Any, where: str) -> tuple[str, Any]:
    """(name, arguments as a dict) of a call given in any accepted shape; ValueError naming
    the problem otherwise."""
    if not isinstance(call, Mapping):
        raise ValueError(f"{where} must be an object with 'name' and 'arguments', got {call!r}")
    function = call.get("function", call)
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where} has no function name: {call!r}")
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            raise ValueError(f"{where} ({name}): arguments are not valid JSON: {arguments[:80]!r}") from None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise ValueError(f"{where} ({name}): arguments must be an object, got {arguments!r}")
    return name, dict(arguments)


def _matched(made: list[tuple[str, Any]], expected: list[tuple[str, Any]]) -> int:
    """How many expected calls find a distinct equal call among ``made``."""
    remaining = list(made)
    count = 0
    for name, arguments in expected:
        for index, (other_name, other_arguments) in enumerate(remaining):
            if other_name == name and same_value(other_arguments, arguments):
                del remaining[index]
                count += 1
                break
    return count


def same_value(actual: Any, expected: Any) -> bool:
    """JSON-value equality with the tolerances of the module docstring."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return float(actual) == float(expected)
    if isinstance(expected, str) and isinstance(actual, str):
        return actual.strip().casefold() == expected.strip().casefold()
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        return set(actual) == set(expected) and all(same_value(actual[k], expected[k]) for k in expected)
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)):
        return len(actual) == len(expected) and all(same_value(a, e) for a, e in zip(actual, expected))
    return actual == expected
