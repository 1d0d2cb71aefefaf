"""`cascade score`: score a JSONL file of responses with the reward registry (SPEC sections 5-6).

Each input line is ``{"domain", "prompt"?, "response", **reference fields}`` (a multi-turn domain
may give the model's ``calls`` instead of a ``response``: ``workplace``). Every line is
written back in order with ``reward`` and ``details``. A bad line (not JSON, JSON that is not an
object, a field of the wrong type, an unknown domain, a missing or unreadable reference field) is
not scored: it keeps its place with ``reward: null`` and an ``error`` naming the problem and its
line (a line that is not an object is kept as ``raw`` text); all other lines are still scored.

Options (``{domain: {option: value}}``) are checked before any line is scored
(:func:`cascade_rl.rewards.registry.check_options`: known option, value of its type), and so
are the options a domain of the file cannot score without (a reward model, a judge): an
:class:`~cascade_rl.rewards.registry.OptionError` names the option.

A line may give a prompt's group of responses instead, ``"responses": [...]``: it is written
back with ``rewards`` and ``details``, one per response, and its responses are scored as one
group -- which a domain with a group scorer needs (``genrm``: the judge compares them in
pairs); other domains score each response on its own.

A response without a verdict (:meth:`~cascade_rl.rewards.base.Score.no_verdict`: a judge or
reward-model server that failed, a scorer that raised) is written with reward ``null`` and
``masked`` giving the reason (a group line: ``masked``, a list with ``null`` for the responses
that have a verdict), left out of its domain's mean reward, and counted in
:attr:`ScoreReport.masked` by reason, with its line numbers.

A line whose scorer could not score it (``details["error"]`` in any domain: the scorer raised,
e.g. an instruction id with no checker or a malformed reference; a sandbox, reward-model server or
judge failed; the math verifier's worker died) keeps the reward 0 its scorer gave, and is counted
in :attr:`ScoreReport.errored` by error, with its line numbers. Errors that describe the
*response* (an unfinished thinking block, a malformed tool call in the answer: see
:data:`RESPONSE_FAULTS`) are verdicts on the answer, not failures to score it.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cascade_rl.rewards.base import Score
from cascade_rl.rewards.registry import (
    check_options,
    check_required_options,
    check_row,
    get_domain,
    missing_fields,
    score_groups,
)


@dataclass
class DomainSummary:
    #: responses scored (a group line counts each of its responses)
    count: int = 0
    reward_sum: float = 0.0
    errors: int = 0
    timeouts: int = 0
    seconds: float = 0.0
    #: responses without a verdict (not in the mean reward)
    masked: int = 0

    @property
    def mean_reward(self) -> float:
        judged = self.count - self.masked
        return self.reward_sum / judged if judged else float("nan")

    @property
    def lines_per_second(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else float("inf")


#: ``details["error"]`` prefixes that are verdicts on the response, not failures to score it:
#: choice / tool_call "unfinished thinking ...", tool_call "malformed <tool_call> block ..." and
#: "answer call ..." (a call in the answer without a name or with arguments that are not JSON).
RESPONSE_FAULTS = ("unfinished thinking", "malformed <tool_call> block", "answer call")


def scoring_error(details: Mapping[str, Any]) -> str | None:
    """The error that kept a scorer from scoring a line (its ``details["error"]``), or None when
    there is none or it is a fault of the response (:data:`RESPONSE_FAULTS`)."""
    error = details.get("error") if isinstance(details, Mapping) else None
    if not error:
        return None
    error = str(error)
    return None if error.startswith(RESPONSE_FAULTS) else error


@dataclass
class ScoreReport:
    domains: dict[str, DomainSummary] = field(default_factory=dict)
    bad_lines: list[tuple[int, str]] = field(default_factory=list)
    total: int = 0
    #: scoring error -> line numbers of the lines it kept from being scored (reward 0 written)
    errored: dict[str, list[int]] = field(default_factory=dict)
    #: why there is no verdict -> line numbers of the responses without one (reward null written)
    masked: dict[str, list[int]] = field(default_factory=dict)

    @property
    def errored_lines(self) -> int:
        return sum(len(lines) for lines in self.errored.values())

    @property
    def masked_responses(self) -> int:
        return sum(len(lines) for lines in self.masked.values())


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    with open(path, encoding="utf-8-sig", errors="replace") as handle:  # a BOM (Windows editors) is not JSON
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield number, line


def parse_line(line: str) -> tuple[dict, str | None]:
    """A line as the row to write back and why it cannot be scored (None when it can)."""
    text = line.rstrip("\r\n")
    try:
        row = json.loads(text)
    except json.JSONDecodeError as error:
        return {"raw": text}, f"invalid JSON: {error.msg} (column {error.colno})"
    if not isinstance(row, dict):
        return {"raw": text}, f"a line must be a JSON object, got {_json_kind(row)}"
    return row, _problem(row)


def _json_kind(value: Any) -> str:
    kinds = {list: "an array", dict: "an object", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")


def _problem(row: Mapping[str, Any]) -> str | None:
    """Why a parsed line cannot be scored, or None."""
    if "domain" not in row:
        return "missing field 'domain'"
    if not isinstance(row["domain"], str):
        return f"field 'domain' must be a string, got {_json_kind(row['domain'])}"
    if "responses" in row:
        responses = row["responses"]
        if not isinstance(responses, list) or not responses or not all(isinstance(r, str) for r in responses):
            return "field 'responses' must be a non-empty list of strings"
    prompt = row.get("prompt")
    if prompt is not None and not isinstance(prompt, (str, list)):
        return f"field 'prompt' must be a string or a list of messages, got {_json_kind(prompt)}"
    try:
        domain = get_domain(row["domain"])
    except (KeyError, ValueError, ImportError, AttributeError) as error:
        return str(error).strip("'\"")
    if "responses" not in row and not any(row.get(name) is not None for name in domain.response_fields):
        wanted = " or ".join(repr(name) for name in domain.response_fields)
        return f"missing field {wanted}" + (
            " (a string), or 'responses' (a list of strings)" if domain.response_fields == ("response",) else ""
        )
    if "response" in row and not isinstance(row["response"], str):
        return f"field 'response' must be a string, got {_json_kind(row['response'])}"
    missing = missing_fields(domain, row)
    if missing:
        return f"domain {domain.name!r} needs field(s) {', '.join(repr(m) for m in missing)}"
    try:
        check_row(domain, row)
    except ValueError as error:
        return str(error)
    return None


def score_file(
    source: Path, target: Path, *, workers: int = 4, options: Mapping[str, Mapping[str, Any]] | None = None
) -> ScoreReport:
    """Score every line of ``source`` into ``target``; see the module docstring."""
    options = {name: check_options(name, values) for name, values in (options or {}).items()}
    report = ScoreReport()
    outputs: list[dict] = []
    numbers: list[int] = []
    by_domain: dict[str, list[int]] = defaultdict(list)
    for number, line in read_lines(source):
        report.total += 1
        row, problem = parse_line(line)
        numbers.append(number)
        if problem:
            report.bad_lines.append((number, problem))
            outputs.append({**row, "reward": None, "details": {"error": problem, "line": number}})
            continue
        outputs.append(row)
        by_domain[get_domain(row["domain"]).name].append(len(outputs) - 1)
    for name in by_domain:
        check_required_options(name, options.get(name))

    for name, indices in by_domain.items():
        summary = report.domains.setdefault(name, DomainSummary())
        start = time.perf_counter()
        groups = [_requests(outputs[i], numbers[i]) for i in indices]
        scored = score_groups(name, groups, options.get(name), workers=workers)
        summary.seconds += time.perf_counter() - start
        for index, scores in zip(indices, scored):
            outputs[index] = _scored_row(outputs[index], scores)
            for score in scores:
                _count(report, summary, score, numbers[index])

    for lines in (*report.errored.values(), *report.masked.values()):
        lines.sort()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", encoding="utf-8") as handle:
        for row in outputs:
            handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
    return report


def _requests(row: Mapping[str, Any], number: int) -> list[dict[str, Any]]:
    """The requests of a line: its response, or its group of responses (one group per line)."""
    request = {k: v for k, v in row.items() if k not in ("domain", "reward", "details", "responses", "masked")}
    if "responses" not in row:
        return [request]
    return [{**request, "response": response, "group": f"line {number}"} for response in row["responses"]]


def _scored_row(row: dict, scores: list[Score]) -> dict:
    rewards = [None if score.masked else score.reward for score in scores]
    masked = [score.masked for score in scores]
    if "responses" in row:
        out = {**row, "rewards": rewards, "details": [score.details for score in scores]}
        return {**out, "masked": masked} if any(masked) else out
    (score,) = scores
    out = {**row, "reward": rewards[0], "details": score.details}
    return {**out, "masked": score.masked} if score.masked else out


def _count(report: ScoreReport, summary: DomainSummary, score: Score, number: int) -> None:
    summary.count += 1
    summary.timeouts += bool(score.details.get("timeout"))
    if score.masked:
        summary.masked += 1
        report.masked.setdefault(score.masked, []).append(number)
        return
    summary.reward_sum += score.reward
    error = scoring_error(score.details)
    if error is not None:
        summary.errors += 1
        report.errored.setdefault(error, []).append(number)
