"""The 27 tools of the workplace assistant, with the behaviour of NVIDIA's environment (NeMo Gym's
``workplace_assistant`` resources server; SPEC section 11), written for :class:`.Workplace`.

Each tool is ``fn(db, **arguments)`` and returns what the model reads: a record, a list, or a
message. What the reference does, these do too:

* **A failing call returns a message, it does not raise**: a missing argument ("Event ID not
  provided."), an id that does not exist ("Task not found."), a value outside its list ("Board not
  valid. Please choose from: ..."). A call that raises anyway (an unknown argument, a value of
  the wrong type) is reported to the model by the caller (:func:`call_tool`) as
  ``Error executing tool 'NAME': ...``; the episode goes on.
* **The current time is fixed**: 2023-11-30 23:59:00 (a sent email's ``sent_datetime``), whatever
  date a row's system prompt states.
* Searches match text case-insensitively as regular expressions (pandas ``str.contains``), email
  search needs every word of the query in the subject, body or sender; dates compare as text
  (``YYYY-MM-DD``), event times as timestamps; results come five to a page, newest first.
* Writes normalise email addresses to lower case; new ids continue the largest existing one
  (events, tasks and customers as eight digits, emails as a plain number).

One file because the tools are one table of behaviour read side by side with the reference.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pandas as pd

from cascade_rl.rewards.workplace.database import Workplace

CURRENT_TIME = pd.Timestamp("2023-11-30 23:59:00")
PAGE_SIZE = 5
LISTS = ["Backlog", "In Progress", "In Review", "Completed"]
BOARDS = ["Back end", "Front end", "Design"]
STATUSES = ["Qualified", "Won", "Lost", "Lead", "Proposal"]
PRODUCTS = ["Software", "Hardware", "Services", "Consulting", "Training"]
PLOT_VALUES = [
    "total_visits",
    "session_duration_seconds",
    "user_engaged",
    "visits_direct",
    "visits_referral",
    "visits_search_engine",
    "visits_social_media",
]
PLOT_TYPES = ["bar", "line", "scatter", "histogram"]
EVENT_FIELDS = ["event_id", "event_name", "participant_email", "event_start", "duration"]
_EMAIL_PATTERN = re.compile(r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$")


def _page(records: list[dict], page: Any, page_size: Any, noun: str) -> dict:
    """One page of ``records`` and the pagination block (a page outside the range is clamped)."""
    total = len(records)
    pages = (total + page_size - 1) // page_size
    page = max(1, min(page, pages)) if pages > 0 else 1
    start = (page - 1) * page_size
    return {
        noun: records[start : min(start + page_size, total)],
        "pagination": {f"total_{noun}": total, "page": page, "page_size": page_size, "total_pages": pages},
    }


def _next_id(ids: pd.Series, width: int) -> str:
    return str(int(ids.max()) + 1).zfill(width)


# ----------------------------------------------------------------------------- company directory
def company_directory_find_email_address(db: Workplace, name: Any = "") -> Any:
    if name == "":
        return "Name not provided."
    addresses = db.company_directory["email_address"]
    return addresses[addresses.str.contains(name.lower(), case=False)].tolist()


# ----------------------------------------------------------------------------- email
def email_get_email_information_by_id(db: Workplace, email_id: Any = None, field: Any = None) -> Any:
    if not email_id:
        return "Email ID not provided."
    if not field:
        return "Field not provided."
    try:
        found = db.email[db.email["email_id"] == email_id].to_dict(orient="records")
        if not found:
            return "Email not found."
        if field in found[0]:
            return {field: found[0][field]}
        return f"Field '{field}' not found. Available fields: {', '.join(found[0].keys())}"
    except Exception as error:  # noqa: BLE001 - the reference reports it to the model
        return f"Error retrieving email information: {error}"


def email_search_emails(
    db: Workplace, query: Any = "", date_min: Any = None, date_max: Any = None, page: Any = 1, page_size: Any = 5
) -> Any:
    try:
        words = query.lower().split()
        emails = db.email
        texts = [
            f"{subject} {body} {sender}".lower()
            for subject, body, sender in zip(emails["subject"], emails["body"], emails["sender/recipient"])
        ]
        found = emails[[all(word in text for word in words) for text in texts]].copy()
        found["_sent"] = pd.to_datetime(found["sent_datetime"])
        records = found.sort_values("_sent", ascending=False).drop(columns=["_sent"]).to_dict(orient="records")
        if date_min:
            low = pd.Timestamp(date_min).date()
            records = [r for r in records if pd.Timestamp(r["sent_datetime"]).date() >= low]
        if date_max:
            high = pd.Timestamp(date_max).date()
            records = [r for r in records if pd.Timestamp(r["sent_datetime"]).date() <= high]
        return _page(records, page, page_size, "emails") if records else "No emails found."
    except Exception as error:  # noqa: BLE001
        return f"Error searching emails: {error}"


def email_send_email(db: Workplace, recipient: Any = None, subject: Any = None, body: Any = None) -> Any:
    if not recipient or not subject or not body:
        return "Recipient, subject, or body not provided."
    if "@" not in recipient or "." not in recipient:
        return "Invalid recipient email address."
    try:
        email_id = str(int(db.email["email_id"].max()) + 1) if not db.email.empty else "1"
        email = {
            "email_id": email_id,
            "inbox/outbox": "outbox",
            "sender/recipient": recipient.lower(),
            "subject": subject,
            "sent_datetime": str(CURRENT_TIME),
            "body": body,
        }
        db.email = pd.concat([db.email, pd.DataFrame([email])], ignore_index=True)
        return "Email sent successfully."
    except Exception as error:  # noqa: BLE001
        return f"Error sending email: {error}"


def email_delete_email(db: Workplace, email_id: Any = None) -> Any:
    if not email_id:
        return "Email ID not provided."
    try:
        if email_id not in db.email["email_id"].values:
            return "Email not found."
        db.email = db.email[db.email["email_id"] != email_id]
        return "Email deleted successfully."
    except Exception as error:  # noqa: BLE001
        return f"Error deleting email: {error}"


def _send_about(db: Workplace, email_id: Any, recipient: Any, subject_prefix: str, body: Any, done: str, what: str):
    """Forward or reply: send a new email built from email ``email_id``."""
    try:
        if email_id not in db.email["email_id"].values:
            return "Email not found."
        email = db.email[db.email["email_id"] == email_id].to_dict(orient="records")[0]
        recipient = email["sender/recipient"] if recipient is None else recipient.lower()
        result = email_send_email(
            db, recipient, f"{subject_prefix}: {email['subject']}", email["body"] if body is None else body
        )
        return result if "Error" in result or "Invalid" in result else done
    except Exception as error:  # noqa: BLE001
        return f"Error {what} email: {error}"


def email_forward_email(db: Workplace, email_id: Any = None, recipient: Any = None) -> Any:
    if not email_id or not recipient:
        return "Email ID or recipient not provided."
    if "@" not in recipient or "." not in recipient:
        return "Invalid recipient email address."
    return _send_about(db, email_id, recipient, "FW", None, "Email forwarded successfully.", "forwarding")


def email_reply_email(db: Workplace, email_id: Any = None, body: Any = None) -> Any:
    if not email_id or not body:
        return "Email ID or body not provided."
    return _send_about(db, email_id, None, "RE", body, "Email replied successfully.", "replying to")


# ----------------------------------------------------------------------------- calendar
def _valid_event_id(event_id: Any) -> bool:
    return isinstance(event_id, str) and len(event_id) == 8 and event_id.isdigit()


def _check_event_value(field: str, value: Any) -> str | None:
    """The message for a bad ``event_start`` / ``duration``, or None."""
    if field == "event_start":
        try:
            pd.Timestamp(value)
        except ValueError:
            return "Invalid event_start format. Expected YYYY-MM-DD HH:MM:SS."
    elif field == "duration":
        try:
            if int(value) <= 0:
                return "Duration must be a positive number of minutes."
        except ValueError:
            return "Invalid duration format. Expected a number of minutes."
    return None


def calendar_get_event_information_by_id(db: Workplace, event_id: Any = None, field: Any = None) -> Any:
    if not event_id:
        return "Event ID not provided."
    if not field:
        return "Field not provided."
    if not _valid_event_id(event_id):
        return "Invalid event ID format. Expected 8-digit ID."
    if field not in EVENT_FIELDS:
        return f"Invalid field. Available fields are: {', '.join(EVENT_FIELDS)}"
    found = db.calendar[db.calendar["event_id"] == event_id].to_dict(orient="records")
    return {field: found[0][field]} if found else "Event not found."


def calendar_search_events(
    db: Workplace, query: Any = "", time_min: Any = None, time_max: Any = None, page: Any = 1, page_size: Any = 5
) -> Any:
    bounds = {}
    for name, value in (("time_min", time_min), ("time_max", time_max)):
        if value:
            try:
                bounds[name] = pd.Timestamp(value)
            except ValueError:
                return f"Invalid {name} format. Expected YYYY-MM-DD HH:MM:SS."
    events = db.calendar
    matches = events["event_name"].str.contains(query, case=False, na=False) | events["participant_email"].str.contains(
        query, case=False, na=False
    )
    records = events[matches].to_dict(orient="records")
    if "time_min" in bounds:
        records = [r for r in records if pd.Timestamp(r["event_start"]) >= bounds["time_min"]]
    if "time_max" in bounds:
        records = [r for r in records if pd.Timestamp(r["event_start"]) <= bounds["time_max"]]
    if not records:
        return "No events found."
    records.sort(key=lambda r: pd.Timestamp(r["event_start"]), reverse=True)
    return _page(records, page, page_size, "events")


def calendar_create_event(
    db: Workplace, event_name: Any = None, participant_email: Any = None, event_start: Any = None, duration: Any = None
) -> Any:
    for value, what in ((event_name, "Event name"), (participant_email, "Participant email")):
        if not value:
            return f"{what} not provided."
    if not event_start:
        return "Event start not provided."
    if not duration:
        return "Event duration not provided."
    problem = _check_event_value("event_start", event_start) or _check_event_value("duration", duration)
    if problem:
        return problem
    event_id = _next_id(db.calendar["event_id"], 8)
    event = {
        "event_id": [event_id],
        "event_name": [event_name],
        "participant_email": [participant_email.lower()],
        "event_start": [event_start],
        "duration": [duration],
    }
    db.calendar = pd.concat([db.calendar, pd.DataFrame(event)])  # the new row is labelled 0, as in the reference
    return event_id


def calendar_delete_event(db: Workplace, event_id: Any = None) -> Any:
    if not event_id:
        return "Event ID not provided."
    if not _valid_event_id(event_id):
        return "Invalid event ID format. Expected 8-digit ID."
    if event_id not in db.calendar["event_id"].values:
        return "Event not found."
    db.calendar = db.calendar[db.calendar["event_id"] != event_id]
    return "Event deleted successfully."


def calendar_update_event(db: Workplace, event_id: Any = None, field: Any = None, new_value: Any = None) -> Any:
    if not event_id or not field or not new_value:
        return "Event ID, field, or new value not provided."
    if not _valid_event_id(event_id):
        return "Invalid event ID format. Expected 8-digit ID."
    if field not in EVENT_FIELDS[1:]:
        return f"Invalid field. Available fields are: {', '.join(EVENT_FIELDS[1:])}"
    problem = _check_event_value(field, new_value)
    if problem:
        return problem
    if event_id not in db.calendar["event_id"].values:
        return "Event not found."
    if field == "participant_email":
        new_value = new_value.lower()
    db.calendar.loc[db.calendar["event_id"] == event_id, field] = new_value
    return "Event updated successfully."


# ----------------------------------------------------------------------------- analytics
def _visits(db: Workplace, time_min: Any, time_max: Any) -> pd.DataFrame:
    data = db.analytics
    if time_min:
        data = data[data["date_of_visit"] >= time_min]
    if time_max:
        data = data[data["date_of_visit"] <= time_max]
    return data.copy()


def analytics_get_visitor_information_by_id(db: Workplace, visitor_id: Any = None) -> Any:
    if not visitor_id:
        return "Visitor ID not provided."
    found = db.analytics[db.analytics["visitor_id"] == visitor_id].to_dict(orient="records")
    return found or "Visitor not found."


def analytics_create_plot(
    db: Workplace, time_min: Any = None, time_max: Any = None, value_to_plot: Any = None, plot_type: Any = None
) -> Any:
    if not time_min:
        return "Start date not provided."
    if not time_max:
        return "End date not provided."
    if value_to_plot not in PLOT_VALUES:
        return f"Value to plot must be one of {', '.join(repr(v) for v in PLOT_VALUES)}"
    if plot_type not in PLOT_TYPES:
        return "Plot type must be one of 'bar', 'line', 'scatter', or 'histogram'"
    file_path = f"plots/{time_min}_{time_max}_{value_to_plot}_{plot_type}.png"
    db.plots.loc[len(db.plots)] = [file_path]
    return file_path


def analytics_total_visits_count(db: Workplace, time_min: Any = None, time_max: Any = None) -> Any:
    return _visits(db, time_min, time_max).groupby("date_of_visit").size().to_dict()


def analytics_engaged_users_count(db: Workplace, time_min: Any = None, time_max: Any = None) -> Any:
    data = _visits(db, time_min, time_max)
    return data["user_engaged"].astype(bool).astype(int).groupby(data["date_of_visit"]).sum().to_dict()


def analytics_traffic_source_count(
    db: Workplace, time_min: Any = None, time_max: Any = None, traffic_source: Any = None
) -> Any:
    data = _visits(db, time_min, time_max)
    if not traffic_source:
        return data.groupby("date_of_visit").size().to_dict()
    from_source = (data["traffic_source"] == traffic_source).astype(int)
    return from_source.groupby(data["date_of_visit"]).sum().to_dict()


def analytics_get_average_session_duration(db: Workplace, time_min: Any = None, time_max: Any = None) -> Any:
    data = _visits(db, time_min, time_max)
    return data["session_duration_seconds"].astype(float).groupby(data["date_of_visit"]).mean().to_dict()


# ----------------------------------------------------------------------------- project management
def project_management_get_task_information_by_id(db: Workplace, task_id: Any = None, field: Any = None) -> Any:
    if not task_id:
        return "Task ID not provided."
    if not field:
        return "Field not provided."
    found = db.project_management[db.project_management["task_id"] == task_id].to_dict(orient="records")
    if not found:
        return "Task not found."
    return {field: found[0][field]} if field in found[0] else "Field not found."


def project_management_search_tasks(
    db: Workplace,
    task_name: Any = None,
    assigned_to_email: Any = None,
    list_name: Any = None,
    due_date: Any = None,
    board: Any = None,
) -> Any:
    if not any([task_name, assigned_to_email, list_name, due_date, board]):
        return "No search parameters provided."
    if assigned_to_email and not _EMAIL_PATTERN.match(assigned_to_email):
        return "Invalid email format for assigned_to_email."
    tasks = db.project_management.copy()
    if task_name:
        tasks = tasks[tasks["task_name"].str.contains(task_name, case=False)]
    if assigned_to_email:
        tasks = tasks[tasks["assigned_to_email"].str.lower() == assigned_to_email.lower()]
    for column, value in (("list_name", list_name), ("due_date", due_date), ("board", board)):
        if value:
            tasks = tasks[tasks[column].str.contains(value, case=False)]
    return tasks.to_dict(orient="records")


def _task_value_problem(db: Workplace, field: str, value: Any) -> str | None:
    if field == "board" and value not in BOARDS:
        return "Board not valid. Please choose from: 'Back end', 'Front end', 'Design'."
    if field == "list_name" and value not in LISTS:
        return "List not valid. Please choose from: 'Backlog', 'In Progress', 'In Review', 'Completed'."
    if field == "assigned_to_email" and value not in db.project_management["assigned_to_email"].str.lower().values:
        return "Assignee email not valid. Please choose from the list of team members."
    return None


def project_management_create_task(
    db: Workplace,
    task_name: Any = None,
    assigned_to_email: Any = None,
    list_name: Any = None,
    due_date: Any = None,
    board: Any = None,
) -> Any:
    if not all([task_name, assigned_to_email, list_name, due_date, board]):
        return "Missing task details."
    assigned_to_email = assigned_to_email.lower()
    for field, value in (("assigned_to_email", assigned_to_email), ("list_name", list_name), ("board", board)):
        problem = _task_value_problem(db, field, value)
        if problem:
            return problem
    task_id = _next_id(db.project_management["task_id"], 8)
    task = {
        "task_id": [task_id],
        "task_name": [task_name],
        "assigned_to_email": [assigned_to_email],
        "list_name": [list_name],
        "due_date": [due_date],
        "board": [board],
    }
    db.project_management = pd.concat([db.project_management, pd.DataFrame(task)], ignore_index=True)
    return task_id


def project_management_delete_task(db: Workplace, task_id: Any = None) -> Any:
    if not task_id:
        return "Task ID not provided."
    if task_id not in db.project_management["task_id"].values:
        return "Task not found."
    db.project_management = db.project_management[db.project_management["task_id"] != task_id]
    return "Task deleted successfully."


def project_management_update_task(db: Workplace, task_id: Any = None, field: Any = None, new_value: Any = None) -> Any:
    if not task_id or not field or not new_value:
        return "Task ID, field, or new value not provided."
    if field == "assigned_to_email":
        new_value = new_value.lower()
    problem = _task_value_problem(db, field, new_value)
    if problem:
        return problem
    tasks = db.project_management
    if task_id not in tasks["task_id"].values:
        return "Task not found."
    if field not in tasks.columns:
        return "Field not valid."
    tasks.loc[tasks["task_id"] == task_id, field] = new_value
    return "Task updated successfully."


# ----------------------------------------------------------------------------- customer relationship manager
_CUSTOMER_TEXT = ("customer_name", "customer_email", "product_interest", "status", "assigned_to_email")
_CUSTOMER_DATES = (
    ("last_contact_date_min", "last_contact_date", ">="),
    ("last_contact_date_max", "last_contact_date", "<="),
    ("follow_up_by_min", "follow_up_by", ">="),
    ("follow_up_by_max", "follow_up_by", "<="),
)


def customer_relationship_manager_search_customers(
    db: Workplace,
    customer_name: Any = None,
    customer_email: Any = None,
    product_interest: Any = None,
    status: Any = None,
    assigned_to_email: Any = None,
    last_contact_date_min: Any = None,
    last_contact_date_max: Any = None,
    follow_up_by_min: Any = None,
    follow_up_by_max: Any = None,
    page: Any = 1,
    page_size: Any = 5,
) -> Any:
    given = dict(locals())
    if not any(given[name] for name in _CUSTOMER_TEXT + tuple(bound for bound, _, _ in _CUSTOMER_DATES)):
        return "No search parameters provided. Please provide at least one parameter."
    customers = db.customer_relationship_manager.copy()
    for column in _CUSTOMER_TEXT:
        if given[column]:
            customers = customers[customers[column].str.contains(given[column], case=False)]
    for bound, column, sign in _CUSTOMER_DATES:
        if given[bound]:
            keep = customers[column] >= given[bound] if sign == ">=" else customers[column] <= given[bound]
            customers = customers[keep]
    records = customers.to_dict(orient="records")
    return _page(records, page, page_size, "customers") if records else "No customers found."


def customer_relationship_manager_update_customer(
    db: Workplace, customer_id: Any = None, field: Any = None, new_value: Any = None
) -> Any:
    if not customer_id or not field or not new_value:
        return "Customer ID, field, or new value not provided."
    if field == "status" and new_value not in STATUSES:
        return "Status not valid. Please choose from: 'Qualified', 'Won', 'Lost', 'Lead', 'Proposal'"
    if field == "product_interest" and new_value not in PRODUCTS:
        return (
            "Product interest not valid. Please choose from: 'Software', 'Hardware', 'Services', 'Consulting', "
            "'Training'"
        )
    if field in ("customer_email", "assigned_to_email"):
        new_value = new_value.lower()
    customers = db.customer_relationship_manager
    if customer_id not in customers["customer_id"].values:
        return "Customer not found."
    if field not in customers.columns:
        return (
            "Field not valid. Please choose from: 'customer_name', 'assigned_to_email', 'customer_email', "
            "'customer_phone', 'last_contact_date', 'product_interest', 'status', 'notes', 'follow_up_by'"
        )
    customers.loc[customers["customer_id"] == customer_id, field] = new_value
    return "Customer updated successfully."


def customer_relationship_manager_add_customer(
    db: Workplace,
    customer_name: Any = None,
    assigned_to_email: Any = None,
    status: Any = None,
    customer_email: Any = None,
    customer_phone: Any = None,
    last_contact_date: Any = None,
    product_interest: Any = None,
    notes: Any = "",
    follow_up_by: Any = None,
) -> Any:
    if not all([customer_name, assigned_to_email, status]):
        return "Please provide all required fields: customer_name, assigned_to_email, status."
    customers = db.customer_relationship_manager
    customer_id = _next_id(customers["customer_id"], 8)
    customer = {
        "customer_id": [customer_id],
        "customer_name": [customer_name],
        "customer_email": [customer_email.lower() if customer_email else customer_email],
        "customer_phone": [customer_phone],
        "last_contact_date": [last_contact_date],
        "product_interest": [product_interest],
        "status": [status],
        "assigned_to_email": [assigned_to_email.lower()],
        "notes": [notes],
        "follow_up_by": [follow_up_by],
    }
    db.customer_relationship_manager = pd.concat([customers, pd.DataFrame(customer)], ignore_index=True)
    return customer_id


def customer_relationship_manager_delete_customer(db: Workplace, customer_id: Any = None) -> Any:
    if not customer_id:
        return "Customer ID not provided."
    customers = db.customer_relationship_manager
    if customer_id not in customers["customer_id"].values:
        return "Customer not found."
    db.customer_relationship_manager = customers[customers["customer_id"] != customer_id]
    return "Customer deleted successfully."


TOOLS: dict[str, Callable[..., Any]] = {
    function.__name__: function
    for function in (
        company_directory_find_email_address,
        email_get_email_information_by_id,
        email_search_emails,
        email_send_email,
        email_delete_email,
        email_forward_email,
        email_reply_email,
        calendar_get_event_information_by_id,
        calendar_search_events,
        calendar_create_event,
        calendar_delete_event,
        calendar_update_event,
        analytics_engaged_users_count,
        analytics_get_visitor_information_by_id,
        analytics_create_plot,
        analytics_traffic_source_count,
        analytics_total_visits_count,
        analytics_get_average_session_duration,
        project_management_get_task_information_by_id,
        project_management_search_tasks,
        project_management_create_task,
        project_management_delete_task,
        project_management_update_task,
        customer_relationship_manager_search_customers,
        customer_relationship_manager_update_customer,
        customer_relationship_manager_add_customer,
        customer_relationship_manager_delete_customer,
    )
}


class ToolError(Exception):
    """A call that could not run: an unknown tool, or the tool raised (bad arguments)."""


def call_tool(db: Workplace, name: str, arguments: dict[str, Any]) -> Any:
    """Run tool ``name`` on ``db`` with keyword ``arguments``; :class:`ToolError` names the
    problem when it cannot run (the reference reports it to the model as the tool's result)."""
    function = TOOLS.get(name)
    if function is None:
        raise ToolError(f"unknown tool {name!r}")
    try:
        return function(db, **arguments)
    except Exception as error:  # noqa: BLE001 - a bad call is the model's problem, told to it
        raise ToolError(str(error) or type(error).__name__) from error


#: the order of NVIDIA's rows: the directory, then the five databases
SCHEMA_FILES = (
    "company_directory",
    "email",
    "calendar",
    "analytics",
    "project_management",
    "customer_relationship_manager",
)


def tool_schemas() -> list[dict[str, Any]]:
    """The 27 tools' schemas in the Responses API's flat form, as NVIDIA's rows list them
    (``{"type": "function", "name", "description", "parameters", "strict"}``)."""
    import json
    from importlib import resources

    folder = resources.files("cascade_rl.rewards.workplace") / "data" / "tools"
    keys = ("type", "name", "description", "parameters", "strict")
    return [
        {key: tool[key] for key in keys if key in tool}
        for name in SCHEMA_FILES
        for tool in json.loads(folder.joinpath(f"{name}.json").read_text(encoding="utf-8"))["tools"]
    ]
