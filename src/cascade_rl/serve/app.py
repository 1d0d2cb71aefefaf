"""What the two model servers share (``cascade serve reward-model``, :mod:`.server`, and
``cascade serve teacher``, :mod:`.teacher`): the batcher that scores the inputs of requests
arriving together in shared forward passes, the application that runs it, and the
OpenAI-style answers (the model list, errors as ``{"error": {"message", "type", "code"}}``
with the HTTP status).

**Batching.** Inputs queue up while the model runs; then the queued ones (up to ``drain x
batch_size``) go to the model's ``score_ids`` together, which groups them by length into
forward passes of up to ``batch_size`` (little padding). A request whose client has left is
dropped from the queue; a model error reaches every request of that batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse


class RequestError(ValueError):
    """A request the server refuses, with its HTTP status."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class Scorer(Protocol):
    """A model that scores many inputs at once (a reward model, a teacher)."""

    path: str
    forward_passes: int

    def score_ids(self, inputs: Sequence[Any], *, batch_size: int) -> list[Any]: ...


class Batcher:
    """Scores the inputs of many requests in shared forward passes (module docstring)."""

    def __init__(self, model: Scorer, batch_size: int):
        self.model, self.batch_size = model, batch_size
        self.drain = 8  # take up to drain * batch_size queued inputs at once, to group them by length
        self.queue: asyncio.Queue[tuple[Any, asyncio.Future]] = asyncio.Queue()
        self.inputs = 0  # scored so far

    async def score(self, inputs: Sequence[Any]) -> list[Any]:
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in inputs]
        for item, future in zip(inputs, futures):
            self.queue.put_nowait((item, future))
        return list(await asyncio.gather(*futures))

    async def run(self) -> None:
        while True:
            batch = [await self.queue.get()]
            while len(batch) < self.batch_size * self.drain and not self.queue.empty():
                batch.append(self.queue.get_nowait())
            batch = [(item, future) for item, future in batch if not future.done()]  # cancelled: client left
            if batch:
                await self._score(batch)

    async def _score(self, batch: list[tuple[Any, asyncio.Future]]) -> None:
        try:  # score_ids sorts by length, then runs forward passes of batch_size
            results: list[Any] = await asyncio.to_thread(
                self.model.score_ids, [item for item, _ in batch], batch_size=self.batch_size
            )
        except Exception as error:  # noqa: BLE001 - every waiting request gets it
            results = [error] * len(batch)
        self.inputs += len(batch)
        for (_, future), result in zip(batch, results):
            if future.done():
                continue
            if isinstance(result, Exception):
                future.set_exception(result)
            else:
                future.set_result(result)


def batched_app(title: str, batcher: Batcher) -> FastAPI:
    """A FastAPI application that runs ``batcher`` for as long as it serves."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(batcher.run())
        yield
        task.cancel()

    app = FastAPI(title=title, lifespan=lifespan)
    app.state.batcher = batcher
    return app


def model_list(name: str, model: Scorer, max_length: int, created: int | None = None) -> dict:
    """The ``GET /v1/models`` answer: the one served model, with its ``max_model_len``."""
    card = {"id": name, "object": "model", "created": created or int(time.time()), "owned_by": "cascade"}
    return {"object": "list", "data": [{**card, "root": model.path, "max_model_len": max_length}]}


def error_response(message: str, status: int) -> JSONResponse:
    """An OpenAI-style error answer."""
    kind = "NotFoundError" if status == 404 else "BadRequestError" if status < 500 else "InternalServerError"
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


def failure_response(problem: Exception) -> JSONResponse:
    """The answer to a request that failed: its status for a refused request, else a 500."""
    if isinstance(problem, RequestError):
        return error_response(str(problem), problem.status)
    return error_response(f"{type(problem).__name__}: {problem}", 500)


async def json_body(request: Request) -> Any:
    """The request's JSON body (a :class:`RequestError` when it is not JSON)."""
    try:
        return await request.json()
    except ValueError as problem:
        raise RequestError(f"the request body is not JSON: {problem}") from None
