"""Structured output: does the answer follow the row's schema? (Nemotron-Cascade 2's multi-domain RL,
SPEC section 11; NVIDIA's ``structured_outputs`` resources server in NeMo Gym, whose row fields
``schema_str``, ``schema_type``, ``response_mode``, ``tool_name``, ``tool_payload_key`` this keeps.)

``score(response, schema_str=..., schema_type="json")``: 1 when the answer (the text after
``</think>``) parses in ``schema_type`` and the parsed value validates against ``schema_str``
made strict; else 0 with the failure kind in ``details["error_type"]`` and the message in
``details["error_message"]``:

==========================  ===========================================================================
``empty_response``          no answer text (also an unfinished thinking block)
``schema_error``            ``schema_str`` is not JSON (a schema the validator rejects is a
                            ``validation_error``, as in the reference)
``parse_error``             the answer is not a document of ``schema_type``
``validation_error``        it parses but does not satisfy the schema
``missing_tool_call``, ``multiple_tool_calls``, ``wrong_tool_name``,
``missing_tool_payload_key``   ``response_mode: tool_call`` rows: the payload is the arguments of the
                            answer's one ``<tool_call>`` (of ``tool_name`` when given; under
                            ``tool_payload_key`` when given)
==========================  ===========================================================================

**Parsing** is whole-document, as the reference's: ``json`` (``json.loads``: no code fences, no
prose around it), ``yaml`` (``yaml.safe_load``), ``xml`` (``xmltodict.parse``; leaf text is then
coerced to the schema's ``integer``, ``number`` and ``boolean`` types and repeated elements
unwrapped into arrays), ``csv`` (a header row, values coerced to the item schema's types) and
``toml`` (Python 3.11+).

**Strict schema** (NVIDIA's verifier): every object schema that has ``properties`` -- reached
through objects, not through lists such as ``anyOf`` or ``prefixItems``, exactly as the
reference walks it -- gets ``required`` = all its properties and ``additionalProperties: false``.
**Validation** uses ``jsonschema``'s Draft 2020-12 validator (the reference's OpenAPI 3.1
validator is that draft plus OpenAPI's ``discriminator``, which is not interpreted here); the
schema is checked first, formats are not asserted.
"""

from __future__ import annotations

import copy
import csv
import io
import json
from collections.abc import Mapping
from typing import Any

from cascade_rl.chat import parse_tool_calls, split_thinking
from cascade_rl.rewards.base import Score

SCHEMA_TYPES = ("json", "yaml", "xml", "toml", "csv")
RESPONSE_MODES = ("text", "tool_call")


class Failure(Exception):
    """Why a response fails: ``kind`` (``details["error_type"]``) and a message."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def score(
    response: str,
    *,
    schema_str: str,
    schema_type: str | None = "json",
    response_mode: str | None = "text",
    tool_name: str | None = None,
    tool_payload_key: str | None = None,
    prompt: Any = None,
) -> Score:
    """1.0 when the answer follows the row's strict schema (module docstring)."""
    kind = str(schema_type or "json").lower()
    mode = response_mode or "text"
    if kind not in SCHEMA_TYPES:
        raise ValueError(f"schema_type must be one of {', '.join(SCHEMA_TYPES)}, got {schema_type!r}")
    if mode not in RESPONSE_MODES:
        raise ValueError(f"response_mode must be one of {', '.join(RESPONSE_MODES)}, got {response_mode!r}")
    split = split_thinking(response or "")
    try:
        if mode == "tool_call":
            value = tool_payload(split.answer, tool_name, tool_payload_key)
            schema = strict_schema(schema_str)
        else:
            if not split.answer.strip():
                raise Failure("empty_response", "no answer text" if split.finished else "unfinished thinking")
            schema = strict_schema(schema_str)
            value = parse_document(split.answer, kind, schema)
        validate(value, schema)
    except Failure as failure:
        return Score(0.0, {"error_type": failure.kind, "error_message": str(failure)[:300], "schema_type": kind})
    return Score(1.0, {"error_type": None, "schema_type": kind})


def check_row(row: Mapping[str, Any]) -> None:
    """A row this scorer can judge: a known ``schema_type`` and ``response_mode``, and a
    ``schema_str`` that is JSON and a valid schema once made strict (ValueError names the field)."""
    kind = str(row.get("schema_type") or "json").lower()
    if kind not in SCHEMA_TYPES:
        raise ValueError(f"schema_type must be one of {', '.join(SCHEMA_TYPES)}, got {row.get('schema_type')!r}")
    if (row.get("response_mode") or "text") not in RESPONSE_MODES:
        raise ValueError(f"response_mode must be one of {', '.join(RESPONSE_MODES)}, got {row.get('response_mode')!r}")
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(strict_schema(row.get("schema_str")))
    except Failure as failure:
        raise ValueError(f"schema_str is not JSON: {failure}") from None
    except SchemaError as error:
        raise ValueError(f"schema_str is not a valid JSON schema: {error.message}") from None


def strict_schema(schema_str: Any) -> Any:
    """The schema of ``schema_str`` made strict as NVIDIA's verifier does (module docstring)."""
    try:
        schema = copy.deepcopy(schema_str) if isinstance(schema_str, Mapping) else json.loads(schema_str)
    except (TypeError, ValueError) as error:
        raise Failure("schema_error", str(error)) from None
    _make_strict(schema)
    return schema


def _make_strict(schema: Any) -> None:
    if isinstance(schema, dict):
        if "properties" in schema:
            schema["required"] = list(schema["properties"])
            schema["additionalProperties"] = False
        for value in schema.values():
            _make_strict(value)


def validate(value: Any, schema: Any) -> None:
    """Check the schema itself, then ``value`` against it (Draft 2020-12); :class:`Failure` with
    the most relevant error (``jsonschema``'s ``best_match``) when either fails."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    try:
        Draft202012Validator.check_schema(schema)
        error = best_match(Draft202012Validator(schema).iter_errors(value))
    except Exception as problem:  # noqa: BLE001 - the reference scores any failure here as a validation error
        raise Failure("validation_error", f"{type(problem).__name__}: {problem}") from None
    if error is not None:
        raise Failure("validation_error", f"ValidationError: {error.message}")


def parse_document(text: str, kind: str, schema: Any) -> Any:
    """The value of ``text`` as a ``kind`` document, coerced to the schema's types for XML and CSV."""
    try:
        if kind == "json":
            return json.loads(text)
        if kind == "yaml":
            import yaml

            return yaml.safe_load(text)
        if kind == "xml":
            import xmltodict

            parsed = xmltodict.parse(text)
        elif kind == "toml":
            import tomllib  # Python 3.11+

            return tomllib.loads(text)
        else:
            parsed = list(csv.DictReader(io.StringIO(text)))
    except Exception as error:  # noqa: BLE001 - any parser's failure is the response's
        raise Failure("parse_error", f"{type(error).__name__}: {error}") from None
    return coerce_xml(parsed, schema) if kind == "xml" else coerce_csv(parsed, schema)


def coerce_xml(data: Any, schema: Any) -> Any:
    """XML text (all leaves strings) turned into the schema's types: ``integer``, ``number``,
    ``boolean`` (``true``/``1``, ``false``/``0``) and ``string`` for an empty element; an array
    position unwraps xmltodict's ``{"item": [...]}`` wrapper and makes a single value a list.
    A value that does not convert is left for validation to reject."""
    if not isinstance(schema, dict) or "type" not in schema:
        return data
    kind = schema["type"]
    if kind == "object" and isinstance(data, dict):
        properties = schema.get("properties", {})
        return {key: coerce_xml(value, properties[key]) if key in properties else value for key, value in data.items()}
    if kind == "array":
        if isinstance(data, dict) and len(data) == 1:
            data = next(iter(data.values()))
        if not isinstance(data, list):
            data = [] if data is None else [data]
        return [coerce_xml(item, schema.get("items", {})) for item in data]
    if data is None and kind == "string":
        return ""
    return _coerced(data, kind) if isinstance(data, str) else data


def _coerced(text: str, kind: Any) -> Any:
    """``text`` as JSON-schema type ``kind`` when it converts, else ``text`` unchanged."""
    try:
        if kind == "integer":
            return int(text)
        if kind == "number":
            return float(text)
    except ValueError:
        return text
    if kind == "boolean" and text.lower() in ("true", "1", "false", "0"):
        return text.lower() in ("true", "1")
    return text


def coerce_csv(rows: list[dict[str, Any]], schema: Any) -> list[dict[str, Any]]:
    """CSV rows with each value turned into its column's type in the item schema (a type list
    tries each; an empty value is null where the list allows null)."""
    items = schema.get("items", schema) if isinstance(schema, dict) else {}
    properties = items.get("properties", {}) if isinstance(items, dict) else {}
    return [
        {key: _csv_value(value, properties.get(key, {}).get("type", "string")) for key, value in row.items()}
        for row in rows
    ]


def _csv_value(value: Any, kind: Any) -> Any:
    if isinstance(kind, list):
        if value in (None, "") and "null" in kind:
            return None
        for option in (k for k in kind if k != "null"):
            converted = _csv_value(value, option)
            if not isinstance(converted, str) or option == "string":
                return converted
        return value
    return value if value in (None, "") else _coerced(value, kind)


def tool_payload(answer: str, tool_name: str | None, payload_key: str | None) -> Any:
    """The value a ``tool_call`` row judges: the arguments of the answer's one call. As a
    tool-call parser reads the answer, a block that is not a JSON call leaves the answer with no
    call at all; arguments are taken as written (a JSON text stays a string)."""
    calls = parse_tool_calls(answer)
    if not calls or any("invalid" in call for call in calls):
        raise Failure("missing_tool_call", "no well-formed <tool_call> in the answer")
    if len(calls) > 1:
        names = ", ".join(str(call.get("name")) for call in calls)
        raise Failure("multiple_tool_calls", f"expected exactly one tool call, got: {names}")
    call = calls[0]
    if tool_name and call.get("name") != tool_name:
        raise Failure("wrong_tool_name", f"expected tool {tool_name!r}, got: {call.get('name')}")
    arguments = call.get("arguments", {})
    if payload_key:
        if not isinstance(arguments, dict) or payload_key not in arguments:
            raise Failure("missing_tool_payload_key", f"missing tool payload key: {payload_key}")
        return arguments[payload_key]
    return arguments
