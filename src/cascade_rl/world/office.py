"""The toy office: a small workplace-style tool environment for the toy world (issue 44; SPEC
section 11, Nemotron-Cascade 2's workplace assistant at toy scale).

Every task carries its own tiny database (domain ``workplace``, field ``database``: a few
colleagues, emails, project tasks and customers drawn for the row) and shows only the two tools
it needs, with short schemas. Each request takes two turns: a look-up whose result the model
must read (an address, a task id, an email id, a customer id), then the write that uses it; then
a one-line answer. The verdict is the workplace environment's own
(:mod:`cascade_rl.rewards.workplace`): the database state after the model's calls against the
state after the reference calls.

SFT rows are whole episodes (assistant calls, the tools' real results as ``tool`` turns, the
final answer), made by running the reference calls (:func:`reference_episode`), so what the
model reads in SFT is exactly what the environment answers during RL and evaluation.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cascade_rl.rewards.workplace.scorer import reference_episode
from cascade_rl.world.tasks import pick
from cascade_rl.world.vocab import NAMES

DOMAIN = "toy.org"
LISTS = ("Backlog", "In Progress", "Completed")
BOARDS = ("Back end", "Front end", "Design")
STATUSES = ("Lead", "Qualified", "Won", "Lost")
NOTES = (
    "see you at noon", "the report is ready", "call me back", "the meeting moved", "lunch is on me",
    "the room is booked", "the demo went well", "send me the slides", "I am out today", "thanks for the help",
    "the bus is late", "the budget is approved", "the server is down", "the client said yes", "the draft is done",
    "bring the badge", "the test passed", "the build failed", "the plan changed", "the coffee is fresh",
)  # fmt: skip
SUBJECTS = ("Lunch", "Report", "Meeting", "Update")
#: task and customer names are compositional (144 and 384 of them), so that every kind of request
#: has enough distinct texts for a benchmark, RL and SFT sets that share none: with six of each,
#: the benchmark took every delete request and RL and SFT had no move or delete task at all
TASK_NAMES = tuple(
    f"{verb} {thing}"
    for verb in ("Fix", "Add", "Test", "Plan", "Clean", "Draw", "Ship", "Check", "Move", "Sort", "Sign", "Open")
    for thing in ("login", "search", "logo", "data", "launch", "menu", "cart", "report", "inbox", "blog", "map", "chat")
)
_FIRMS = ("Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Stark", "Wayne",
          "Tyrell", "Cyberdyne", "Soylent", "Oscorp", "Wonka", "Gringotts", "Monarch", "Dunder",
          "Nakatomi", "Weyland", "Aperture", "Massive", "Pied", "Virtucon", "Contoso", "Fabrikam")  # fmt: skip
_TRADES = ("Labs", "Foods", "Bank", "Media", "Motors", "Health", "Games", "Travel", "Energy", "Books", "Farms", "Works",
           "Tools", "Air", "Shops", "Homes")  # fmt: skip
CUSTOMERS = tuple(f"{firm} {trade}" for firm in _FIRMS for trade in _TRADES)


def _schema(name: str, description: str, parameters: dict[str, str], required: tuple[str, ...]) -> dict:
    properties = {key: {"type": kind} for key, kind in parameters.items()}
    parameters_schema = {"type": "object", "properties": properties, "required": list(required)}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters_schema}}


TOOLS = {
    schema["function"]["name"]: schema
    for schema in (
        _schema("company_directory_find_email_address", "Find email addresses by name.", {"name": "string"}, ("name",)),
        _schema(
            "email_send_email",
            "Send an email.",
            {"recipient": "string", "subject": "string", "body": "string"},
            ("recipient", "subject", "body"),
        ),  # fmt: skip
        _schema("email_search_emails", "Search emails.", {"query": "string"}, ("query",)),
        _schema(
            "email_reply_email", "Reply to an email.", {"email_id": "string", "body": "string"}, ("email_id", "body")
        ),
        _schema("project_management_search_tasks", "Search tasks by name.", {"task_name": "string"}, ("task_name",)),
        _schema(
            "project_management_update_task",
            "Change a field of a task.",
            {"task_id": "string", "field": "string", "new_value": "string"},
            ("task_id", "field", "new_value"),
        ),  # fmt: skip
        _schema(
            "customer_relationship_manager_search_customers",
            "Search customers by name.",
            {"customer_name": "string"},
            ("customer_name",),
        ),  # fmt: skip
        _schema(
            "customer_relationship_manager_delete_customer",
            "Delete a customer.",
            {"customer_id": "string"},
            ("customer_id",),
        ),  # fmt: skip
    )
}


@dataclass(frozen=True)
class OfficeTask:
    """A request, its database, the two tools shown, and the reference calls one per turn."""

    kind: str
    request: str
    database: dict[str, Any]
    tools: tuple[str, str]
    calls: tuple[tuple[str, dict[str, Any]], ...]
    answer: str

    @property
    def ground_truth(self) -> list[dict[str, str]]:
        return [{"name": name, "arguments": json.dumps(arguments)} for name, arguments in self.calls]


def _ids(rng: random.Random, count: int) -> list[str]:
    return [f"{n:08d}" for n in sorted(rng.sample(range(10, 99), count))]


def _database(rng: random.Random) -> dict[str, Any]:
    """A fresh tiny database: four colleagues, and emails, tasks and customers among them."""
    people = rng.sample(NAMES, 4)
    addresses = [f"{name.lower()}@{DOMAIN}" for name in people]
    emails = [
        {
            "email_id": i,
            "inbox/outbox": "inbox",
            "sender/recipient": a,
            "subject": s,
            "sent_datetime": f"2023-11-2{d} 09:00:00",
            "body": pick(rng, NOTES),
        }  # fmt: skip
        for d, (i, a, s) in enumerate(zip(_ids(rng, 4), addresses, rng.sample(SUBJECTS, 4)))
    ]
    tasks = [
        {
            "task_id": i,
            "task_name": n,
            "assigned_to_email": pick(rng, addresses),
            "list_name": pick(rng, LISTS),
            "due_date": "2023-12-01",
            "board": pick(rng, BOARDS),
        }  # fmt: skip
        for i, n in zip(_ids(rng, 4), rng.sample(TASK_NAMES, 4))
    ]
    customers = [
        {
            "customer_id": i,
            "assigned_to_email": pick(rng, addresses),
            "customer_name": n,
            "customer_email": f"info@{n.lower().replace(' ', '')}.com",
            "status": pick(rng, STATUSES),
            "product_interest": "Software",
        }  # fmt: skip
        for i, n in zip(_ids(rng, 4), rng.sample(CUSTOMERS, 4))
    ]
    return {
        "email": emails,
        "project_management": tasks,
        "customer_relationship_manager": customers,
        "company_directory": addresses,
    }


def _send(rng: random.Random, db: dict[str, Any]) -> OfficeTask:
    address = pick(rng, db["company_directory"])
    name, subject, note = address.split("@")[0].capitalize(), pick(rng, SUBJECTS), pick(rng, NOTES)
    calls = (
        ("company_directory_find_email_address", {"name": name}),
        ("email_send_email", {"recipient": address, "subject": subject, "body": note}),
    )
    request = f"Email {name} with the subject {subject}: {note}."
    return OfficeTask("send", request, db, ("company_directory_find_email_address", "email_send_email"), calls, "Sent.")


def _reply(rng: random.Random, db: dict[str, Any]) -> OfficeTask:
    email, note = pick(rng, db["email"]), pick(rng, NOTES)
    name = email["sender/recipient"].split("@")[0].capitalize()
    calls = (
        ("email_search_emails", {"query": name.lower()}),
        ("email_reply_email", {"email_id": email["email_id"], "body": note}),
    )
    request = f"Reply to the email from {name}: {note}."
    return OfficeTask("reply", request, db, ("email_search_emails", "email_reply_email"), calls, "Replied.")


def _move(rng: random.Random, db: dict[str, Any]) -> OfficeTask:
    task = pick(rng, db["project_management"])
    target = pick(rng, [name for name in LISTS if name != task["list_name"]])
    calls = (
        ("project_management_search_tasks", {"task_name": task["task_name"]}),
        ("project_management_update_task", {"task_id": task["task_id"], "field": "list_name", "new_value": target}),
    )
    tools = ("project_management_search_tasks", "project_management_update_task")
    return OfficeTask("move", f"Move the task {task['task_name']} to {target}.", db, tools, calls, "Moved.")


def _drop(rng: random.Random, db: dict[str, Any]) -> OfficeTask:
    customer = pick(rng, db["customer_relationship_manager"])
    calls = (
        ("customer_relationship_manager_search_customers", {"customer_name": customer["customer_name"]}),
        ("customer_relationship_manager_delete_customer", {"customer_id": customer["customer_id"]}),
    )
    tools = ("customer_relationship_manager_search_customers", "customer_relationship_manager_delete_customer")
    return OfficeTask("delete", f"Delete the customer {customer['customer_name']}.", db, tools, calls, "Deleted.")


KINDS: dict[str, Callable[[random.Random, dict[str, Any]], OfficeTask]] = {
    "send": _send,
    "reply": _reply,
    "move": _move,
    "delete": _drop,
}


def office_task(rng: random.Random, kind: str | None = None) -> OfficeTask:
    """A toy-office task with its own database: of ``kind`` (one of :data:`KINDS`), or of one
    drawn at random."""
    return KINDS[kind or pick(rng, sorted(KINDS))](rng, _database(rng))


def rl_row(task: OfficeTask, row_id: str) -> dict[str, Any]:
    """An RL / benchmark row of domain ``workplace`` (its own ``database``)."""
    return {
        "id": row_id,
        "prompt": [{"role": "user", "content": task.request}],
        "domain": "workplace",
        "kind": task.kind,
        "ground_truth": task.ground_truth,
        "database": task.database,
        "tools": [TOOLS[name] for name in task.tools],
    }


def sft_row(task: OfficeTask, row_id: str, *, near_miss: bool = False) -> dict[str, Any]:
    """The whole reference episode in non-thinking mode: each call, the environment's real result,
    the answer. ``near_miss``: the episode answers right after its look-up, without the write
    (:mod:`.near_miss`)."""
    calls = task.calls[:1] if near_miss else task.calls
    prompt = [{"role": "user", "content": task.request, "mode": "no_think"}]
    try:
        messages = reference_episode(prompt, calls, task.answer, database=task.database)
    except ValueError as error:
        raise RuntimeError(f"toy office: {error}") from None
    return {"id": row_id, "messages": messages, "source": "tool", "tools": [TOOLS[n] for n in task.tools]}
