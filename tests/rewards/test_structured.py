"""Structured output as NVIDIA's verifier scores it: strict schema, whole-document parsing per
``schema_type``, jsonschema validation, the failure kind in the details."""

import json

import pytest

from cascade_rl.rewards.structured import check_row, score, strict_schema

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "skills": {"type": "array", "items": {"type": "string"}},
        "address": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
SCHEMA = json.dumps(PERSON)
GOOD = {"name": "Ana", "age": 31, "skills": ["sql"], "address": {"city": "Oslo"}}


def kind(response, **row):
    result = score(response, schema_str=row.pop("schema_str", SCHEMA), **row)
    return result.details["error_type"], result.reward


def test_the_schema_is_made_strict_as_nvidias_verifier_does():
    strict = strict_schema(json.dumps({**PERSON, "anyOf": [{"properties": {"x": {"type": "string"}}}]}))
    assert strict["required"] == ["name", "age", "skills", "address"] and strict["additionalProperties"] is False
    assert strict["properties"]["address"]["required"] == ["city"]
    assert "required" not in strict["anyOf"][0]  # the reference does not walk into lists
    assert kind(json.dumps(GOOD)) == (None, 1.0)
    assert kind(json.dumps({k: v for k, v in GOOD.items() if k != "skills"})) == ("validation_error", 0.0)
    assert kind(json.dumps({**GOOD, "email": "a@b.c"})) == ("validation_error", 0.0)
    assert kind(json.dumps({**GOOD, "address": {}})) == ("validation_error", 0.0)
    assert kind(json.dumps({**GOOD, "age": 31.0})) == (None, 1.0)  # 31.0 is an integer in Draft 2020-12
    assert kind(json.dumps({**GOOD, "age": "31"})) == ("validation_error", 0.0)


def test_json_answers_are_whole_documents():
    assert kind("<think>plan</think>\n" + json.dumps(GOOD)) == (None, 1.0)
    assert kind("```json\n" + json.dumps(GOOD) + "\n```") == ("parse_error", 0.0)
    assert kind("Here it is: " + json.dumps(GOOD)) == ("parse_error", 0.0)
    assert kind("") == ("empty_response", 0.0)
    assert kind("<think>" + json.dumps(GOOD)) == ("empty_response", 0.0)  # unfinished thinking
    assert kind(json.dumps(GOOD), schema_str="{not json") == ("schema_error", 0.0)
    assert kind(json.dumps(GOOD), schema_str='{"type": 5}') == ("validation_error", 0.0)  # an invalid schema


def test_yaml_and_xml_where_the_row_says_so():
    yaml_text = "name: Ana\nage: 31\nskills:\n  - sql\naddress:\n  city: Oslo\n"
    assert kind(yaml_text, schema_type="yaml") == (None, 1.0)
    assert kind(yaml_text) == ("parse_error", 0.0)  # the row says json
    assert kind("name: [unclosed", schema_type="yaml") == ("parse_error", 0.0)
    wrapped = json.dumps({"type": "object", "properties": {"person": PERSON}})
    xml = (
        "<person><name>Ana</name><age>31</age><skills><s>sql</s></skills><address><city>Oslo</city></address></person>"
    )
    assert kind(xml, schema_type="xml", schema_str=wrapped) == (None, 1.0)  # text coerced, one item unwrapped
    assert kind(xml.replace("31", "thirty"), schema_type="xml", schema_str=wrapped) == ("validation_error", 0.0)
    assert kind("<person><name>Ana</person>", schema_type="xml", schema_str=wrapped) == ("parse_error", 0.0)
    flags = json.dumps({"type": "object", "properties": {"r": {"type": "object", "properties": {
        "ok": {"type": "boolean"}, "note": {"type": "string"}}}}})  # fmt: skip
    assert kind("<r><ok>true</ok><note/></r>", schema_type="xml", schema_str=flags) == (None, 1.0)


def test_csv_rows_are_coerced_to_the_item_types():
    table = json.dumps({"type": "array", "items": {"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": ["integer", "null"]}}}})  # fmt: skip
    assert kind("name,age\nAna,31\nBo,\n", schema_type="csv", schema_str=table) == (None, 1.0)
    assert kind("name,age\nAna,old\n", schema_type="csv", schema_str=table) == ("validation_error", 0.0)


def test_tool_call_rows_judge_the_calls_payload():
    row = {"response_mode": "tool_call", "tool_name": "record_person", "tool_payload_key": "extraction"}

    def answer(*calls):
        return "".join(f"<tool_call>{json.dumps(call)}</tool_call>" for call in calls)

    good = {"name": "record_person", "arguments": {"extraction": GOOD}}
    assert kind(answer(good), **row) == (None, 1.0)
    assert kind("no call", **row) == ("missing_tool_call", 0.0)
    assert kind(answer(good, good), **row) == ("multiple_tool_calls", 0.0)
    assert kind(answer({**good, "name": "other"}), **row) == ("wrong_tool_name", 0.0)
    assert kind(answer({**good, "arguments": {"data": GOOD}}), **row) == ("missing_tool_payload_key", 0.0)
    assert kind(answer({**good, "arguments": {"extraction": {"name": "Ana"}}}), **row) == ("validation_error", 0.0)
    assert kind("<tool_call>{oops</tool_call>", **row) == ("missing_tool_call", 0.0)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"schema_str": "{oops"}, "schema_str is not JSON"),
        ({"schema_str": '{"type": "object", "properties": {"a": {"type": 7}}}'}, "not a valid JSON schema"),
        ({"schema_str": SCHEMA, "schema_type": "ini"}, "schema_type must be one of"),
        ({"schema_str": SCHEMA, "response_mode": "voice"}, "response_mode must be one of"),
    ],
)
def test_rows_that_cannot_be_read_name_the_field(row, message):
    with pytest.raises(ValueError, match=message):
        check_row(row)
    check_row({"schema_str": SCHEMA, "schema_type": "YAML"})
