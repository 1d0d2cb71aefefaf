"""``cascade serve verifiers``: the project's reward verifiers behind NeMo Gym's resources-server
protocol, so that NeMo RL (or anything that drives NeMo Gym environments) trains against them
(Nemotron-Cascade 2's rewards are verified by such servers; SPEC section 11).

**Protocol** (NeMo Gym's ``SimpleResourcesServer``): ``POST /verify`` takes a verify request --
the task row as the dataset gave it (``responses_create_params`` with ``input`` and ``tools``,
plus its verifier fields) and ``response``, the policy's Responses API object -- and answers
the request with ``reward`` added, and ``mask_sample`` / ``failure_reason`` (NeMo Gym's verify
response fields for an infrastructure failure; ``instance_config.mask_sample`` too, where NeMo
RL reads it) plus ``domain`` and the scorer's ``details``. ``POST /seed_session`` answers ``{}``
(agents call it before a rollout); ``GET /health`` lists the domains.

**Routing.** A row that names a registered reward ``domain`` (the project's RL rows) is scored
with that domain and the row's reference fields; any other row is read as ``cascade data
convert -f nemo-gym`` reads NVIDIA's rows (:func:`cascade_rl.data.convert.nemo_gym`: the same
function, so a domain the converter learns is served at once). A row neither can read is
refused with HTTP 422 naming the missing field.

**The response** becomes the project's text: ``reasoning`` items -> ``<think>...</think>``,
``message`` items' ``output_text`` -> the answer, ``function_call`` items -> ``<tool_call>``
blocks (:func:`response_text`).

**Concurrency and timeouts.** Scoring runs on worker threads, at most ``concurrency`` at once
(the code reward runs a sandboxed program per rollout); a verification that takes longer than
``timeout`` seconds answers ``reward: 0`` with ``mask_sample: true``. A verifier with no
verdict (:meth:`~cascade_rl.rewards.base.Score.no_verdict`: a judge or reward-model server that
failed, a scorer that raised) answers the same way, its reason in ``failure_reason``.

**Groups.** A domain scored by groups (``genrm``: pairwise comparisons) needs every rollout of
a prompt: with ``group_size`` N, ``/verify`` holds each rollout until the N rollouts of its
prompt (same ``task_index`` / ``prompt_id`` when given, and the same input) have arrived, scores
them together and answers each; a group still incomplete after ``group_timeout`` seconds is
scored as it is. With ``group_size`` 1 such a domain answers its single-response reward, as
NeMo Gym's ``genrm_compare`` does.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, HTTPException, Request

from cascade_rl.chat import THINK_CLOSE, THINK_OPEN, last_user_text
from cascade_rl.data.convert import nemo_gym
from cascade_rl.data.rows import RowError, message_text
from cascade_rl.llm.openai_compat import tool_call_text
from cascade_rl.rewards.base import Score
from cascade_rl.rewards.registry import REGISTRY, RewardDomain, missing_fields, score_groups

#: NeMo Gym's own request keys: never reference fields
PROTOCOL_KEYS = ("responses_create_params", "response", "domain", "reference")


# ----------------------------------------------------------------------------- reading a request
def response_text(response: Any) -> str:
    """The project's text of a Responses API object (module docstring)."""
    if not isinstance(response, Mapping) or not isinstance(response.get("output"), list):
        raise RowError("response is not a Responses API object with an 'output' list")
    reasoning, answer, calls = [], [], []
    for item in response["output"]:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "reasoning":
            parts = list(item.get("content") or []) or list(item.get("summary") or [])
            reasoning.append(message_text(parts))
        elif kind == "message":
            answer.append("".join(p.get("text") or "" for p in item.get("content") or [] if _is_text(p)))
        elif kind == "function_call":
            calls.append({"name": item.get("name"), "arguments": item.get("arguments") or "{}"})
    text = tool_call_text("".join(answer), calls)
    thinking = "".join(reasoning)
    return f"{THINK_OPEN}{thinking}{THINK_CLOSE}{text}" if thinking else text


def _is_text(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") in ("output_text", "text", None)


def route(body: Mapping[str, Any]) -> tuple[RewardDomain, dict[str, Any]]:
    """The domain of a verify request and the scorer's request without its response (module
    docstring); :class:`~cascade_rl.data.rows.RowError` naming the field when it has none."""
    own = _project_row(body)
    if own is not None:
        domain, row = own
        messages = _input_messages(body)
    else:
        converted = nemo_gym(body)
        if "prompt" not in converted or converted.get("domain") not in REGISTRY:
            raise RowError(f"a {converted.get('domain', 'SWE instance')} row cannot be verified from a response")
        domain = REGISTRY[converted["domain"]]
        messages = converted["prompt"]
        row = {k: v for k, v in converted.items() if k not in ("prompt", "domain")}
        missing = missing_fields(domain, row)
        if missing:
            raise RowError(f"domain {domain.name!r} needs field(s) {', '.join(repr(m) for m in missing)}")
    return domain, {**row, "prompt": last_user_text(messages), "messages": messages}


def _project_row(body: Mapping[str, Any]) -> tuple[RewardDomain, dict[str, Any]] | None:
    """A row in the project's layout: a registered ``domain`` and its reference fields (at the
    top level or under ``reference``); None for any other row."""
    name = body.get("domain")
    if not isinstance(name, str) or name not in REGISTRY:
        return None
    reference = body.get("reference") if isinstance(body.get("reference"), Mapping) else {}
    row = {**{k: v for k, v in body.items() if k not in PROTOCOL_KEYS}, **reference}
    return None if missing_fields(REGISTRY[name], row) else (REGISTRY[name], row)


def _input_messages(body: Mapping[str, Any]) -> list[dict]:
    raw = (body.get("responses_create_params") or {}).get("input")
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    if not isinstance(raw, list):
        return []
    return [{"role": m.get("role"), "content": message_text(m.get("content"))} for m in raw if isinstance(m, Mapping)]


# ----------------------------------------------------------------------------- groups
@dataclass
class _Cohort:
    domain: RewardDomain
    requests: list[dict] = field(default_factory=list)
    futures: list[asyncio.Future] = field(default_factory=list)


class Cohorts:
    """Rollouts of one prompt held until the group is complete (module docstring: Groups)."""

    def __init__(self, size: int, timeout: float, score) -> None:
        self.size, self.timeout, self.score = size, timeout, score
        self.open: dict[str, _Cohort] = {}

    async def verify(self, key: str, domain: RewardDomain, request: dict) -> Score:
        cohort = self.open.setdefault(key, _Cohort(domain))
        future = asyncio.get_running_loop().create_future()
        cohort.requests.append(request)
        cohort.futures.append(future)
        if len(cohort.requests) >= self.size:
            self._close(key)
        try:
            return await asyncio.wait_for(asyncio.shield(future), self.timeout)
        except asyncio.TimeoutError:
            self._close(key)  # a peer never came: score the ones that did
            return await future

    def _close(self, key: str) -> None:
        cohort = self.open.pop(key, None)
        if cohort is not None:
            asyncio.get_running_loop().create_task(self._score(cohort))

    async def _score(self, cohort: _Cohort) -> None:
        try:
            scores = await self.score(cohort.domain, cohort.requests)
        except Exception as error:  # noqa: BLE001 - every waiting rollout gets the reason
            scores = [Score.no_verdict(f"group scoring failed: {type(error).__name__}: {error}")] * len(cohort.futures)
        for future, score in zip(cohort.futures, scores):
            if not future.done():
                future.set_result(score)


def cohort_key(body: Mapping[str, Any], messages: Sequence[Mapping[str, Any]]) -> str:
    """A prompt's identity: its task index or prompt id when the request gives one, and its input."""
    digest = hashlib.sha256(json.dumps(list(messages), sort_keys=True, default=str).encode()).hexdigest()
    for name in ("_ng_task_index", "task_index", "prompt_id"):
        if body.get(name) is not None:
            return f"{name}:{body[name]}:{digest}"
    return digest


# ----------------------------------------------------------------------------- the server
@dataclass(frozen=True)
class VerifierSettings:
    """How ``cascade serve verifiers`` scores (module docstring)."""

    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    concurrency: int = 8
    timeout: float = 300.0
    group_size: int = 1
    group_timeout: float = 1800.0


def verify_answer(body: Mapping[str, Any], domain: str | None, score: Score) -> dict[str, Any]:
    """The verify response: the request, ``reward``, ``mask_sample``, ``failure_reason`` (module docstring)."""
    masked = score.masked is not None
    instance_config = body.get("instance_config") if isinstance(body.get("instance_config"), Mapping) else {}
    return {
        **body,
        "reward": 0.0 if masked else float(score.reward),
        "mask_sample": masked,
        "failure_reason": score.masked,
        "instance_config": {**instance_config, "mask_sample": masked},
        "domain": domain,
        "details": score.details,
    }


def create_app(settings: VerifierSettings) -> FastAPI:
    """The resources server (module docstring)."""
    app = FastAPI(title="cascade verifiers (NeMo Gym resources server)")
    limit = asyncio.Semaphore(settings.concurrency)

    async def scored(domain: RewardDomain, requests: list[dict]) -> list[Score]:
        options = settings.options.get(domain.name)
        async with limit:
            call = asyncio.to_thread(score_groups, domain, [requests], options)
            try:
                return (await asyncio.wait_for(call, settings.timeout))[0]
            except asyncio.TimeoutError:  # the thread finishes on its own; its answer is not awaited
                return [Score.no_verdict(f"verification timed out after {settings.timeout:g} s")] * len(requests)

    cohorts = Cohorts(settings.group_size, settings.group_timeout, scored)

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "domains": sorted(REGISTRY)}

    @app.post("/seed_session")
    async def seed_session() -> dict:
        return {}

    @app.post("/verify")
    async def verify(request: Request) -> dict:
        body = await _json_object(request)
        try:
            domain, scorer_request = route(body)
            scorer_request["response"] = response_text(body.get("response"))
        except RowError as error:
            raise HTTPException(422, detail=str(error)) from None
        if domain.group_scorer is not None and settings.group_size > 1:
            score = await cohorts.verify(cohort_key(body, scorer_request["messages"]), domain, scorer_request)
        else:
            (score,) = await scored(domain, [scorer_request])
        return verify_answer(body, domain.name, score)

    return app


async def _json_object(request: Request) -> dict:
    try:
        body = await request.json()
    except ValueError as error:
        raise HTTPException(400, detail=f"the request body is not JSON: {error}") from None
    if not isinstance(body, dict):
        raise HTTPException(422, detail="the request body must be a JSON object")
    return body


def serve_verifiers(settings: VerifierSettings, *, host: str, port: int, log_level: str = "info") -> None:
    """Serve the verifiers until interrupted."""
    import uvicorn

    uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level)
