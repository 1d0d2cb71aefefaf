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
