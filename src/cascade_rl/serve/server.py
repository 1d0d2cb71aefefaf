"""``cascade serve reward-model PATH``: a reward model behind vLLM's Pooling API, with
transformers on CPU or GPU (SPEC section 4's scalar RM as a service; the protocol is in
:mod:`cascade_rl.llm.pooling`).

Endpoints:

* ``POST /pooling`` -- the chat form (``messages``: one conversation, rendered with the RM's
  chat template, no generation prompt, no added special tokens) or the completion form
  (``input``: a string or a list of strings, special tokens added unless
  ``add_special_tokens: false``). ``truncate_prompt_tokens`` keeps the last N tokens (-1 or
  absent: the server's ``--max-length``; more than that is refused with HTTP 400, as vLLM does).
  ``use_activation: false`` returns the raw score; otherwise its sigmoid, vLLM's default for a
  one-label classifier (none for a ``problem_type: regression`` model). ``task``, when given,
  must be ``classify``; ``model``, when given, the served name.
* ``GET /health`` -- 200 once the model is loaded (the server listens only then);
  ``GET /v1/models`` -- the served model, with its ``max_model_len``.

Scoring uses the same :class:`~cascade_rl.rewards.preference.RewardModel` as local scoring, so a
conversation gets the same score either way. Requests that arrive together are scored together:
inputs queue up while the model runs, then the queued ones are grouped by length into forward
passes of up to ``--batch-size`` inputs (little padding). ``GET /health`` also counts the inputs
scored and the forward passes run.
Errors answer ``{"error": {"message", "type", "code"}}`` with the HTTP status.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request

from cascade_rl.llm.pooling import pooling_response
from cascade_rl.rewards.preference import RewardModel
from cascade_rl.serve.app import Batcher, RequestError, batched_app, failure_response, json_body, model_list


@dataclass(frozen=True)
class PoolingJob:
    """What one ``/pooling`` request asks for, once read."""

    texts: list[str]
    add_special_tokens: bool
    max_length: int
    activation: bool


def read_request(body: Any, model: RewardModel, *, name: str, max_length: int) -> PoolingJob:
    """Validate a ``/pooling`` body (module docstring) into a :class:`PoolingJob`."""
    if not isinstance(body, Mapping):
        raise RequestError("the request body must be a JSON object")
    if body.get("model") not in (None, name):
        raise RequestError(f"The model `{body['model']}` does not exist; this server serves `{name}`.", 404)
    if body.get("task") not in (None, "classify"):
        raise RequestError(f"task {body['task']!r} is not supported; this reward model serves 'classify'")
    limit = _truncation(body.get("truncate_prompt_tokens"), max_length)
    activation = body.get("use_activation") is not False
    if "messages" in body:
        special = bool(body.get("add_special_tokens", False))
        return PoolingJob([_rendered(body["messages"], model)], special, limit, activation)
    texts = body.get("input")
    texts = [texts] if isinstance(texts, str) else texts
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t for t in texts):
        raise RequestError("give 'messages' (a conversation) or 'input' (a non-empty string or list of strings)")
    return PoolingJob(texts, bool(body.get("add_special_tokens", True)), limit, activation)


def _truncation(value: Any, max_length: int) -> int:
    if value is None or value == -1:
        return max_length
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RequestError(f"truncate_prompt_tokens must be a positive integer or -1, got {value!r}")
    if value > max_length:
        raise RequestError(
            f"truncate_prompt_tokens value ({value}) is greater than max_model_len ({max_length}); "
            "start the server with a larger --max-length"
        )
    return value


def _rendered(messages: Any, model: RewardModel) -> str:
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty list of chat messages")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise RequestError(f"messages[{i}] must be an object with a 'role'")
    try:
        return model.render(messages)
    except Exception as error:  # noqa: BLE001 - the template's complaint is the answer
        raise RequestError(f"the chat template cannot render these messages: {error}") from None


def create_app(model: RewardModel, *, name: str, max_length: int, batch_size: int = 8) -> FastAPI:
    """The FastAPI application serving ``model`` as ``name`` (module docstring)."""
    batcher = Batcher(model, batch_size)  # type: ignore[arg-type]  # scores token id lists
    app = batched_app("cascade reward model", batcher)
    created = int(time.time())

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "model": name, "inputs": batcher.inputs, "forward_passes": model.forward_passes}

    @app.get("/v1/models")
    async def models() -> dict:
        return model_list(name, model, max_length, created)  # type: ignore[arg-type]

    @app.post("/pooling")
    async def pooling(request: Request):
        try:
            job = read_request(await json_body(request), model, name=name, max_length=max_length)
            sequences = await asyncio.to_thread(_encode_all, model, job)
            scores = await batcher.score(sequences)
        except Exception as problem:  # noqa: BLE001 - the client gets its status (a 500 if unforeseen)
            return failure_response(problem)
        vectors = [[_activated(s, model) if job.activation else s] for s in scores]
        return pooling_response(name, vectors, sum(len(ids) for ids in sequences))

    return app


def _encode_all(model: RewardModel, job: PoolingJob) -> list[list[int]]:
    special = job.add_special_tokens
    sequences = [model.encode(text, max_length=job.max_length, add_special_tokens=special) for text in job.texts]
    if any(not ids for ids in sequences):
        raise RequestError("an input encodes to no tokens")
    return sequences


def _activated(score: float, model: RewardModel) -> float:
    """vLLM's activation of a one-label classifier: the sigmoid (none for a regression head)."""
    if model.regression:
        return score
    return 1.0 / (1.0 + math.exp(-score)) if score >= 0 else math.exp(score) / (1.0 + math.exp(score))


def serve_reward_model(
    path: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    device: str | None = None,
    max_length: int | None = None,
    batch_size: int = 8,
    served_model_name: str | None = None,
    log_level: str = "info",
) -> None:
    """Load the reward model at ``path``, then serve it until interrupted."""
    import uvicorn

    model = RewardModel(path, device=device)
    limit = max_length or model.max_length
    if not limit:
        raise ValueError(f"{path}: the model config has no max_position_embeddings; give --max-length")
    app = create_app(model, name=served_model_name or str(path), max_length=limit, batch_size=batch_size)
    uvicorn.run(app, host=host, port=port, log_level=log_level)
