"""Toy tool calls: rendered calls match the chat template, gold calls score 1.0, tools shown
include every tool the answer calls."""

from cascade_rl.chat import parse_tool_calls, render
from cascade_rl.world import tools
from cascade_rl.world.tasks import sft_row
from tests.world.conftest import TOOL_CALL_DOMAIN, draw


def test_same_seed_same_tasks():
    assert draw(tools.tool_task, 40) == draw(tools.tool_task, 40)


def test_gold_response_is_what_the_template_renders():
    for task in draw(tools.tool_task, 60):
        for mode in ("think", "no_think"):
            row = sft_row(task, mode, "x")
            assert render(row["messages"], row.get("tools")).endswith(task.response(mode) + "<|im_end|>\n")


def test_called_tools_are_shown_and_calls_parse():
    tasks = draw(tools.tool_task, 100)
    assert {t.kind for t in tasks} >= {"no_tool", "two_cities", "weather", "currency"}
    for task in tasks:
        shown = {schema["function"]["name"] for schema in task.tools}
        expected = task.reference["expected_calls"]
        assert {call["name"] for call in expected} <= shown
        assert parse_tool_calls(task.response("no_think")) == expected


def test_gold_calls_score_one(score_gold):
    tasks = draw(tools.tool_task, 100)
    for mode in ("no_think", "think"):
        assert score_gold(TOOL_CALL_DOMAIN, tasks, mode) == [1.0] * len(tasks)
