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

**Several acceptable values** (BFCL's AST checker): an item may instead be written in BFCL's
``ground_truth`` shape, ``{"get_weather": {"city": ["Paris", "Paris, France"], "unit": ["", "celsius"]}}``
-- the function name as the only key, each argument with the list of its acceptable values:

* the call's value must equal one of them; ``""`` in the list means the argument may be left
  out (BFCL's optional parameters); an argument the list does not name fails the call;
* strings compare as BFCL standardises them: lower case, without spaces and ``,./-_*^``
  (``"New York"`` == ``"new-york"``); numbers and booleans as above; a list value must equal
  one acceptable list element-wise; a nested object whose values are all lists is itself a
  set of acceptable values per key (BFCL's dict checker).

Calls are paired by a maximum matching, so one call acceptable to two expected calls never
hides a full match.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cascade_rl.chat import parse_tool_calls, split_thinking
from cascade_rl.rewards.base import Score


def score(response: str, *, expected_calls: Sequence[Mapping[str, Any]], prompt: Any = None) -> Score:
    """1.0 when the answer's tool calls match ``expected_calls`` (see the module docstring)."""
    expected = [_expected_call(call, f"expected_calls[{i}]") for i, call in enumerate(_as_list(expected_calls))]
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


def _expected_call(call: Any, where: str) -> tuple[str, Any, bool]:
    """(name, arguments, several acceptable values?) of an expected call in either shape."""
    if _is_ground_truth(call):
        ((name, arguments),) = call.items()
        return name, dict(arguments), True
    return (*_normalise_call(call, where), False)


def _is_ground_truth(call: Any) -> bool:
    """BFCL's shape: one key, the function name, mapping each argument to a list of values."""
    if not isinstance(call, Mapping) or len(call) != 1:
        return False
    ((name, arguments),) = call.items()
    return (
        name not in ("name", "function", "arguments")
        and isinstance(arguments, Mapping)
        and all(isinstance(values, list) for values in arguments.values())
    )


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


def _matched(made: list[tuple[str, Any]], expected: list[tuple[str, Any, bool]]) -> int:
    """The most expected calls that can each be paired with a distinct made call that fits it
    (maximum bipartite matching by augmenting paths; a handful of calls)."""
    fits = [[j for j, call in enumerate(made) if _fits(call, want)] for want in expected]
    partner: dict[int, int] = {}  # made index -> expected index

    def augment(i: int, seen: set[int]) -> bool:
        for j in fits[i]:
            if j not in seen:
                seen.add(j)
                if j not in partner or augment(partner[j], seen):
                    partner[j] = i
                    return True
        return False

    return sum(augment(i, set()) for i in range(len(expected)))


def _fits(call: tuple[str, Any], want: tuple[str, Any, bool]) -> bool:
    (name, arguments), (wanted_name, wanted, several) = call, want
    if name != wanted_name:
        return False
    return acceptable_arguments(arguments, wanted) if several else same_value(arguments, wanted)


def acceptable_arguments(arguments: Mapping[str, Any], acceptable: Mapping[str, Sequence[Any]]) -> bool:
    """BFCL's check of one call's arguments against lists of acceptable values (module docstring)."""
    if set(arguments) - set(acceptable):
        return False
    for key, values in acceptable.items():
        if key not in arguments:
            if "" not in values:
                return False
        elif not any(_acceptable_value(arguments[key], value) for value in values):
            return False
    return True


def _acceptable_value(actual: Any, value: Any) -> bool:
    nested = isinstance(value, Mapping) and value and all(isinstance(v, list) for v in value.values())
    if nested and isinstance(actual, Mapping):
        return acceptable_arguments(actual, value)
    return same_value(actual, value, bfcl_string)


def bfcl_string(text: str) -> str:
    """A string as BFCL's checker compares it: lower case, without spaces and ``,./-_*^``."""
    return re.sub(r"[ ,./\-_*^]", "", text).lower().replace("'", '"')


def _folded(text: str) -> str:
    return text.strip().casefold()


def same_value(actual: Any, expected: Any, normalise: Callable[[str], str] = _folded) -> bool:
    """JSON-value equality with the tolerances of the module docstring; ``normalise`` maps
    strings before they are compared (default: stripped and case-folded)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return float(actual) == float(expected)
    if isinstance(expected, str) and isinstance(actual, str):
        return normalise(actual) == normalise(expected)
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        return set(actual) == set(expected) and all(same_value(actual[k], expected[k], normalise) for k in expected)
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)):
        return len(actual) == len(expected) and all(same_value(a, e, normalise) for a, e in zip(actual, expected))
    return actual == expected
