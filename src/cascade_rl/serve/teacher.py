"""A distillation teacher as a service: the log-probability a causal LM gives every token of a
given text (the ``distill`` stage's served teachers; docs/mopd.md).

**Protocol** -- vLLM's OpenAI-compatible ``/v1/completions`` with its ``prompt_logprobs``
extension, the request TRL's own server-teacher trainers send. The text goes in as token ids,
so nothing is re-tokenised::

    POST /v1/completions
    {"model": "math-teacher", "prompt": [151644, 872, ...], "max_tokens": 1,
     "temperature": 1.0, "prompt_logprobs": 1}

    {"choices": [{"index": 0, "text": "...", "finish_reason": "length",
                  "prompt_logprobs": [null, {"872": {"logprob": -3.2, "rank": 14, "decoded_token": "user"},
                                              "198": {"logprob": -0.4, "rank": 1, "decoded_token": "\\n"}}, ...]}],
     "usage": {"prompt_tokens": 57, "completion_tokens": 1, "total_tokens": 58}}

``prompt_logprobs[i]`` scores token ``i`` given tokens ``0..i-1`` (the first has nothing to be
conditioned on: ``null``); it holds the token itself and the ``k`` most likely tokens. vLLM
reports the raw log-probabilities (temperature 1) unless the server runs with ``--logprobs-mode
processed_logprobs``; this server applies the request's temperature, as that mode does. Also
``POST /tokenize`` (``{"prompt": text, "add_special_tokens": false}`` -> ``{"tokens": [...]}``)
and ``POST /detokenize`` (``{"tokens": [...]}`` -> ``{"prompt": text}``), as vLLM has them: the
check that teacher and student share a tokenizer; ``GET /health``, ``GET /v1/models``.

**Serving** (:func:`serve_teacher`): ``cascade serve teacher PATH --port 8001``
serves a transformers checkpoint on CPU or GPU with this protocol (no vLLM needed); requests
that arrive together are scored together in forward passes of similar lengths. At scale:
``vllm serve PATH --served-model-name math-teacher``.

**Client** (:class:`TeacherClient`): the completion tokens' log-probabilities of many
sequences, requested concurrently within a limit, with a timeout per request and retries with
backoff (it is an :class:`~cascade_rl.llm.transport.HttpClient`).
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request

from cascade_rl.llm.pooling import ProtocolError
from cascade_rl.llm.pretrained import load_pretrained
from cascade_rl.llm.transport import Connection, HttpClient, parse_server_spec
from cascade_rl.serve.app import Batcher, RequestError, batched_app, failure_response, json_body, model_list


# ---------------------------------------------------------------------------- the model side
@dataclass(frozen=True)
class ScoringJob:
    """One request's sequence, the temperature of its log-probabilities, how many of the most
    likely tokens to report beside each actual one (None: no prompt_logprobs) and whether to
    generate the one token ``max_tokens: 1`` asks for."""

    ids: tuple[int, ...]
    temperature: float = 1.0
    top: int | None = 0
    generate: bool = True


class TokenScorer:
    """A causal LM that scores token sequences; thread-safe."""

    def __init__(self, path: str, *, device: str | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.path = str(path)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        dtype = torch.float32 if self.device == "cpu" else torch.bfloat16
        model = load_pretrained(AutoModelForCausalLM, path, local_files_only=True, dtype=dtype)
        self.model = model.to(self.device).eval()
        self.max_length: int = getattr(model.config, "max_position_embeddings", None) or 1 << 20
        self.pad = next(i for i in (self.tokenizer.pad_token_id, self.tokenizer.eos_token_id, 0) if i is not None)
        self.forward_passes = 0
        self._lock = threading.Lock()

    def score_ids(self, jobs: Sequence[ScoringJob], *, batch_size: int = 8) -> list[dict[str, Any]]:
        """Per job: ``prompt_logprobs`` (module docstring) and the most likely next token."""
        import torch

        from cascade_rl.rewards.preference import length_batches

        results: list[dict[str, Any]] = [{} for _ in jobs]
        with self._lock, torch.inference_mode():
            for chunk in length_batches([len(job.ids) for job in jobs], batch_size):
                width = max(len(jobs[i].ids) for i in chunk)
                ids = torch.full((len(chunk), width), self.pad, dtype=torch.long)
                mask = torch.zeros((len(chunk), width), dtype=torch.long)
                for row, i in enumerate(chunk):  # right padding: real tokens keep their positions
                    ids[row, : len(jobs[i].ids)] = torch.tensor(jobs[i].ids)
                    mask[row, : len(jobs[i].ids)] = 1
                logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits.float()
                self.forward_passes += 1
                for row, i in enumerate(chunk):
                    results[i] = self._positions(jobs[i], logits[row, : len(jobs[i].ids)])
        return results

    def _positions(self, job: ScoringJob, logits: Any) -> dict[str, Any]:
        import torch

        logprobs = torch.log_softmax(logits / job.temperature, dim=-1)
        actual = torch.tensor(job.ids[1:], device=logprobs.device)
        chosen = logprobs[:-1].gather(-1, actual[:, None]).squeeze(-1)
        ranks = (logprobs[:-1] > chosen[:, None]).sum(-1) + 1
        top = torch.topk(logprobs[:-1], job.top, dim=-1) if job.top else None  # None or 0: the token alone
        positions: list[dict[str, dict] | None] = [None]
        for t in range(len(job.ids) - 1):
            entry = {str(job.ids[t + 1]): self._entry(job.ids[t + 1], chosen[t].item(), ranks[t].item())}
            if top is not None:
                for rank, (value, token) in enumerate(zip(top.values[t].tolist(), top.indices[t].tolist()), start=1):
                    entry.setdefault(str(token), self._entry(token, value, rank))
            positions.append(entry)
        return {"prompt_logprobs": positions, "next_token": int(logprobs[-1].argmax())}

    def _entry(self, token: int, logprob: float, rank: int) -> dict[str, Any]:
        return {"logprob": logprob, "rank": int(rank), "decoded_token": self.tokenizer.decode([token])}


# ---------------------------------------------------------------------------- the server
def read_completion_request(body: Any, scorer: TokenScorer, *, name: str) -> ScoringJob:
    """Validate a ``/v1/completions`` body (module docstring) into a :class:`ScoringJob`."""
    if not isinstance(body, Mapping):
        raise RequestError("the request body must be a JSON object")
    if body.get("model") not in (None, name):
        raise RequestError(f"The model `{body['model']}` does not exist; this server serves `{name}`.", 404)
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        prompt = scorer.tokenizer.encode(prompt, add_special_tokens=True)
    if not isinstance(prompt, list) or not prompt or not all(isinstance(t, int) and t >= 0 for t in prompt):
        raise RequestError("'prompt' must be a non-empty string or list of token ids")
    if len(prompt) > scorer.max_length:
        raise RequestError(f"the prompt has {len(prompt)} tokens; this model's limit is {scorer.max_length}")
    vocabulary = scorer.model.config.vocab_size
    if max(prompt) >= vocabulary:
        raise RequestError(f"token id {max(prompt)} is outside the vocabulary ({vocabulary} tokens)")
    max_tokens = body.get("max_tokens", 16)
    if max_tokens not in (0, 1):
        raise RequestError("this server scores text: max_tokens must be 0 or 1")
    temperature = body.get("temperature", 1.0)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
        raise RequestError(f"temperature must be a positive number, got {temperature!r}")
    top = body.get("prompt_logprobs")
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= 20):
        raise RequestError(f"prompt_logprobs must be an integer in [0, 20], got {top!r}")
    return ScoringJob(tuple(prompt), float(temperature), top, generate=max_tokens == 1)


def create_app(scorer: TokenScorer, *, name: str, batch_size: int = 8) -> FastAPI:
    """The FastAPI application serving ``scorer`` as ``name`` (module docstring)."""
    batcher = Batcher(scorer, batch_size)
    app = batched_app("cascade distillation teacher", batcher)
    routes = TeacherRoutes(scorer, batcher, name)
    app.get("/health")(routes.health)
    app.get("/v1/models")(routes.models)
    app.post("/tokenize")(routes.tokenize)
    app.post("/detokenize")(routes.detokenize)
    app.post("/v1/completions")(routes.completions)
    return app


class TeacherRoutes:
    """The endpoints of a teacher server (module docstring), one method each."""

    def __init__(self, scorer: TokenScorer, batcher: Batcher, name: str) -> None:
        self.scorer, self.batcher, self.name = scorer, batcher, name
        self.created = int(time.time())

    async def health(self) -> dict:
        scorer = self.scorer
        return {
            "status": "ok",
            "model": self.name,
            "sequences": self.batcher.inputs,
            "forward_passes": scorer.forward_passes,
        }

    async def models(self) -> dict:
        return model_list(self.name, self.scorer, self.scorer.max_length, self.created)

    async def tokenize(self, request: Request):
        try:
            body = await json_body(request)
            if not isinstance(body, Mapping) or not isinstance(body.get("prompt"), str):
                raise RequestError("give 'prompt' (a string)")
        except RequestError as problem:
            return failure_response(problem)
        special = bool(body.get("add_special_tokens", True))
        tokens = self.scorer.tokenizer.encode(body["prompt"], add_special_tokens=special)
        return {"count": len(tokens), "max_model_len": self.scorer.max_length, "tokens": tokens, "token_strs": None}

    async def detokenize(self, request: Request):
        try:
            tokens = _token_ids(await json_body(request), len(self.scorer.tokenizer))
        except RequestError as problem:
            return failure_response(problem)
        return {"prompt": self.scorer.tokenizer.decode(tokens)}

    async def completions(self, request: Request):
        try:
            job = read_completion_request(await json_body(request), self.scorer, name=self.name)
            (result,) = await self.batcher.score([job])
        except Exception as problem:  # noqa: BLE001 - the client gets its status (a 500 if unforeseen)
            return failure_response(problem)
        return completion_response(job, result, self.name, self.scorer.tokenizer)


def _token_ids(body: Any, vocabulary: int) -> list[int]:
    """The ``tokens`` of a ``/detokenize`` body, each a token id of the vocabulary."""
    tokens = body.get("tokens") if isinstance(body, Mapping) else None
    if not isinstance(tokens, list) or not all(isinstance(t, int) and t >= 0 for t in tokens):
        raise RequestError("give 'tokens' (a list of token ids)")
    if tokens and max(tokens) >= vocabulary:
        raise RequestError(f"token id {max(tokens)} is outside the vocabulary ({vocabulary} tokens)")
    return tokens


def completion_response(job: ScoringJob, result: Mapping[str, Any], name: str, tokenizer: Any) -> dict[str, Any]:
    """The ``/v1/completions`` answer for one scored job (module docstring)."""
    generated = int(job.generate)
    choice = {
        "index": 0,
        "text": tokenizer.decode([result["next_token"]]) if job.generate else "",
        "logprobs": None,
        "finish_reason": "length",
        "prompt_logprobs": result["prompt_logprobs"] if job.top is not None else None,
    }
    return {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": name,
        "choices": [choice],
        "usage": {
            "prompt_tokens": len(job.ids),
            "completion_tokens": generated,
            "total_tokens": len(job.ids) + generated,
        },
    }


def serve_teacher(
    path: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8001,
    device: str | None = None,
    batch_size: int = 8,
    served_model_name: str | None = None,
    log_level: str = "info",
) -> None:
    """Load the checkpoint at ``path``, then serve it until interrupted."""
    import uvicorn

    scorer = TokenScorer(path, device=device)
    uvicorn.run(
        create_app(scorer, name=served_model_name or str(path), batch_size=batch_size),
        host=host,
        port=port,
        log_level=log_level,
    )


# ---------------------------------------------------------------------------- the client
class TeacherClient(HttpClient):
    """Token log-probabilities from a teacher server (module docstring). ``url``:
    ``http://host:port[/v1][#served-model-name]``."""

    def __init__(
        self,
        url: str,
        *,
        max_concurrency: int = 16,
        timeout: float = 600.0,
        max_retries: int = 3,
        api_key: str | None = None,
    ) -> None:
        spec = parse_server_spec(url, what="teacher server")
        super().__init__(
            spec.root, api_key=api_key, max_concurrency=max_concurrency, timeout=timeout, max_retries=max_retries
        )
        self.root, self.model = spec.root, spec.model

    def __repr__(self) -> str:
        return f"TeacherClient({self.root!r}, model={self.model!r})"

    def completion_logprobs(
        self, sequences: Sequence[tuple[Sequence[int], Sequence[int]]], *, temperature: float = 1.0
    ) -> list[list[float]]:
        """For each ``(prompt_ids, completion_ids)``, the teacher's log-probability of every
        completion token given everything before it (blocking; thread-safe)."""
        return self.run_sync(self._all(sequences, temperature))

    def tokenize(self, text: str) -> list[int]:
        """The server's token ids of ``text`` (no special tokens added)."""
        response = self.run_sync(self.post("/tokenize", self._named({"prompt": text, "add_special_tokens": False})))
        tokens = response.get("tokens")
        if not isinstance(tokens, list):
            raise ProtocolError(f"{self.root}/tokenize: no 'tokens' in {str(response)[:200]}")
        return [int(t) for t in tokens]

    def detokenize(self, tokens: Sequence[int]) -> str:
        """The server's text of ``tokens``."""
        response = self.run_sync(self.post("/detokenize", self._named({"tokens": [int(t) for t in tokens]})))
        if not isinstance(response.get("prompt"), str):
            raise ProtocolError(f"{self.root}/detokenize: no 'prompt' in {str(response)[:200]}")
        return response["prompt"]

    async def _all(self, sequences, temperature: float) -> list[list[float]]:
        async with self.connect() as connection:
            return list(await asyncio.gather(*(self._one(connection, p, c, temperature) for p, c in sequences)))

    async def _one(self, connection: Connection, prompt: Sequence[int], completion: Sequence[int], temperature: float):
        ids = [int(t) for t in (*prompt, *completion)]
        body = {"prompt": ids, "max_tokens": 1, "temperature": temperature, "prompt_logprobs": 1}
        response = await connection.post("/v1/completions", self._named(body))
        return completion_logprobs(response, ids, len(prompt), where=self.root)

    def _named(self, body: dict) -> dict:
        """The request body with the served model's name, when the URL gives one."""
        return {**body, "model": self.model} if self.model else body


def completion_logprobs(response: Mapping[str, Any], ids: Sequence[int], start: int, *, where: str) -> list[float]:
    """The log-probabilities of ``ids[start:]`` in a ``prompt_logprobs`` response."""
    try:
        positions = response["choices"][0]["prompt_logprobs"]
    except (KeyError, IndexError, TypeError):
        raise ProtocolError(f"{where}: the response has no choices[0].prompt_logprobs") from None
    if not isinstance(positions, list) or len(positions) < len(ids):
        raise ProtocolError(f"{where}: prompt_logprobs covers {len(positions or [])} of {len(ids)} tokens")
    values = []
    for t in range(start, len(ids)):
        entry = (positions[t] or {}).get(str(ids[t]))
        value = entry.get("logprob") if isinstance(entry, Mapping) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise ProtocolError(f"{where}: no log-probability for token {ids[t]} at position {t}")
        values.append(float(value))
    return values
