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
  set of acceptable values per key (BFCL's dict checker), also as an element of an acceptable
  list (BFCL's list of dicts, e.g. ``conditions``: ``[[{"field": ["age"], ...}]]`` accepts
  ``[{"field": "age", ...}]``, in order, and not ``[{"field": ["age"], ...}]``).

**Types** (``strict_types``, default true: BFCL's AST checker). With the row's ``tools`` (the
function schemas, chat-completions or flat; JSON-schema or BFCL type names), each argument the
answer gives must have its parameter's type before values are compared: ``integer`` an int
(``10.0`` and ``"10"`` fail), ``number`` / ``float`` an int or a float, ``boolean`` a bool
(``"true"`` fails), ``string`` a string, ``array`` a list whose items have the ``items`` type
(there a float item must be a float: BFCL allows an int for a float only at the top level),
``object`` an object. As in BFCL, a value of the type the expected value itself is written in
passes (a variable name written where the schema wants a number), optional arguments
(``""`` acceptable) skip the item check, and nothing deeper than an array's items is typed.
The answer's ``arguments`` must be a JSON object, not a JSON string holding one. A function
without a schema in ``tools`` is compared by value only. ``strict_types: false`` is the
lenient reading: no type checks (``10.0 == 10``) and JSON-string arguments are parsed.
Details add ``type_error`` naming the first argument of a wrong type.

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


def score(
    response: str,
    *,
    expected_calls: Sequence[Mapping[str, Any]],
    tools: Any = None,
    strict_types: Any = True,
    prompt: Any = None,
) -> Score:
    """1.0 when the answer's tool calls match ``expected_calls`` (see the module docstring)."""
    strict = _flag(strict_types, "strict_types")
    expected = [_expected_call(call, f"expected_calls[{i}]") for i, call in enumerate(_as_list(expected_calls))]
    schemas = function_schemas(tools) if strict else {}
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
        made = [_normalise_call(call, "answer call", json_text=not strict) for call in calls]
    except ValueError as error:
        details["error"] = str(error)
        return Score(0.0, details)
    details["matched"] = _matched(made, expected, schemas)
    reward = 1.0 if details["matched"] == len(expected) == len(made) else 0.0
    if not reward and schemas:
        problem = _first_type_error(made, expected, schemas)
        if problem:
            details["type_error"] = problem
    return Score(reward, details)


def _flag(value: Any, name: str) -> bool:
    """A boolean option given as a bool, or as text from a command line ("false", "0")."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    raise ValueError(f"{name} must be true or false, got {value!r}")


def function_schemas(tools: Any) -> dict[str, Mapping[str, Any]]:
    """``{function name: parameters schema}`` of a row's ``tools`` (chat-completions schemas,
    the flat Responses-API form or BFCL function docs; a JSON text of either)."""
    if tools is None or tools == "":
        return {}
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except json.JSONDecodeError as error:
            raise ValueError(f"tools is not valid JSON: {error}") from None
    if isinstance(tools, Mapping):
        tools = [tools]
    if not isinstance(tools, (list, tuple)):
        raise ValueError(f"tools must be a list of function schemas, got {type(tools).__name__}")
    schemas = {}
    for tool in tools:
        function = tool.get("function", tool) if isinstance(tool, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            parameters = function.get("parameters")
            if isinstance(parameters, Mapping):
                schemas[function["name"]] = parameters
    return schemas


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


def _normalise_call(call: Any, where: str, *, json_text: bool = True) -> tuple[str, Any]:
    """(name, arguments as a dict) of a call given in any accepted shape; ValueError naming
    the problem otherwise. ``json_text=False`` refuses arguments given as a JSON string."""
    if not isinstance(call, Mapping):
        raise ValueError(f"{where} must be an object with 'name' and 'arguments', got {call!r}")
    function = call.get("function", call)
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where} has no function name: {call!r}")
    arguments = function.get("arguments", {})
    if isinstance(arguments, str) and not json_text:
        raise ValueError(f"{where} ({name}): arguments are a JSON string, not an object (strict_types)")
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


def _matched(
    made: list[tuple[str, Any]], expected: list[tuple[str, Any, bool]], schemas: Mapping[str, Mapping] | None = None
) -> int:
    """The most expected calls that can each be paired with a distinct made call that fits it
    (maximum bipartite matching by augmenting paths; a handful of calls)."""
    fits = [[j for j, call in enumerate(made) if _fits(call, want, schemas or {})] for want in expected]
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


def _fits(call: tuple[str, Any], want: tuple[str, Any, bool], schemas: Mapping[str, Mapping]) -> bool:
    (name, arguments), (wanted_name, wanted, several) = call, want
    if name != wanted_name:
        return False
    if name in schemas and type_error(arguments, schemas[name], _acceptable_lists(want)):
        return False
    return acceptable_arguments(arguments, wanted) if several else same_value(arguments, wanted)


def _acceptable_lists(want: tuple[str, Any, bool]) -> dict[str, list]:
    """Each argument's acceptable values (an exact expected call has one per argument)."""
    _, wanted, several = want
    return {key: list(values) if several else [values] for key, values in wanted.items()}


def _first_type_error(
    made: list[tuple[str, Any]], expected: list[tuple[str, Any, bool]], schemas: Mapping[str, Mapping]
) -> str | None:
    for name, arguments in made:
        if name in schemas:
            wanted = next((_acceptable_lists(want) for want in expected if want[0] == name), {})
            problem = type_error(arguments, schemas[name], wanted)
            if problem:
                return f"{name}: {problem}"
    return None


#: JSON-schema and BFCL type names -> the kind of JSON value they take
_KINDS = {
    **dict.fromkeys(("string", "str", "any", "char"), "string"),
    **dict.fromkeys(("integer", "int", "long", "short", "byte"), "integer"),
    **dict.fromkeys(("number", "float", "double"), "number"),
    **dict.fromkeys(("boolean", "bool"), "boolean"),
    **dict.fromkeys(("array", "list", "tuple", "arraylist"), "array"),
    **dict.fromkeys(("object", "dict", "hashmap"), "object"),
    "null": "null",
}


def _kinds(declared: Any) -> set[str]:
    names = declared if isinstance(declared, list) else [declared]
    return {_KINDS[n.lower()] for n in names if isinstance(n, str) and n.lower() in _KINDS}


def _has_kind(value: Any, kind: str, *, item: bool = False) -> bool:
    if kind == "integer":
        return type(value) is int
    if kind == "number":  # BFCL converts an int to a float for a float parameter, not inside a list
        return type(value) is float or (type(value) is int and not item)
    if kind == "boolean":
        return type(value) is bool
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, Mapping)
    return value is None  # null


def _written_as(value: Any, acceptable: Sequence[Any]) -> bool:
    """BFCL's variable rule: the value has the type of the first acceptable value (not ``""``)."""
    first = next((v for v in acceptable if v != ""), None)
    return first is not None and type(value) is type(first)


def type_error(
    arguments: Mapping[str, Any], parameters: Mapping[str, Any], acceptable: Mapping[str, Sequence[Any]]
) -> str | None:
    """Why ``arguments`` do not have the types of the function's ``parameters`` schema, as
    BFCL's AST checker reads them (module docstring); None when they do. ``acceptable`` maps
    each argument to its acceptable values."""
    properties = parameters.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    for key, value in arguments.items():
        schema = properties.get(key)
        kinds = _kinds(schema.get("type")) if isinstance(schema, Mapping) else set()
        if not kinds:
            continue
        values = list(acceptable.get(key) or [])
        if not any(_has_kind(value, kind) for kind in kinds):
            if _written_as(value, values):
                continue
            return f"argument {key!r} must be {schema['type']}, got {_json_type(value)} {json.dumps(value)[:40]}"
        items = schema.get("items")
        item_kinds = _kinds(items.get("type")) if "array" in kinds and isinstance(items, Mapping) else set()
        if item_kinds and isinstance(value, list) and not _items_typed(value, item_kinds, values):
            return f"argument {key!r} must be a list of {items['type']}, got {json.dumps(value)[:40]}"
    return None


def _items_typed(items: list, kinds: set[str], acceptable: list) -> bool:
    """BFCL's one-level check of a list's items: fine against one acceptable list, or when an
    acceptable value is not a list at all (``""``: the argument is optional)."""
    for candidate in acceptable or [None]:
        if not isinstance(candidate, list):
            return candidate is not None or all(any(_has_kind(i, k, item=True) for k in kinds) for i in items)
        if all(any(_has_kind(i, k, item=True) for k in kinds) or _written_as(i, candidate) for i in items):
            return True
    return False


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, Mapping):
        return "object"
    return {int: "integer", float: "number", str: "string", list: "array", type(None): "null"}.get(
        type(value), type(value).__name__
    )


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
    if _is_acceptable_object(value) and isinstance(actual, Mapping):
        return acceptable_arguments(actual, value)
    if isinstance(value, list) and isinstance(actual, list) and any(_is_acceptable_object(v) for v in value):
        # BFCL's list of dicts: element by element, in order, each object against its acceptable values
        return len(actual) == len(value) and all(_acceptable_value(a, v) for a, v in zip(actual, value))
    return same_value(actual, value, bfcl_string)


def _is_acceptable_object(value: Any) -> bool:
    """An object of a BFCL ground truth: each key maps to its list of acceptable values."""
    return isinstance(value, Mapping) and bool(value) and all(isinstance(v, list) for v in value.values())


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
