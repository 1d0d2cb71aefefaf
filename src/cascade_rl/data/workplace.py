"""Training and held-out tasks for the workplace assistant, generated from its databases
(Nemotron-Cascade 2's multi-domain RL, SPEC section 11; ``cascade data workplace``).

NVIDIA's 1,260 task prompts are not shipped here; this draws tasks of the same families from the
same five databases (:mod:`cascade_rl.rewards.workplace`): replying to, forwarding, sending and
deleting emails; creating, renaming, moving and cancelling events; moving, reassigning and
creating project tasks; updating, deleting and adding customers (one or several at once);
creating analytics plots. Each request names people by first name and things by their text, as
NVIDIA's do, so most need lookups first (the directory, a search) and several calls. Each task's
``ground_truth`` is computed from the initial databases, replayed, and kept only when it changes
the state (a task with nothing to do teaches nothing).

**Held out.** The evaluation tasks are drawn first; a training task is rejected when its request
(white space and case ignored) or its reference calls are those of an evaluation task, or of any
row of ``exclude`` files (NeMo Gym rows or RL rows: the benchmark you evaluate on), so no
training task has an evaluation task's prompt or answer. The report counts the rejections.

Rows are RL rows (domain ``workplace``, ``prompt`` with the system turn stating the date, the 27
``tools`` as chat-completions schemas, ``ground_truth``, ``category``), or with ``form="nemo-gym"``
NeMo Gym rows as NVIDIA publishes them (``responses_create_params.input`` / ``tools``), or with
``form="sft"`` SFT rows: the whole episode in non-thinking mode, one call per assistant turn with
the tool's real result on fresh databases: first the look-ups that find what the task writes
(the directory for an address, a search for an id: nothing is guessed), then the reference
calls, then "Done."; the tool-use warm-up an SFT stage gives before multi-domain RL.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from cascade_rl.rewards.workplace.database import Workplace, differing_tables
from cascade_rl.rewards.workplace.scorer import reference_calls, reference_episode, replay
from cascade_rl.rewards.workplace.tools import BOARDS, LISTS, PLOT_TYPES, PRODUCTS, STATUSES, tool_schemas

SYSTEM_PROMPT = (
    "Today's date is Thursday, 2023-11-30 and the current time is 23:59:00. Remember the current date and "
    "time when answering queries. Meetings must not start before 9am or end after 6pm."
)
FORMS = ("rl", "nemo-gym", "sft")
#: the last assistant turn of an SFT episode (the verdict reads the databases, never this text)
DONE = "Done."
SUBJECTS = ("Budget review", "Design handoff", "Sprint planning", "Client feedback", "Quarterly goals", "Team offsite")
BODIES = (
    "Thanks for the update - I will get back to you tomorrow.",
    "Can we discuss this at our next meeting?",
    "Please send me the latest numbers by Friday.",
    "Looks good to me, go ahead.",
    "I have a few questions, let's talk this afternoon.",
)
EVENT_NAMES = ("Project Sync", "Design Review", "Budget Check-in", "Roadmap Planning", "Client Prep", "1:1")
NEW_TASKS = ("Fix login timeout", "Update onboarding copy", "Add export to CSV", "Refactor payment module")
NEW_CUSTOMERS = ("Dakota Thomas", "Morgan Lee", "Riley Chen", "Jordan Price", "Avery Brooks", "Quinn Foster")
PLOT_WORDS = {
    "total_visits": "total visits",
    "session_duration_seconds": "average session duration",
    "user_engaged": "engaged users",
    "visits_direct": "direct visits",
    "visits_social_media": "visits from social media",
}
Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Task:
    category: str
    request: str
    calls: tuple[Call, ...]
    #: the reads that find what ``calls`` need (addresses, ids): an SFT episode makes them first;
    #: the verdict never needs them (reads change nothing)
    lookups: tuple[Call, ...] = ()

    @property
    def ground_truth(self) -> list[dict[str, str]]:
        return [{"name": name, "arguments": json.dumps(arguments)} for name, arguments in self.calls]


@dataclass
class TaskReport:
    """How many tasks were written and why candidates were rejected."""

    written: dict[str, int] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)

    def reject(self, reason: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1


def _first(address: str) -> str:
    return address.split(".")[0].split("@")[0].capitalize()


def _day(timestamp: str) -> str:
    return pd.Timestamp(timestamp).strftime("%B %-d")


def _pick(rng: random.Random, frame: pd.DataFrame) -> dict[str, Any]:
    return frame.iloc[rng.randrange(len(frame))].to_dict()


def _address_of(address: str) -> Call:
    """The directory look-up of a person named by first name, as the request names them."""
    return "company_directory_find_email_address", {"name": _first(address)}


def _emails_about(sender: str, subject: str = "") -> Call:
    query = f"{_first(sender).lower()} {subject}".strip()
    return "email_search_emails", {"query": query, "page_size": 10}


def _events_on(day: str, name: str = "") -> Call:
    bounds = {"time_min": f"{day} 00:00:00", "time_max": f"{day} 23:59:59", "page_size": 10}
    return "calendar_search_events", {"query": name, **bounds} if name else bounds


def _task_named(task: Mapping[str, Any]) -> Call:
    return "project_management_search_tasks", {"task_name": task["task_name"], "board": task["board"]}


# ----------------------------------------------------------------------------- task families
def _reply(db: Workplace, rng: random.Random) -> Task | None:
    email = _pick(rng, db.email)
    same = db.email[
        (db.email["sender/recipient"] == email["sender/recipient"]) & (db.email["subject"] == email["subject"])
    ]
    latest = same.sort_values("sent_datetime").iloc[-1]
    body = rng.choice(BODIES)
    request = f"Reply to {_first(latest['sender/recipient'])}'s last email about '{latest['subject']}' with '{body}'"
    lookups = (_emails_about(latest["sender/recipient"], latest["subject"]),)
    return Task("email", request, (("email_reply_email", {"email_id": latest["email_id"], "body": body}),), lookups)


def _forward(db: Workplace, rng: random.Random) -> Task | None:
    email = _pick(rng, db.email)
    same = db.email[
        (db.email["sender/recipient"] == email["sender/recipient"]) & (db.email["subject"] == email["subject"])
    ]
    latest = same.sort_values("sent_datetime").iloc[-1]
    to = rng.choice([a for a in db.company_directory["email_address"] if a != latest["sender/recipient"]])
    request = f"Forward {_first(latest['sender/recipient'])}'s last email about '{latest['subject']}' to {_first(to)}"
    lookups = (_emails_about(latest["sender/recipient"], latest["subject"]), _address_of(to))
    return Task(
        "email", request, (("email_forward_email", {"email_id": latest["email_id"], "recipient": to}),), lookups
    )


def _send(db: Workplace, rng: random.Random) -> Task | None:
    to, subject, body = (
        rng.choice(list(db.company_directory["email_address"])),
        rng.choice(SUBJECTS),
        rng.choice(BODIES),
    )
    request = f"Send an email to {_first(to)} with the subject '{subject}' saying '{body}'"
    call = ("email_send_email", {"recipient": to, "subject": subject, "body": body})
    return Task("email", request, (call,), (_address_of(to),))


def _delete_last(db: Workplace, rng: random.Random) -> Task | None:
    sender = rng.choice(list(db.company_directory["email_address"]))
    theirs = db.email[db.email["sender/recipient"] == sender].sort_values("sent_datetime")
    if theirs.empty:
        return None
    request = f"Delete my last email from {_first(sender).lower()}"
    lookups = (_address_of(sender), ("email_search_emails", {"query": sender, "page_size": 10}))
    return Task("email", request, (("email_delete_email", {"email_id": theirs.iloc[-1]["email_id"]}),), lookups)


def _create_event(db: Workplace, rng: random.Random) -> Task | None:
    who, name = rng.choice(list(db.company_directory["email_address"])), rng.choice(EVENT_NAMES)
    minutes = rng.choice((30, 45, 60, 90))
    start = pd.Timestamp("2023-12-01") + pd.Timedelta(days=rng.randrange(0, 28))
    if start.weekday() >= 5:
        return None
    start += pd.Timedelta(hours=rng.randrange(9, 17), minutes=rng.choice((0, 30)))
    if start + pd.Timedelta(minutes=minutes) > start.normalize() + pd.Timedelta(hours=18):
        return None
    when = start.strftime("%B %-d at %-I:%M %p").replace(":00 ", " ")
    request = f"Schedule a {minutes}-minute meeting called '{name}' with {_first(who)} on {when}"
    arguments = {"event_name": name, "participant_email": who, "event_start": str(start), "duration": str(minutes)}
    return Task("calendar", request, (("calendar_create_event", arguments),), (_address_of(who),))


def _rename_last_event(db: Workplace, rng: random.Random) -> Task | None:
    day = _pick(rng, db.calendar)["event_start"][:10]
    on_day = db.calendar[db.calendar["event_start"].str.startswith(day)].sort_values("event_start")
    last, name = on_day.iloc[-1], rng.choice(EVENT_NAMES)
    if len(on_day[on_day["event_start"] == last["event_start"]]) > 1 or last["event_name"] == name:
        return None
    request = f"Change the name of the last event on {_day(day)} to {name}"
    return Task(
        "calendar",
        request,
        (("calendar_update_event", {"event_id": last["event_id"], "field": "event_name", "new_value": name}),),
        (_events_on(day),),
    )


def _one_event(db: Workplace, rng: random.Random) -> tuple[dict[str, Any], str] | None:
    """An event named by name, person and day that no other event shares."""
    event = _pick(rng, db.calendar)
    day = event["event_start"][:10]
    same = db.calendar[
        (db.calendar["event_name"] == event["event_name"])
        & (db.calendar["participant_email"] == event["participant_email"])
    ]
    if (same["event_start"].str.startswith(day)).sum() != 1:
        return None
    return event, f"my {event['event_name']} with {_first(event['participant_email'])} on {_day(day)}"


def _cancel_event(db: Workplace, rng: random.Random) -> Task | None:
    found = _one_event(db, rng)
    if found is None:
        return None
    event, described = found
    lookups = (_events_on(event["event_start"][:10], event["event_name"]),)
    return Task(
        "calendar", f"Cancel {described}", (("calendar_delete_event", {"event_id": event["event_id"]}),), lookups
    )


def _move_event(db: Workplace, rng: random.Random) -> Task | None:
    found = _one_event(db, rng)
    if found is None:
        return None
    event, described = found
    start = pd.Timestamp(event["event_start"]).normalize() + pd.Timedelta(hours=rng.randrange(9, 16))
    if str(start) == event["event_start"] or start + pd.Timedelta(
        minutes=int(event["duration"])
    ) > start.normalize() + pd.Timedelta(hours=18):
        return None
    request = f"Move {described} to {start.strftime('%-I %p').lower()}"
    return Task(
        "calendar",
        request,
        (("calendar_update_event", {"event_id": event["event_id"], "field": "event_start", "new_value": str(start)}),),
        (_events_on(event["event_start"][:10], event["event_name"]),),
    )


def _one_task(db: Workplace, rng: random.Random) -> dict[str, Any] | None:
    """A task named by its name, board and assignee that no other task shares."""
    task, tasks = _pick(rng, db.project_management), db.project_management
    same = (tasks["task_name"] == task["task_name"]) & (tasks["board"] == task["board"])
    return task if (same & (tasks["assigned_to_email"] == task["assigned_to_email"])).sum() == 1 else None


def _move_task(db: Workplace, rng: random.Random) -> Task | None:
    task = _one_task(db, rng)
    if task is None:
        return None
    target = rng.choice([name for name in LISTS if name != task["list_name"]])
    owner = _first(task["assigned_to_email"])
    request = f"Move {owner}'s task '{task['task_name']}' on the {task['board']} board to {target}"
    return Task(
        "project_management",
        request,
        (("project_management_update_task", {"task_id": task["task_id"], "field": "list_name", "new_value": target}),),
        (_task_named(task),),
    )


def _reassign_task(db: Workplace, rng: random.Random) -> Task | None:
    task = _one_task(db, rng)
    people = sorted(set(db.project_management["assigned_to_email"]) - {task["assigned_to_email"]}) if task else []
    if not people:
        return None
    to, owner = rng.choice(people), _first(task["assigned_to_email"])
    request = f"Reassign the task '{task['task_name']}' on the {task['board']} board from {owner} to {_first(to)}"
    arguments = {"task_id": task["task_id"], "field": "assigned_to_email", "new_value": to}
    return Task("project_management", request, (("project_management_update_task", arguments),),
                (_task_named(task), _address_of(to)))  # fmt: skip


def _create_task(db: Workplace, rng: random.Random) -> Task | None:
    who = rng.choice(sorted(set(db.project_management["assigned_to_email"])))
    name, board, target = rng.choice(NEW_TASKS), rng.choice(BOARDS), rng.choice(LISTS)
    due = (pd.Timestamp("2023-12-01") + pd.Timedelta(days=rng.randrange(0, 30))).strftime("%Y-%m-%d")
    request = f"Create a task '{name}' for {_first(who)} on the {board} board in {target}, due {_day(due)}"
    arguments = {"task_name": name, "assigned_to_email": who, "list_name": target, "due_date": due, "board": board}
    return Task("project_management", request, (("project_management_create_task", arguments),), (_address_of(who),))


def _crm_batch(db: Workplace, rng: random.Random) -> Task | None:
    customers = db.customer_relationship_manager
    owner = rng.choice(sorted(set(customers["assigned_to_email"])))
    product, status = rng.choice(PRODUCTS), rng.choice(STATUSES)
    mine = (customers["assigned_to_email"] == owner) & (customers["product_interest"] == product)
    chosen = customers[mine & (customers["status"] == status)]
    target = rng.choice([s for s in STATUSES if s != status])
    if chosen.empty or len(chosen) > 5:
        return None
    request = (
        f"Move all of {_first(owner)}'s customers interested in {product.lower()} that are in the "
        f"{status.lower()} stage to {target.lower()} in the crm"
    )
    update = "customer_relationship_manager_update_customer"
    calls = tuple(
        (update, {"customer_id": cid, "field": "status", "new_value": target}) for cid in chosen["customer_id"]
    )
    search = {"assigned_to_email": owner, "product_interest": product, "status": status, "page_size": 10}
    lookups = (_address_of(owner), ("customer_relationship_manager_search_customers", search))
    return Task("customer_relationship_manager", request, calls, lookups)


def _crm_delete(db: Workplace, rng: random.Random) -> Task | None:
    customer = _pick(rng, db.customer_relationship_manager)
    if (db.customer_relationship_manager["customer_name"] == customer["customer_name"]).sum() != 1:
        return None
    request = f"Delete {customer['customer_name']} from the crm"
    return Task(
        "customer_relationship_manager",
        request,
        (("customer_relationship_manager_delete_customer", {"customer_id": customer["customer_id"]}),),
        (("customer_relationship_manager_search_customers", {"customer_name": customer["customer_name"]}),),
    )


def _crm_add(db: Workplace, rng: random.Random) -> Task | None:
    name, owner = rng.choice(NEW_CUSTOMERS), rng.choice(list(db.company_directory["email_address"]))
    request = f"Add {name} as a new lead in the crm and assign them to {_first(owner)}"
    arguments = {"customer_name": name, "assigned_to_email": owner, "status": "Lead"}
    add = ("customer_relationship_manager_add_customer", arguments)
    return Task("customer_relationship_manager", request, (add,), (_address_of(owner),))


def _plot(db: Workplace, rng: random.Random) -> Task | None:
    value, kind = rng.choice(sorted(PLOT_WORDS)), rng.choice(PLOT_TYPES)
    start = pd.Timestamp("2023-09-01") + pd.Timedelta(days=rng.randrange(0, 80))
    end = start + pd.Timedelta(days=rng.choice((7, 14, 30)))
    if end > pd.Timestamp("2023-11-30"):
        return None
    low, high = start.strftime("%Y-%m-%d"), end.strftime("%Y-%m-%d")
    chart = {"histogram": "histogram"}.get(kind, f"{kind} chart")
    request = f"Create a {chart} of {PLOT_WORDS[value]} between {_day(low)} and {_day(high)}"
    arguments = {"time_min": low, "time_max": high, "value_to_plot": value, "plot_type": kind}
    return Task("analytics", request, (("analytics_create_plot", arguments),))


FAMILIES: dict[str, Callable[[Workplace, random.Random], Task | None]] = {
    "email_reply": _reply,
    "email_forward": _forward,
    "email_send": _send,
    "email_delete": _delete_last,
    "calendar_create": _create_event,
    "calendar_rename": _rename_last_event,
    "calendar_cancel": _cancel_event,
    "calendar_move": _move_event,
    "task_move": _move_task,
    "task_reassign": _reassign_task,
    "task_create": _create_task,
    "crm_batch": _crm_batch,
    "crm_delete": _crm_delete,
    "crm_add": _crm_add,
    "analytics_plot": _plot,
}


# ----------------------------------------------------------------------------- drawing and holding out
def _request_key(text: str) -> str:
    return " ".join(str(text).lower().split())


def _calls_key(calls: Iterable[Call]) -> str:
    return json.dumps(sorted(json.dumps([name, arguments], sort_keys=True) for name, arguments in calls))


@dataclass
class HeldOut:
    """Requests and reference calls no training task may repeat."""

    requests: set[str] = field(default_factory=set)
    answers: set[str] = field(default_factory=set)

    def add(self, request: str, calls: Iterable[Call]) -> None:
        self.requests.add(_request_key(request))
        self.answers.add(_calls_key(calls))

    def clash(self, task: Task) -> str | None:
        if _request_key(task.request) in self.requests:
            return "same request as a held-out task"
        if _calls_key(task.calls) in self.answers:
            return "same reference calls as a held-out task"
        return None


def held_out_rows(rows: Iterable[Mapping[str, Any]], held: HeldOut, report: TaskReport) -> None:
    """Add the requests and reference calls of ``rows`` (NeMo Gym or RL workplace rows) to ``held``."""
    for row in rows:
        try:
            messages = row.get("prompt") or row["responses_create_params"]["input"]
            request = next(m["content"] for m in reversed(messages) if m.get("role") == "user")
            calls = [(c["name"], c["arguments"]) for c in reference_calls(row.get("ground_truth", []))]
        except (KeyError, TypeError, AttributeError, StopIteration, ValueError):
            report.reject("excluded row unreadable")
            continue
        held.add(request, calls)


def changes_state(task: Task) -> bool:
    """Whether the task's reference calls all run and leave the databases changed."""
    db, failed = replay(task.ground_truth)
    return failed == 0 and bool(differing_tables(db, Workplace.fresh()))


def draw_tasks(count: int, rng: random.Random, held: HeldOut, report: TaskReport) -> list[Task]:
    """``count`` distinct tasks that clash with nothing ``held`` (rejections counted in ``report``)."""
    db, names, tasks, seen = Workplace.fresh(), sorted(FAMILIES), [], set()
    for _ in range(200 * count + 1000):
        if len(tasks) == count:
            return tasks
        task = FAMILIES[rng.choice(names)](db, rng)
        if task is None or _request_key(task.request) in seen:
            continue
        reason = held.clash(task) or (None if changes_state(task) else "changes nothing")
        if reason:
            report.reject(reason)
            continue
        seen.add(_request_key(task.request))
        tasks.append(task)
    raise RuntimeError(f"only {len(tasks)} of {count} distinct workplace tasks could be drawn; ask for fewer")


def task_row(task: Task, row_id: str, form: str = "rl") -> dict[str, Any]:
    """A task as an RL row (domain ``workplace``), a NeMo Gym row, or an SFT row: the reference
    episode, each call with its real result (module docstring)."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task.request}]
    category = f"workplace_assistant_{task.category}"
    if form == "nemo-gym":
        create = {"input": messages, "tools": tool_schemas(), "parallel_tool_calls": False, "temperature": 1.0}
        return {"id": row_id, "responses_create_params": create, "ground_truth": task.ground_truth,
                "category": category, "environment_name": "workplace_assistant"}  # fmt: skip
    tools = [
        {"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters")}}
        for t in tool_schemas()
    ]
    if form == "sft":
        prompt = [*messages[:-1], {**messages[-1], "mode": "no_think"}]
        episode = reference_episode(prompt, task.lookups + task.calls, DONE)
        return {"id": row_id, "messages": episode, "tools": tools, "source": "tool", "category": category}
    return {"id": row_id, "domain": "workplace", "prompt": messages, "tools": tools,
            "ground_truth": task.ground_truth, "category": category}  # fmt: skip


def write_tasks(
    out_dir: str | Path,
    *,
    train: int,
    evaluation: int,
    seed: int = 0,
    exclude: Iterable[Mapping[str, Any]] = (),
    form: str = "rl",
) -> TaskReport:
    """Write ``workplace_eval.jsonl`` (drawn first) and ``workplace_train.jsonl`` (held apart from
    it and from the ``exclude`` rows) into ``out_dir``; the report counts rows and rejections."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {', '.join(FORMS)}, got {form!r}")
    out, report, held = Path(out_dir), TaskReport(), HeldOut()
    out.mkdir(parents=True, exist_ok=True)
    held_out_rows(exclude, held, report)
    rng = random.Random(f"cascade-workplace:{seed}")
    evaluation_tasks = draw_tasks(evaluation, rng, held, report)
    for task in evaluation_tasks:
        held.add(task.request, task.calls)
    for split, tasks in (("eval", evaluation_tasks), ("train", draw_tasks(train, rng, held, report))):
        rows = [task_row(task, f"workplace-{split}-{i:05d}", form) for i, task in enumerate(tasks)]
        (out / f"workplace_{split}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        report.written[f"workplace_{split}.jsonl"] = len(rows)
    return report
