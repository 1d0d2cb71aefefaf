"""The workplace assistant's databases and what counts as "the same state" (Nemotron-Cascade 2's
multi-domain RL, SPEC section 11; NVIDIA's ``workplace_assistant`` environment in NeMo Gym).

A :class:`Workplace` is one fresh copy of the company's five databases plus its directory:

==================================  ==============================================================
``email``                           inbox and outbox (``email_id``, ``inbox/outbox``, ...)
``calendar``                        calendar events (``event_id``, ``event_name``, ...)
``analytics``                       website visits (read only) and the ``plots`` the tools create
``project_management``              project tasks (``task_id``, ``task_name``, ``board``, ...)
``customer_relationship_manager``   customers (``customer_id``, ``status``, ``follow_up_by``, ...)
``company_directory``               employees' email addresses (read only)
==================================  ==============================================================

The built-in data is NVIDIA's (Apache-2.0, ``data/SOURCES.md``), read once and copied for every
episode, so each episode and each replay starts from the same initial state. A row may instead
carry its own small database (``database``: ``{table: [records]}``, the toy world's), read the
same way.

**The same state** (NVIDIA's verifier, which this follows so that verdicts agree): the five
compared tables are ``email``, ``calendar``, the analytics ``plots``, ``project_management`` and
``customer_relationship_manager``. Every column except ``status``, ``list_name`` and ``board`` is
lower-cased, then each pair of tables must be equal as pandas ``DataFrame.equals`` sees it: the
same rows in the same order, with the same values and row labels. Row labels follow the tools'
own bookkeeping (a deleted row leaves a gap; a new email, task or customer renumbers the table,
a new calendar event is labelled 0), so, as in the reference, the order in which rows are
deleted and added can matter.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import lru_cache
from importlib import resources
from typing import Any

import pandas as pd

#: database name -> (file of the built-in data, its columns)
TABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    "email": ("emails.csv", ("email_id", "inbox/outbox", "sender/recipient", "subject", "sent_datetime", "body")),
    "calendar": ("calendar_events.csv", ("event_id", "event_name", "participant_email", "event_start", "duration")),
    "analytics": (
        "analytics_data.csv",
        ("date_of_visit", "visitor_id", "page_views", "session_duration_seconds", "traffic_source", "user_engaged"),
    ),
    "project_management": (
        "project_tasks.csv",
        ("task_id", "task_name", "assigned_to_email", "list_name", "due_date", "board"),
    ),
    "customer_relationship_manager": (
        "customer_relationship_manager_data.csv",
        (
            "customer_id",
            "assigned_to_email",
            "customer_name",
            "customer_email",
            "customer_phone",
            "last_contact_date",
            "product_interest",
            "status",
            "follow_up_by",
            "notes",
        ),
    ),
}
DIRECTORY_FILE = "email_addresses.csv"
#: columns whose case matters when states are compared (NVIDIA's verifier keeps them as written)
CASE_SENSITIVE = ("status", "list_name", "board")


@dataclass
class Workplace:
    """One copy of the databases that the tools read and change (module docstring)."""

    email: pd.DataFrame
    calendar: pd.DataFrame
    analytics: pd.DataFrame
    plots: pd.DataFrame
    project_management: pd.DataFrame
    customer_relationship_manager: pd.DataFrame
    company_directory: pd.DataFrame

    @classmethod
    def fresh(cls, database: Mapping[str, Any] | None = None) -> Workplace:
        """A new copy of the built-in databases, or of a row's own ``database``."""
        initial = _builtin() if database is None else _inline(database)
        return cls(**{f.name: getattr(initial, f.name).copy(deep=True) for f in fields(cls)})

    def tables(self) -> dict[str, pd.DataFrame]:
        """The five compared tables as the tools left them."""
        return {
            "email": self.email,
            "calendar": self.calendar,
            "analytics": self.plots,
            "project_management": self.project_management,
            "customer_relationship_manager": self.customer_relationship_manager,
        }

    def state(self) -> dict[str, pd.DataFrame]:
        """The five compared tables, normalised for comparison (module docstring)."""
        return {name: _case_folded(table) for name, table in self.tables().items()}


def differing_tables(first: Workplace, second: Workplace) -> list[str]:
    """The databases whose states differ (empty: the same state). Tables equal as written are
    equal once case-folded, so only the others are folded and compared again."""
    mine, theirs = first.tables(), second.tables()
    return [
        name
        for name in mine
        if not mine[name].equals(theirs[name]) and not _case_folded(mine[name]).equals(_case_folded(theirs[name]))
    ]


def _case_folded(table: pd.DataFrame) -> pd.DataFrame:
    table = table.copy()
    for column in table.columns:
        if column not in CASE_SENSITIVE:
            table[column] = table[column].str.lower()
    return table


def _read(text: str | io.StringIO, columns: tuple[str, ...] | None = None) -> pd.DataFrame:
    """A table as every tool sees it: every value a string, an empty cell missing (NaN)."""
    frame = pd.read_csv(io.StringIO(text) if isinstance(text, str) else text, dtype=str)
    return frame if columns is None else frame.reindex(columns=list(columns))


def _with_plots(tables: dict[str, pd.DataFrame], directory: pd.DataFrame) -> Workplace:
    analytics = tables["analytics"]
    analytics["user_engaged"] = analytics["user_engaged"] == "True"
    return Workplace(
        email=tables["email"],
        calendar=tables["calendar"],
        analytics=analytics,
        plots=pd.DataFrame(columns=["file_path"]),
        project_management=tables["project_management"],
        customer_relationship_manager=tables["customer_relationship_manager"],
        company_directory=directory,
    )


@lru_cache(maxsize=1)
def _builtin() -> Workplace:
    """NVIDIA's databases, read once (every episode copies them)."""
    data = resources.files("cascade_rl.rewards.workplace") / "data"
    tables = {name: _read(data.joinpath(file).read_text(encoding="utf-8")) for name, (file, _) in TABLES.items()}
    addresses = data.joinpath(DIRECTORY_FILE).read_text(encoding="utf-8").split()
    return _with_plots(tables, pd.DataFrame({"email_address": addresses}))


def _inline(database: Mapping[str, Any]) -> Workplace:
    """A row's own database: ``{table: [records]}`` for the tables of :data:`TABLES` (a missing
    table is empty) and ``company_directory``: a list of email addresses."""
    if not isinstance(database, Mapping):
        raise ValueError(f"database must be an object of tables, got {type(database).__name__}")
    unknown = sorted(set(database) - set(TABLES) - {"company_directory"})
    if unknown:
        raise ValueError(f"database: unknown table {unknown[0]!r}; known: {', '.join([*TABLES, 'company_directory'])}")
    tables = {name: _records_table(name, database.get(name) or [], columns) for name, (_, columns) in TABLES.items()}
    addresses = database.get("company_directory") or []
    if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
        raise ValueError("database.company_directory must be a list of email addresses")
    return _with_plots(tables, pd.DataFrame({"email_address": addresses}, dtype=object))


def _records_table(name: str, records: Any, columns: tuple[str, ...]) -> pd.DataFrame:
    if not isinstance(records, list) or not all(isinstance(r, Mapping) for r in records):
        raise ValueError(f"database.{name} must be a list of records (objects)")
    for record in records:
        extra = sorted(set(record) - set(columns))
        if extra:
            raise ValueError(f"database.{name}: unknown column {extra[0]!r}; columns: {', '.join(columns)}")
    text = pd.DataFrame([{c: record.get(c) for c in columns} for record in records], columns=list(columns))
    return _read(io.StringIO(text.to_csv(index=False)), columns)
