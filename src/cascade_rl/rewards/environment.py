"""Multi-turn environments: the interface a rollout engine drives step by step (Nemotron-Cascade
2's multi-domain RL, SPEC section 11; docs/environments.md).

An environment is a reward domain whose verdict depends on what the model *did* over several
turns, not on one response: the workplace assistant's tools change databases, and the episode is
judged by the state they end in. The split follows NeMo Gym's: the environment (NeMo Gym's
*resources server*) owns the tools, their state and the verdict; the loop that alternates model
and tools (NeMo Gym's *agent*) is the caller's, here the trainer's on-policy rollout engine or
the evaluation loop, which own the model, its tokens and the budgets on them.

One episode::

    episode = start_episode(row)                  # a row of a domain with an environment
    text = render(episode.messages)               # prompt: the row's messages (tools in the system turn)
    while True:
        response = generate(text)                 # one assistant turn, the model's own tokens
        step = episode.step(response)             # its <tool_call> blocks run, in order
        if step.done:
            break
        text += response + "<|im_end|>" + tool_turn_text(step.messages)   # tool tokens: masked
    score = episode.score()                       # a Score: reward and details

* **Calls** are read from the answer of each turn (the text after ``</think>``; an unfinished
  thinking block has no answer) in the project's chat convention, ``<tool_call>{"name": ...,
  "arguments": {...}}</tool_call>`` (Qwen3; :func:`cascade_rl.chat.parse_tool_calls`). A block
  that is not JSON, has no name, or whose arguments are not a JSON object is answered with an
  error message as its tool result, like any failing call: the episode goes on.
* **Results** come back as messages of role ``tool`` (``name``, ``content``), one per call in
  order; :func:`cascade_rl.chat.tool_turn_text` renders them as the chat template's tool turn
  plus the next generation prompt, which is what the engine appends.
* **The episode ends** when a turn calls no tool (the model answered), when the turn was cut
  at the token budget (``truncated=True``: its complete calls count for the verdict but do not
  run, as NeMo Gym's agent stops on an incomplete response), or when ``max_steps`` model turns
  have been taken (the budget's last calls run and count; their results are not shown), or when
  the loop cuts it (:meth:`Episode.cut`: the tool results did not fit its token budget).
  ``Step.end`` says which: ``answered``, ``truncated``, ``unfinished thinking``, ``step budget``
  (a cut episode's ``end`` is the loop's reason, ``token budget``).
* **The verdict** (:meth:`Episode.score`) is a :class:`~cascade_rl.rewards.base.Score`; an
  environment that cannot reach one because of its own infrastructure returns
  :meth:`Score.no_verdict`.

A domain has an environment when its :class:`~cascade_rl.rewards.registry.RewardDomain` names
one (``environment``: ``package.module:factory``, ``factory(messages, tools, *, max_steps,
**reference_fields, **options) -> Episode``); its per-response ``scorer`` judges a finished
transcript offline (``cascade score``).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cascade_rl.chat import parse_tool_calls, split_thinking
from cascade_rl.rewards.base import Score
from cascade_rl.rewards.registry import REGISTRY, get_domain

#: model turns an episode may take unless the domain's options say otherwise (NeMo Gym's agent)
DEFAULT_MAX_STEPS = 6


@dataclass(frozen=True)
class ToolCall:
    """One call as the model wrote it: ``name`` and ``arguments`` (a JSON object), or the
    ``error`` that keeps it from running (the block is not JSON, has no name, ...)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """``{"name", "arguments"}`` with the arguments as a JSON text (NeMo Gym's function call)."""
        return {"name": self.name, "arguments": json.dumps(self.arguments, ensure_ascii=False)}


def read_tool_calls(answer: str) -> list[ToolCall]:
    """The calls of an answer's ``<tool_call>`` blocks, in order (module docstring)."""
    calls = []
    for call in parse_tool_calls(answer):
        if "invalid" in call:
            calls.append(
                ToolCall("", error=f"invalid tool call (not a JSON object with a name): {call['invalid'][:200]}")
            )
            continue
        name, arguments = call["name"], call.get("arguments", {})
        if not isinstance(name, str) or not name:
            calls.append(ToolCall(str(name), error="invalid tool call: the name is not a string"))
        elif not isinstance(arguments, dict):
            problem = f"the arguments are not a JSON object (got {type(arguments).__name__})"
            calls.append(ToolCall(name, error=f"invalid tool call arguments: {problem}"))
        else:
            calls.append(ToolCall(name, arguments))
    return calls


@dataclass(frozen=True)
class Step:
    """What one model turn led to: the ``tool`` messages to show the model (empty when none ran),
    whether the episode is over, and why (``end``)."""

    messages: list[dict[str, Any]]
    done: bool
    end: str | None = None


class Episode(ABC):
    """One episode of a multi-turn environment (module docstring). Subclasses run the calls
    (:meth:`run_call`) and judge the episode (:meth:`score`)."""

    def __init__(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Any] | None, *, max_steps: int) -> None:
        if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")
        #: the conversation so far: the prompt, then each assistant turn and its tool results
        self.messages: list[dict[str, Any]] = [dict(m) for m in messages]
        self.prompt_messages = len(self.messages)
        self.tools = list(tools or [])
        self.max_steps = max_steps
        self.steps = 0
        #: every call the model made, in order (those of a truncated last turn included)
        self.calls: list[ToolCall] = []
        #: calls that could not run (invalid, unknown tool, the tool raised)
        self.failed_calls = 0
        self.end: str | None = None

    @property
    def done(self) -> bool:
        return self.end is not None

    def step(self, response: str, *, truncated: bool = False) -> Step:
        """Take the model's next turn (``response``: its text; ``truncated``: it was cut at the
        token budget) and run the calls it makes."""
        if self.done:
            raise RuntimeError(f"the episode is over ({self.end}); start a new one")
        self.steps += 1
        self.messages.append({"role": "assistant", "content": response})
        split = split_thinking(response)
        calls = read_tool_calls(split.answer) if split.finished else []
        self.calls.extend(calls)
        if truncated:
            return self._finish("truncated", [])
        if not calls:
            return self._finish("answered" if split.finished else "unfinished thinking", [])
        results = [self._result(call) for call in calls]
        if self.steps >= self.max_steps:
            return self._finish("step budget", results)
        self.messages.extend(results)
        return Step(results, done=False)

    def _result(self, call: ToolCall) -> dict[str, Any]:
        if call.error is not None:
            self.failed_calls += 1
            content = json.dumps({"error": call.error}, ensure_ascii=False)
        else:
            content, failed = self.run_call(call)
            self.failed_calls += failed
        return {"role": "tool", "name": call.name, "content": content}

    def cut(self, end: str) -> None:
        """End the episode from outside (the loop's token budget ran out before the tool results
        could be shown): what was done so far is what :meth:`score` judges."""
        if self.done:
            raise RuntimeError(f"the episode is over ({self.end}); start a new one")
        self.end = end

    def _finish(self, end: str, results: list[dict[str, Any]]) -> Step:
        self.end = end
        return Step(results, done=True, end=end)

    @abstractmethod
    def run_call(self, call: ToolCall) -> tuple[str, bool]:
        """Run a well-formed call: (the tool message's content, whether the call failed)."""

    @abstractmethod
    def score(self) -> Score:
        """The episode's verdict (may be asked before the episode is over: it judges what was done)."""

    def verdict(self) -> Score:
        """:meth:`score`, or no verdict when the environment itself fails to judge (not a wrong answer)."""
        try:
            return self.score()
        except Exception as error:  # noqa: BLE001 - the environment's failure, kept as the reason
            return Score.no_verdict(f"{type(error).__name__}: {error}")

    def call_records(self) -> list[dict[str, Any]]:
        """The model's calls in order as ``cascade score`` re-judges them (``{name, arguments}``;
        a call that could not be read: ``{error}``)."""
        return [call.as_dict() if call.error is None else {"error": call.error} for call in self.calls]

    def summary(self) -> dict[str, Any]:
        """What every environment reports in its verdict's details: turns, calls, failed calls, end."""
        return {"turns": self.steps, "calls": len(self.calls), "failed_calls": self.failed_calls, "end": self.end}


def has_environment(domain: str) -> bool:
    """Whether rows of ``domain`` are multi-turn episodes (a registered domain that names an
    environment; a user scorer, or a name that is no reward domain, such as a distillation
    stage's teacher label, is single-turn)."""
    return domain in REGISTRY and REGISTRY[domain].environment is not None


def start_episode(row: Mapping[str, Any], options: Mapping[str, Any] | None = None) -> Episode:
    """An episode for ``row``: a normalised RL row (``prompt`` messages, ``domain``,
    ``reference`` fields) or a flat one (reference fields beside ``prompt``). ``options``: the
    domain's options (``max_steps``, default :data:`DEFAULT_MAX_STEPS`, and the environment's own)."""
    domain = get_domain(str(row.get("domain")))
    factory = domain.load_environment()
    if factory is None:
        raise ValueError(f"reward domain {domain.name!r} is single-turn: it has no environment")
    reference = dict(row.get("reference") or {k: v for k, v in row.items() if k not in ("prompt", "domain")})
    options = dict(options or {})
    max_steps = options.pop("max_steps", DEFAULT_MAX_STEPS)
    messages = row.get("prompt")
    if not isinstance(messages, list) or not messages:
        raise ValueError("prompt must be a non-empty list of messages")
    return factory(messages, reference.pop("tools", None), max_steps=max_steps, **reference, **options)
