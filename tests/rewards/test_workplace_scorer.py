"""The workplace assistant: its tools answer as NVIDIA's environment does, and its verdict compares
database states as NVIDIA's verifier does (the cases below were checked against the reference's
behaviour: recorded tool outputs of NeMo Gym's example rollouts, and its state comparison)."""

import json

import pytest

from cascade_rl.rewards.environment import ToolCall
from cascade_rl.rewards.workplace.database import Workplace, differing_tables
from cascade_rl.rewards.workplace.scorer import WorkplaceEpisode, check_row, reference_calls, replay, score
from cascade_rl.rewards.workplace.tools import TOOLS, ToolError, call_tool


def gt(*calls):
    return [{"name": name, "arguments": json.dumps(arguments)} for name, arguments in calls]


def calls(*pairs):
    return [{"name": name, "arguments": arguments} for name, arguments in pairs]


def output(tool, **arguments):
    episode = WorkplaceEpisode([{"role": "user", "content": "x"}], ground_truth=[])
    content, _ = episode.run_call(ToolCall(tool, arguments))
    return json.loads(content)["output"]


def test_the_27_tools_of_the_schemas_exist_and_the_data_is_nvidias():
    from importlib import resources

    data = resources.files("cascade_rl.rewards.workplace") / "data" / "tools"
    names = {
        tool["name"]
        for file in data.iterdir()
        if file.name.endswith(".json")
        for tool in json.loads(file.read_text())["tools"]
    }
    assert names == set(TOOLS) and len(TOOLS) == 27
    db = Workplace.fresh()
    sizes = {name: len(table) for name, table in db.state().items()}
    assert sizes == {
        "email": 500,
        "calendar": 300,
        "analytics": 0,
        "project_management": 300,
        "customer_relationship_manager": 200,
    }
    assert len(db.company_directory) == 20 and len(db.analytics) == 1000


def test_tool_outputs_are_the_reference_servers():
    # recorded in NeMo Gym's example rollouts of this environment (the same data)
    assert output("company_directory_find_email_address", name="Nadia") == ["nadia.moreau@atlas.com"]
    found = output("customer_relationship_manager_search_customers", customer_name="Casey Wilson", page=1, page_size=1)
    assert found["customers"][0]["customer_id"] == "00000014"
    assert found["customers"][0]["customer_phone"] is None  # an empty cell reads as null
    assert found["pagination"] == {"total_customers": 1, "page": 1, "page_size": 1, "total_pages": 1}
    emails = output("email_search_emails", query="kofi", page=1, page_size=1)["emails"]
    assert [(e["email_id"], e["sent_datetime"]) for e in emails] == [("00000259", "2023-11-22 15:22:52")]
    assert (
        output(
            "customer_relationship_manager_add_customer",
            customer_name="Dakota Thomas",
            assigned_to_email="nadia.moreau@atlas.com",
            status="Lead",
        )
        == "00000200"
    )
    assert output("customer_relationship_manager_search_customers", product_interest="Consulting", status="Proposal",
                  last_contact_date_max="2023-11-09", page=1, page_size=50) == "No customers found."  # fmt: skip
    plot = dict(time_min="2023-11-30", time_max="2024-06-30", value_to_plot="total_visits", plot_type="bar")
    assert output("analytics_create_plot", **plot) == "plots/2023-11-30_2024-06-30_total_visits_bar.png"


def test_failing_calls_answer_with_the_reference_messages():
    db = Workplace.fresh()
    assert call_tool(db, "calendar_update_event", {"event_id": "13", "field": "duration", "new_value": "30"}) == (
        "Invalid event ID format. Expected 8-digit ID."
    )
    assert call_tool(
        db, "project_management_update_task", {"task_id": "00000149", "field": "board", "new_value": "Ops"}
    ) == ("Board not valid. Please choose from: 'Back end', 'Front end', 'Design'.")
    assert call_tool(db, "email_delete_email", {"email_id": "99999999"}) == "Email not found."
    assert call_tool(db, "calendar_create_event", {"event_name": "x", "participant_email": "a@b.c",
                                                  "event_start": "tomorrow", "duration": "30"}) == (
        "Invalid event_start format. Expected YYYY-MM-DD HH:MM:SS."
    )  # fmt: skip
    assert call_tool(db, "company_directory_find_email_address", {}) == "Name not provided."
    with pytest.raises(ToolError, match="unexpected keyword argument 'folder'"):
        call_tool(db, "email_delete_email", {"email_id": "00000259", "folder": "inbox"})
    with pytest.raises(ToolError, match="unknown tool"):
        call_tool(db, "email_archive", {})
    assert differing_tables(db, Workplace.fresh()) == []  # nothing changed


def test_writes_use_the_fixed_clock_lower_case_addresses_and_continue_ids():
    db = Workplace.fresh()
    call_tool(db, "email_send_email", {"recipient": "Kofi.Mensah@Atlas.com", "subject": "Hi", "body": "b"})
    sent = db.email.iloc[-1]
    assert (sent["email_id"], sent["sender/recipient"], sent["sent_datetime"]) == (
        "500",
        "kofi.mensah@atlas.com",
        "2023-11-30 23:59:00",
    )
    event = call_tool(db, "calendar_create_event", {"event_name": "Sync", "participant_email": "Raj.Patel@atlas.com",
                                                   "event_start": "2023-12-01 10:00:00", "duration": "30"})  # fmt: skip
    assert event == "00000300" and db.calendar.iloc[-1]["participant_email"] == "raj.patel@atlas.com"
    assert (
        call_tool(db, "email_reply_email", {"email_id": "00000057", "body": "Thanks"}) == "Email replied successfully."
    )
    assert db.email.iloc[-1]["subject"].startswith("RE: ") and db.email.iloc[-1]["email_id"] == "501"


def test_the_same_state_ignores_case_except_status_list_and_board():
    update = ("calendar_update_event", {"event_id": "00000013", "field": "event_name", "new_value": "Risk Forum"})
    assert (
        score(ground_truth=gt(update), calls=calls((update[0], {**update[1], "new_value": "RISK forum"}))).reward == 1
    )
    status = (
        "customer_relationship_manager_update_customer",
        {"customer_id": "00000095", "field": "status", "new_value": "Lost"},
    )
    assert score(ground_truth=gt(status), calls=calls(status)).reward == 1
    board = ("project_management_update_task", {"task_id": "00000149", "field": "list_name", "new_value": "Completed"})
    assert score(ground_truth=gt(board), calls=calls(board)).reward == 1
    wrong = score(ground_truth=gt(status), calls=calls((status[0], {**status[1], "customer_id": "00000080"})))
    assert wrong.reward == 0 and wrong.details["differs"] == ["customer_relationship_manager"]


def test_reads_and_failing_calls_change_nothing_and_order_can_matter():
    delete = ("email_delete_email", {"email_id": "00000057"})
    noise = [("email_search_emails", {"query": "budget"}), ("email_delete_email", {"email_id": "nope"}),
             ("calendar_update_event", {"event_id": "00000013", "field": "duration", "new_value": "-5"}),
             ("no_such_tool", {"x": 1})]  # fmt: skip
    result = score(ground_truth=gt(delete), calls=calls(*noise, delete))
    assert result.reward == 1.0 and result.details["failed_calls"] == 1
    assert score(ground_truth=gt(delete), calls=[{"name": "email_delete_email", "arguments": "{bad json"}]).reward == 0
    # a new email renumbers the row labels: delete-then-send and send-then-delete differ (as in the reference)
    send = ("email_send_email", {"recipient": "raj.patel@atlas.com", "subject": "s", "body": "b"})
    assert score(ground_truth=gt(delete, send), calls=calls(delete, send)).reward == 1
    assert score(ground_truth=gt(delete, send), calls=calls(send, delete)).reward == 0
    # a new event is labelled 0 whatever was deleted, so there the order does not matter
    create = ("calendar_create_event", {"event_name": "Sync", "participant_email": "raj.patel@atlas.com",
                                        "event_start": "2023-12-01 10:00:00", "duration": "30"})  # fmt: skip
    cancel = ("calendar_delete_event", {"event_id": "00000013"})
    assert score(ground_truth=gt(cancel, create), calls=calls(create, cancel)).reward == 1


def test_an_empty_reference_rewards_doing_nothing_and_a_transcript_can_be_judged():
    assert score(ground_truth=[], calls=[]).reward == 1
    assert score(ground_truth="[]", calls=calls(("email_delete_email", {"email_id": "00000057"}))).reward == 0
    transcript = (
        '<think><tool_call>{"name": "email_delete_email", "arguments": {"email_id": "00000001"}}</tool_call></think>'
        '<tool_call>{"name": "email_delete_email", "arguments": {"email_id": "00000057"}}</tool_call>'
    )
    reference = gt(("email_delete_email", {"email_id": "00000057"}))
    assert score(transcript, ground_truth=reference).reward == 1  # calls inside the thinking are not made


def test_null_arguments_are_dropped_live_and_kept_in_the_replay_as_the_reference_does():
    episode = WorkplaceEpisode([{"role": "user", "content": "x"}], ground_truth=[])
    content, failed = episode.run_call(ToolCall("company_directory_find_email_address", {"name": None}))
    assert json.loads(content) == {"output": "Name not provided."} and not failed
    _, unrun = replay(calls(("company_directory_find_email_address", {"name": None})))
    assert unrun == 1  # the replay passes name=None, which the tool cannot lower-case


def test_a_row_may_carry_its_own_small_database():
    database = {
        "email": [
            {
                "email_id": "1",
                "inbox/outbox": "inbox",
                "sender/recipient": "ana@toy.org",
                "subject": "Hi",
                "sent_datetime": "2023-11-01 09:00:00",
                "body": "Hello",
            }
        ],  # fmt: skip
        "company_directory": ["ana@toy.org", "ben@toy.org"],
    }
    reference = gt(("email_reply_email", {"email_id": "1", "body": "Thanks"}))
    assert score(ground_truth=reference, calls=calls(("email_reply_email", {"email_id": "1", "body": "thanks"})),
                 database=database).reward == 1  # fmt: skip
    assert Workplace.fresh(database).email.shape == (1, 6) and Workplace.fresh(database).calendar.empty
    with pytest.raises(ValueError, match="unknown table 'inbox'"):
        Workplace.fresh({"inbox": []})
    with pytest.raises(ValueError, match="unknown column 'cc'"):
        Workplace.fresh({"email": [{"email_id": "1", "cc": "x"}]})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"ground_truth": "{"}, "ground_truth is not valid JSON"),
        ({"ground_truth": {"name": "x"}}, "ground_truth must be a list"),
        ({"ground_truth": [{"arguments": "{}"}]}, r"ground_truth\[0\] is not a call with a name"),
        ({"ground_truth": [], "tools": [{"type": "function"}]}, "tools must be a list of function schemas"),
        ({"ground_truth": [], "tools": "[oops"}, "tools is not valid JSON"),
        ({"ground_truth": [], "calls": "x"}, "calls must be a list"),
    ],
)
def test_rows_that_cannot_be_read_name_the_field(fields, message):
    with pytest.raises(ValueError, match=message):
        check_row(fields)


def test_reference_arguments_may_be_objects_and_every_episode_starts_fresh():
    assert reference_calls([{"name": "a", "arguments": {"x": 1}}]) == [{"name": "a", "arguments": {"x": 1}}]
    first = WorkplaceEpisode([{"role": "user", "content": "x"}], ground_truth=[])
    first.run_call(ToolCall("email_delete_email", {"email_id": "00000057"}))
    second = WorkplaceEpisode([{"role": "user", "content": "x"}], ground_truth=[])
    assert len(second.db.email) == 500 and len(first.db.email) == 499
