"""Tool-call accuracy: the answer's calls must match the expected calls one to one."""

import pytest

from cascade_rl.rewards.tool_call import same_value, score

WEATHER = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
TIME = {"name": "get_time", "arguments": {"city": "Rome"}}


def call(name, arguments_json):
    return f'<tool_call>\n{{"name": "{name}", "arguments": {arguments_json}}}\n</tool_call>'


PARIS = call("get_weather", '{"city": "Paris", "unit": "celsius"}')
ROME = call("get_time", '{"city": "Rome"}')

CASES = [
    ("exact call", PARIS, [WEATHER], 1.0),
    ("after thinking", f"<think>weather needed</think>{PARIS}", [WEATHER], 1.0),
    ("text around the call", f"Let me check.\n{PARIS}", [WEATHER], 1.0),
    ("parallel calls in any order", f"{ROME}\n{PARIS}", [WEATHER, TIME], 1.0),
    ("string case and spaces ignored", call("get_weather", '{"city": " paris ", "unit": "Celsius"}'), [WEATHER], 1.0),
    ("int equals float", call("convert", '{"amount": 3.0}'), [{"name": "convert", "arguments": {"amount": 3}}], 1.0),
    ("no call expected, none made", "Owls hunt at night.", [], 1.0),
    (
        "OpenAI-style expected call with JSON arguments",
        PARIS,
        [{"function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'}}],
        1.0,
    ),
    ("wrong argument value", call("get_weather", '{"city": "Rome", "unit": "celsius"}'), [WEATHER], 0.0),
    ("missing argument", call("get_weather", '{"city": "Paris"}'), [WEATHER], 0.0),
    ("extra argument", call("get_time", '{"city": "Rome", "unit": "x"}'), [TIME], 0.0),
    ("wrong function", call("get_time", '{"city": "Paris", "unit": "celsius"}'), [WEATHER], 0.0),
    ("one of two parallel calls", PARIS, [WEATHER, TIME], 0.0),
    ("duplicate call", f"{PARIS}\n{PARIS}", [WEATHER], 0.0),
    ("call when none expected", PARIS, [], 0.0),
    ("no call when one expected", "It is sunny in Paris.", [WEATHER], 0.0),
    ("malformed JSON", '<tool_call>\n{"name": "get_weather", "arguments": {city}}\n</tool_call>', [WEATHER], 0.0),
    ("call only inside the thinking", f"<think>{PARIS}</think>Done.", [WEATHER], 0.0),
    ("unfinished thinking", f"<think>{PARIS}", [WEATHER], 0.0),
    ("bool is not a number", call("f", '{"x": true}'), [{"name": "f", "arguments": {"x": 1}}], 0.0),
]


@pytest.mark.parametrize("name,response,expected,reward", CASES, ids=[c[0] for c in CASES])
def test_table(name, response, expected, reward):
    assert score(response, expected_calls=expected).reward == reward


def test_details_say_what_was_parsed_and_matched():
    result = score(PARIS, expected_calls=[WEATHER, TIME])
    assert result.details == {"expected": 2, "parsed": 1, "matched": 1}
    assert "malformed" in score("<tool_call>nope</tool_call>", expected_calls=[WEATHER]).details["error"]


@pytest.mark.parametrize(
    "bad,message",
    [
        ("not json", "not valid JSON"),
        ({"name": "f"}, "must be a list"),
        ([{"arguments": {}}], "no function name"),
        ([{"name": "f", "arguments": "[1"}], "arguments are not valid JSON"),
        ([{"name": "f", "arguments": [1]}], "must be an object"),
    ],
)
def test_bad_expected_calls_name_the_problem(bad, message):
    with pytest.raises(ValueError, match=message):
        score(PARIS, expected_calls=bad)


def test_nested_values_compare_recursively():
    assert same_value({"a": [1, "X "]}, {"a": [1.0, "x"]})
    assert not same_value({"a": [1, 2]}, {"a": [2, 1]})
    assert not same_value(None, "")


# BFCL's ground-truth shape: {function: {argument: [acceptable values]}}; "" = may be left out
BFCL_WEATHER = {"get_weather": {"city": ["Paris", "Paris, France"], "unit": ["", "celsius"]}}
BFCL_TIME = {"get_time": {"city": ["Rome"]}}

ACCEPTABLE = [
    ("first acceptable value", call("get_weather", '{"city": "Paris"}'), [BFCL_WEATHER], 1.0),
    ("second acceptable value", call("get_weather", '{"city": "Paris, France"}'), [BFCL_WEATHER], 1.0),
    ("optional argument given", call("get_weather", '{"city": "Paris", "unit": "celsius"}'), [BFCL_WEATHER], 1.0),
    ("BFCL string standardisation", call("get_weather", '{"city": "paris-france"}'), [BFCL_WEATHER], 1.0),
    ("parallel, any order", ROME + "\n" + call("get_weather", '{"city": "Paris"}'), [BFCL_WEATHER, BFCL_TIME], 1.0),
    ("value not acceptable", call("get_weather", '{"city": "Lyon"}'), [BFCL_WEATHER], 0.0),
    (
        "optional argument with a wrong value",
        call("get_weather", '{"city": "Paris", "unit": "kelvin"}'),
        [BFCL_WEATHER],
        0.0,
    ),
    ("required argument missing", call("get_weather", '{"unit": "celsius"}'), [BFCL_WEATHER], 0.0),
    ("argument the ground truth does not name", call("get_time", '{"city": "Rome", "tz": "CET"}'), [BFCL_TIME], 0.0),
    (
        "list value: one acceptable list, in order",
        call("mean", '{"xs": [1, 2.0]}'),
        [{"mean": {"xs": [[1, 2], [2, 1, 0]]}}],
        1.0,
    ),
    ("list value in another order", call("mean", '{"xs": [2, 1]}'), [{"mean": {"xs": [[1, 2]]}}], 0.0),
    (
        "nested object of acceptable values",
        call("book", '{"when": {"day": "Mon", "hour": 9}}'),
        [{"book": {"when": [{"day": ["Mon", "Monday"], "hour": [9, 10]}]}}],
        1.0,
    ),
    (
        "nested object, value not acceptable",
        call("book", '{"when": {"day": "Tue", "hour": 9}}'),
        [{"book": {"when": [{"day": ["Mon", "Monday"], "hour": [9, 10]}]}}],
        0.0,
    ),
    ("function without arguments", call("now", "{}"), [{"now": {}}], 1.0),
]


@pytest.mark.parametrize("name,response,expected,reward", ACCEPTABLE, ids=[c[0] for c in ACCEPTABLE])
def test_several_acceptable_values_per_argument(name, response, expected, reward):
    assert score(response, expected_calls=expected).reward == reward


def test_matching_finds_the_pairing_greedy_order_would_miss():
    # the first call fits both expected calls, the second only the first: a greedy pass that gives
    # the first call to the first expected call leaves the second unmatched
    both = {"f": {"x": [1, 2]}}
    only_one = {"f": {"x": [1]}}
    response = call("f", '{"x": 1}') + "\n" + call("f", '{"x": 2}')
    assert score(response, expected_calls=[only_one, both]).reward == 1.0
    assert score(response, expected_calls=[both, only_one]).reward == 1.0


def test_exact_shape_keeps_its_stricter_strings():
    # single values keep the historical comparison (strip + case fold), not BFCL's standardisation
    assert (
        score(
            call("get_weather", '{"city": "paris-france"}'),
            expected_calls=[{"name": "get_weather", "arguments": {"city": "Paris France"}}],
        ).reward
        == 0.0
    )


# issue 19: BFCL's AST checker types each argument by the function's schema; strict by default
def tool(name, properties, required=()):
    return {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {"type": "object", "properties": properties, "required": list(required)},
        },
    }


AREA = [tool("area", {"base": {"type": "integer"}, "scale": {"type": "number"}, "exact": {"type": "boolean"}})]
AREA_TRUTH = [{"area": {"base": [10], "scale": ["", 2.0], "exact": ["", True]}}]

TYPED = [  # (case, arguments, strict reward, lenient reward: values only, a number is a number)
    ("integer as written", '{"base": 10}', 1.0, 1.0),
    ("float where the schema says integer", '{"base": 10.0}', 0.0, 1.0),
    ("string where the schema says integer", '{"base": "10"}', 0.0, 0.0),
    ("integer where the schema says float", '{"base": 10, "scale": 2}', 1.0, 1.0),
    ("boolean", '{"base": 10, "exact": true}', 1.0, 1.0),
    ("string where the schema says boolean", '{"base": 10, "exact": "true"}', 0.0, 0.0),
    ("boolean where the schema says float", '{"base": 10, "scale": true}', 0.0, 0.0),
]


@pytest.mark.parametrize("name,arguments,strict,lenient", TYPED, ids=[c[0] for c in TYPED])
def test_arguments_are_type_checked_against_the_schema(name, arguments, strict, lenient):
    response = call("area", arguments)
    assert score(response, expected_calls=AREA_TRUTH, tools=AREA).reward == strict
    assert score(response, expected_calls=AREA_TRUTH, tools=AREA, strict_types=False).reward == lenient


def test_exact_expected_calls_are_type_checked_too():
    expected = [{"name": "area", "arguments": {"base": 10}}]
    assert score(call("area", '{"base": 10}'), expected_calls=expected, tools=AREA).reward == 1.0
    assert score(call("area", '{"base": 10.0}'), expected_calls=expected, tools=AREA).reward == 0.0
    assert score(call("area", '{"base": 10.0}'), expected_calls=expected).reward == 1.0  # no schema, no types


def test_arguments_given_as_a_json_string_are_rejected_unless_lenient():
    response = '<tool_call>\n{"name": "area", "arguments": "{\\"base\\": 10}"}\n</tool_call>'
    strict = score(response, expected_calls=AREA_TRUTH, tools=AREA)
    assert strict.reward == 0.0 and "JSON string" in strict.details["error"]
    assert score(response, expected_calls=AREA_TRUTH, tools=AREA, strict_types=False).reward == 1.0
    assert score(response, expected_calls=AREA_TRUTH, tools=AREA, strict_types="false").reward == 1.0


def test_array_items_and_variables_follow_bfcl():
    tools = [tool("mean", {"xs": {"type": "array", "items": {"type": "integer"}}, "n": {"type": "integer"}})]
    truth = [{"mean": {"xs": [[1, 2]], "n": ["", "count"]}}]
    assert score(call("mean", '{"xs": [1, 2]}'), expected_calls=truth, tools=tools).reward == 1.0
    assert score(call("mean", '{"xs": [1, 2.0]}'), expected_calls=truth, tools=tools).reward == 0.0
    # a ground truth that writes a value in another type (a variable name) accepts that type
    assert score(call("mean", '{"xs": [1, 2], "n": "count"}'), expected_calls=truth, tools=tools).reward == 1.0
    result = score(call("mean", '{"xs": ["1", 2]}'), expected_calls=truth, tools=tools)
    assert result.reward == 0.0 and "xs" in result.details["type_error"]


# BFCL simple row "database.query": `conditions` is an array of objects; in the possible answer each
# field of such an object lists its acceptable values
QUERY_TOOLS = [
    tool(
        "database.query",
        {
            "table": {"type": "string"},
            "conditions": {"type": "array", "items": {"type": "object"}},
        },
        ["table", "conditions"],
    )
]
QUERY_TRUTH = [
    {
        "database.query": {
            "table": ["user"],
            "conditions": [
                [
                    {"field": ["age"], "operation": [">"], "value": ["25"]},
                    {"field": ["job"], "operation": ["="], "value": ["engineer"]},
                ]
            ],
        }
    }
]


@pytest.mark.parametrize("tools", [QUERY_TOOLS, None], ids=["with schema", "without schema"])
def test_list_of_objects_lists_acceptable_values_per_field(tools):
    right = call(
        "database.query",
        '{"table": "user", "conditions": [{"field": "age", "operation": ">", "value": "25"}, '
        '{"field": "job", "operation": "=", "value": "engineer"}]}',
    )
    lists = call(
        "database.query",
        '{"table": "user", "conditions": [{"field": ["age"], "operation": [">"], "value": ["25"]}, '
        '{"field": ["job"], "operation": ["="], "value": ["engineer"]}]}',
    )
    swapped = call(
        "database.query",
        '{"table": "user", "conditions": [{"field": "job", "operation": "=", "value": "engineer"}, '
        '{"field": "age", "operation": ">", "value": "25"}]}',
    )
    assert score(right, expected_calls=QUERY_TRUTH, tools=tools).reward == 1.0
    assert score(lists, expected_calls=QUERY_TRUTH, tools=tools).reward == 0.0
    assert score(swapped, expected_calls=QUERY_TRUTH, tools=tools).reward == 0.0  # BFCL: in order


def test_converted_bfcl_rows_are_scored_with_their_schema():
    import json
    from pathlib import Path

    from cascade_rl.data.convert import bfcl
    from cascade_rl.data.formats import load_answers

    samples = Path(__file__).parents[1] / "data" / "samples"
    answers = load_answers(samples / "bfcl_simple_answers.jsonl")
    first = json.loads((samples / "bfcl_simple.jsonl").read_text().splitlines()[0])
    row = bfcl(first, answers=answers)
    right = call("calculate_triangle_area", '{"base": 10, "height": 5}')
    floats = call("calculate_triangle_area", '{"base": 10.0, "height": 5}')
    assert score(right, expected_calls=row["expected_calls"], tools=row["tools"]).reward == 1.0
    assert score(floats, expected_calls=row["expected_calls"], tools=row["tools"]).reward == 0.0
    assert score(floats, expected_calls=row["expected_calls"], tools=row["tools"], strict_types=False).reward == 1.0


def test_strict_types_option_reaches_the_scorer_from_cascade_score_and_benchmarks(tmp_path):
    import json

    from cascade_rl.cli.common import parse_options as _parse_options
    from cascade_rl.eval.benchmarks import score_samples
    from cascade_rl.scoring import score_file

    line = {
        "domain": "tool_call",
        "response": call("area", '{"base": 10.0}'),
        "expected_calls": AREA_TRUTH,
        "tools": AREA,
    }
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(line) + "\n")
    options = _parse_options(["tool_call.strict_types=false"])
    assert options == {"tool_call": {"strict_types": False}}
    for given, reward in ((None, 0.0), (options, 1.0)):
        score_file(source, tmp_path / "out.jsonl", workers=1, options=given)
        assert json.loads((tmp_path / "out.jsonl").read_text())["reward"] == reward
    rows = [{"domain": "tool_call", "prompt": [{"role": "user", "content": "area?"}], "reference": line}]
    samples = [[line["response"]]]
    assert score_samples(rows, samples, {}, workers=1)[0][0].reward == 0.0
    assert score_samples(rows, samples, {"tool_call": {"strict_types": False}}, workers=1)[0][0].reward == 1.0
