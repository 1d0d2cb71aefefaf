"""The workplace assistant's verdict and its episodes (Nemotron-Cascade 2's multi-domain RL, SPEC
section 11; NVIDIA's ``workplace_assistant`` environment in NeMo Gym).

A row (domain ``workplace``, NeMo Gym's fields kept verbatim) carries the request in its
``prompt`` messages (the system turn states the date), the 27 tool schemas in ``tools`` and the
reference in ``ground_truth``: the calls that do the task, ``[{"name", "arguments"}]`` with the
arguments as a JSON text (an object is accepted too), or one JSON text of that list.

**Reward 1** when every database ends in the same state (:mod:`.database`) after the model's
calls as after the reference calls, each replayed in order on a fresh copy of the databases;
else 0. As in NVIDIA's verifier, the verdict replays the calls: a call that fails (unknown tool,
bad arguments, arguments that are not JSON) changes nothing and is skipped, reading calls change
nothing, and what the model answered in words is not judged.

* :class:`WorkplaceEpisode` is the live environment (:mod:`cascade_rl.rewards.environment`):
  each call runs on the episode's own copy and its result goes back to the model as NeMo Gym's
  resources server answers, ``{"output": RESULT}`` (a tool error is such a result, e.g.
  ``{"output": "Error executing tool 'x': ..."}``); arguments set to null are left out, as that
  server does. Its verdict replays the episode's calls (so an episode and ``cascade score`` on
  its calls agree).
* :func:`score` judges offline: the model's ``calls`` in order (``{name, arguments}``, e.g. a
  trajectory from another system), or, without ``calls``, the ``<tool_call>`` blocks of
  ``response`` (every assistant turn of a transcript, thinking blocks left out).

Details: ``calls`` (how many were judged), ``failed_calls`` (could not run), ``differs`` (the
databases that ended differently), and for episodes ``turns`` and ``end``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from cascade_rl.rewards.base import Score
from cascade_rl.rewards.environment import DEFAULT_MAX_STEPS, Episode, ToolCall, read_tool_calls
from cascade_rl.rewards.workplace.database import Workplace, differing_tables
from cascade_rl.rewards.workplace.tools import ToolError, call_tool

_THINKING = re.compile(r"<think>.*?(?:</think>|$)", re.S)


def reference_calls(ground_truth: Any) -> list[dict[str, Any]]:
    """The reference calls of ``ground_truth`` as ``{"name", "arguments": dict}``; a
    :class:`ValueError` names the entry that cannot be read."""
    if isinstance(ground_truth, str):
        try:
            ground_truth = json.loads(ground_truth)
        except json.JSONDecodeError as error:
            raise ValueError(f"ground_truth is not valid JSON: {error}") from None
    if not isinstance(ground_truth, list):
        raise ValueError(f"ground_truth must be a list of calls, got {type(ground_truth).__name__}")
    calls = []
    for index, call in enumerate(ground_truth):
        where = f"ground_truth[{index}]"
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise ValueError(f"{where} is not a call with a name")
        arguments = _arguments(call.get("arguments", {}))
        if arguments is None:
            raise ValueError(f"{where}.arguments is not a JSON object")
        calls.append({"name": call["name"], "arguments": arguments})
    return calls


def check_row(row: Mapping[str, Any]) -> None:
    """A row this environment can run: readable ``ground_truth`` (:func:`reference_calls`), ``tools``
    (when given) a list of function schemas, ``database`` (when given) readable tables, ``calls``
    (when given) a list (ValueError names the field)."""
    reference_calls(row.get("ground_truth"))
    tools = row.get("tools")
    if tools is not None:
        if isinstance(tools, str):
            try:
                tools = json.loads(tools)
            except json.JSONDecodeError as error:
                raise ValueError(f"tools is not valid JSON: {error}") from None
        if not isinstance(tools, list) or not all(_tool_name(tool) for tool in tools):
            raise ValueError("tools must be a list of function schemas, each with a name")
    if row.get("database") is not None:
        Workplace.fresh(row["database"])
    if row.get("calls") is not None and not isinstance(row["calls"], list):
        raise ValueError("calls must be a list of {name, arguments}")


def _tool_name(tool: Any) -> str | None:
    function = tool.get("function", tool) if isinstance(tool, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    return name if isinstance(name, str) and name else None


def _arguments(value: Any) -> dict[str, Any] | None:
    """Arguments given as an object or as the JSON text of one; None when they are neither."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    return dict(value) if isinstance(value, Mapping) else None


def replay(calls: Sequence[Mapping[str, Any]], database: Mapping[str, Any] | None = None) -> tuple[Workplace, int]:
    """A fresh copy of the databases after ``calls`` (``{"name", "arguments"}``), and how many
    of them could not run (they are skipped, as in NVIDIA's verifier)."""
    db, failed = Workplace.fresh(database), 0
    for call in calls:
        arguments = _arguments(call.get("arguments", {})) if isinstance(call, Mapping) else None
        if arguments is None or not isinstance(call.get("name"), str):
            failed += 1
            continue
        try:
            call_tool(db, call["name"], arguments)
        except ToolError:
            failed += 1
    return db, failed


def verdict(calls: Sequence[Mapping[str, Any]], ground_truth: Any, database: Mapping[str, Any] | None = None) -> Score:
    """Reward 1 when ``calls`` leave the databases as ``ground_truth`` does (module docstring)."""
    expected, _ = replay(reference_calls(ground_truth), database)
    made, failed = replay(calls, database)
    differs = differing_tables(made, expected)
    return Score(0.0 if differs else 1.0, {"calls": len(calls), "failed_calls": failed, "differs": differs})


def score(
    response: str = "",
    *,
    ground_truth: Any,
    calls: Sequence[Mapping[str, Any]] | None = None,
    database: Mapping[str, Any] | None = None,
    prompt: Any = None,
) -> Score:
    """The offline verdict on the model's ``calls`` or on the calls of a transcript (module docstring)."""
    if calls is None:
        calls = [call.as_dict() for call in read_tool_calls(_THINKING.sub("", response or "")) if call.error is None]
    elif not isinstance(calls, (list, tuple)):
        raise ValueError(f"calls must be a list of {{name, arguments}}, got {type(calls).__name__}")
    return verdict(list(calls), ground_truth, database)


def _plain(value: Any) -> Any:
    """A tool's result as JSON shows it: a missing value (NaN) is null, as the reference's server writes it."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


class WorkplaceEpisode(Episode):
    """A live workplace episode: the databases copied fresh, the model's calls run on them."""

    def __init__(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Any] | None = None,
        *,
        ground_truth: Any,
        database: Mapping[str, Any] | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        **_row: Any,
    ) -> None:
        super().__init__(messages, tools, max_steps=max_steps)
        reference_calls(ground_truth)  # a row whose reference cannot be read fails before any turn
        self.ground_truth, self.database = ground_truth, database
        self.db = Workplace.fresh(database)

    def run_call(self, call: ToolCall) -> tuple[str, bool]:
        arguments = {key: value for key, value in call.arguments.items() if value is not None}
        try:
            output, failed = call_tool(self.db, call.name, arguments), False
        except ToolError as error:
            output, failed = f"Error executing tool '{call.name}': {error}", True
        return json.dumps({"output": _plain(output)}, ensure_ascii=False, default=str), failed

    def score(self) -> Score:
        made = [call.as_dict() for call in self.calls if call.error is None]
        result = verdict(made, self.ground_truth, self.database)
        return Score(result.reward, {**result.details, **self.summary()})


def reference_episode(
    messages: Sequence[Mapping[str, Any]],
    calls: Sequence[tuple[str, Mapping[str, Any]]],
    answer: str,
    *,
    database: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The transcript of an episode that makes ``calls`` (name, arguments) in order, one per
    assistant turn, each followed by the environment's real result, and ends with ``answer``:
    an SFT row's messages. A reference call that fails is the task's error, not the model's."""
    episode = WorkplaceEpisode(messages, ground_truth=[], database=database)
    for name, arguments in calls:
        function = {"name": name, "arguments": json.dumps(dict(arguments))}
        episode.messages.append(
            {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": function}]}
        )
        content, failed = episode.run_call(ToolCall(name, dict(arguments)))
        if failed:
            raise ValueError(f"the reference call {name} failed: {content}")
        episode.messages.append({"role": "tool", "name": name, "content": content})
    episode.messages.append({"role": "assistant", "content": answer})
    return episode.messages
