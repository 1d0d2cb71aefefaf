"""The multi-turn environment interface: episodes started from rows, calls read from the model's
text, tool results rendered as the chat template's tool turns, budgets, and the verdict."""

import json
from pathlib import Path

import pytest

from cascade_rl.chat import IM_END, render, tool_turn_text
from cascade_rl.rewards.environment import ToolCall, has_environment, read_tool_calls, start_episode

SYSTEM = "Today's date is Thursday, 2023-11-30 and the current time is 23:59:00."
SMOLLM_TEMPLATE = Path(__file__).parents[1] / "assets" / "smollm2-135m" / "chat_template.jinja"


def call(name, **arguments):
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def row(ground_truth, **extra):
    return {
        "domain": "workplace",
        "prompt": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Delete my last email from kofi"},
        ],
        "reference": {"ground_truth": ground_truth, **extra},
    }


DELETE_KOFI = [{"name": "email_delete_email", "arguments": '{"email_id": "00000259"}'}]


def test_read_tool_calls_keeps_order_and_names_what_cannot_run():
    answer = (
        call("email_search_emails", query="kofi")
        + "<tool_call>not json</tool_call>"
        + '<tool_call>{"name": "email_delete_email", "arguments": "{\\"email_id\\": \\"1\\"}"}</tool_call>'
        + '<tool_call>{"name": "company_directory_find_email_address"}</tool_call>'
    )
    calls = read_tool_calls(answer)
    assert calls[0] == ToolCall("email_search_emails", {"query": "kofi"})
    assert "not a JSON object with a name" in calls[1].error
    assert calls[2].name == "email_delete_email" and "not a JSON object (got str)" in calls[2].error
    assert calls[3] == ToolCall("company_directory_find_email_address", {})  # no arguments: an empty object


def test_an_episode_runs_calls_turn_by_turn_and_is_judged_by_the_database_state():
    assert has_environment("workplace") and not has_environment("math")
    episode = start_episode(row(DELETE_KOFI))
    step = episode.step("<think>find it</think>" + call("email_search_emails", query="kofi", page_size=1))
    assert not step.done and [m["role"] for m in step.messages] == ["tool"]
    found = json.loads(step.messages[0]["content"])["output"]["emails"][0]
    assert found["email_id"] == "00000259" and found["sender/recipient"] == "kofi.mensah@atlas.com"
    step = episode.step(call("email_delete_email", email_id=found["email_id"]))
    assert json.loads(step.messages[0]["content"]) == {"output": "Email deleted successfully."}
    step = episode.step("Done: I deleted it.")
    assert step.done and step.end == "answered" and step.messages == []
    score = episode.score()
    assert score.reward == 1.0
    assert score.details | {"differs": []} == score.details
    assert (score.details["turns"], score.details["calls"], score.details["failed_calls"]) == (3, 2, 0)
    assert [m["role"] for m in episode.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    with pytest.raises(RuntimeError, match="over"):
        episode.step("again")


def test_a_bad_call_is_the_tool_result_and_the_episode_goes_on():
    episode = start_episode(row(DELETE_KOFI))
    step = episode.step(
        call("email_delete_email", email_id="00000259", folder="inbox")  # an argument the tool does not take
        + "<tool_call>{oops</tool_call>"
        + call("no_such_tool")
    )
    assert not step.done
    outputs = [json.loads(m["content"]) for m in step.messages]
    assert outputs[0]["output"].startswith("Error executing tool 'email_delete_email': ")
    assert "folder" in outputs[0]["output"]
    assert outputs[1]["error"].startswith("invalid tool call")
    assert outputs[2] == {"output": "Error executing tool 'no_such_tool': unknown tool 'no_such_tool'"}
    assert episode.score().reward == 0.0 and episode.score().details["failed_calls"] == 3
    episode.step(call("email_delete_email", email_id="00000259"))  # the model corrects itself
    assert episode.score().reward == 1.0


def test_the_step_budget_runs_the_last_calls_but_ends_the_episode():
    episode = start_episode(row(DELETE_KOFI), {"max_steps": 2})
    assert not episode.step(call("email_search_emails", query="kofi")).done
    step = episode.step(call("email_delete_email", email_id="00000259"))
    assert step.done and step.end == "step budget" and len(step.messages) == 1
    assert episode.messages[-1]["role"] == "assistant"  # the results are not shown to the model
    assert episode.score().reward == 1.0  # but the calls count, as in NeMo Gym's agent


def test_a_truncated_turn_ends_the_episode_and_its_calls_count_without_running():
    episode = start_episode(row(DELETE_KOFI))
    step = episode.step(call("email_delete_email", email_id="00000259") + "and then", truncated=True)
    assert step.done and step.end == "truncated" and step.messages == []
    assert episode.score().reward == 1.0
    assert start_episode(row(DELETE_KOFI)).step("<think>still thinking").end == "unfinished thinking"


def test_rows_that_cannot_run_are_refused_before_any_turn():
    with pytest.raises(ValueError, match=r"ground_truth\[0\]\.arguments is not a JSON object"):
        start_episode(row([{"name": "email_delete_email", "arguments": "{not json"}]))
    with pytest.raises(ValueError, match="single-turn"):
        start_episode({"domain": "math", "prompt": [{"role": "user", "content": "1+1"}], "reference": {"answer": "2"}})
    with pytest.raises(ValueError, match="max_steps"):
        start_episode(row(DELETE_KOFI), {"max_steps": 0})


@pytest.mark.parametrize("template", [None, SMOLLM_TEMPLATE.read_text()], ids=["cascade", "smollm2"])
def test_tool_turn_text_is_what_the_template_shows_in_the_whole_conversation(template):
    from transformers.utils.chat_template_utils import render_jinja_template

    def rendered(messages, generation):
        return render_jinja_template(
            conversations=[messages], chat_template=template or _cascade(), add_generation_prompt=generation
        )[0][0]

    episode = start_episode(row(DELETE_KOFI))
    prompt = rendered(episode.messages, True)
    response = call("email_search_emails", query="kofi", page_size=1)
    step = episode.step(response)
    text = prompt + response + IM_END + tool_turn_text(step.messages, template=template)
    assert text == rendered(episode.messages, True)  # the engine's text = the conversation rendered whole
    assert step.messages[0]["content"] in tool_turn_text(step.messages, template=template)


def _cascade():
    from cascade_rl.chat import chat_template

    return chat_template()


def test_tool_turn_text_refuses_messages_that_are_not_tool_results():
    with pytest.raises(ValueError, match="role 'tool'"):
        tool_turn_text([{"role": "user", "content": "x"}])
    assert render([{"role": "tool", "content": "r"}]).startswith("<|im_start|>user\n<tool_response>")
