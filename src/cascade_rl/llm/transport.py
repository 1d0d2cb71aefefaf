"""HTTP to model servers (DESIGN.md, ``llm/``): the one way the project names a served model and
the one client every served-model client is built on -- the OpenAI-compatible generator
(:mod:`.openai_compat`), the reward-model client (:mod:`.pooling`), the distillation teacher's
client (:mod:`cascade_rl.serve.teacher`) and, through the generator, the LLM judge.

**Server specs** (:func:`parse_server_spec`): ``http(s)://HOST:PORT[/v1][#MODEL]``, optionally
``openai:``-prefixed. The part before ``#`` is the server's URL as given (an OpenAI-compatible
API base such as ``http://localhost:8000/v1``); ``#MODEL`` is the served model's name, which a
generator needs and a reward-model or teacher server may leave out (the server's only model).
:attr:`ServerSpec.root` is the server without its ``/v1`` or ``/pooling`` suffix (where
``/health``, ``/pooling`` and ``/tokenize`` live). A string that does not start with a scheme
is not a server spec (:func:`is_server_spec`): a local checkpoint directory, for instance.

**The client** (:class:`HttpClient`): JSON ``POST`` requests to one server.

* **Concurrency.** At most ``max_concurrency`` requests in flight (an ``asyncio.Semaphore`` per
  event loop; all blocking calls share one background loop, hence one limit).
* **Timeouts and retries.** Each request has a wall-clock ``timeout``; connection errors,
  timeouts, HTTP 429 and 5xx are retried up to ``max_retries`` times with exponential backoff
  (``backoff_base * 2**attempt``, capped at ``backoff_max``, times a random factor in
  [1, 1.25); a ``Retry-After`` header is honoured up to the cap). Other HTTP errors fail at once
  with the server's message (:class:`HTTPStatusError`, carrying the status).
* **The sync bridge.** :meth:`HttpClient.run_sync` runs a coroutine on the client's background
  event loop (started by the first blocking call, stopped by :meth:`HttpClient.close`), so
  blocking callers -- reward workers are threads -- share the client's limit.

A burst of requests shares one connection pool: ``async with client.connect() as connection``
then ``await connection.post(path, body)`` for each; :meth:`HttpClient.post` is a single request
on a connection of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from cascade_rl.llm.base import GenerationError

T = TypeVar("T")

SCHEMES = ("http://", "https://")
RETRY_STATUS = frozenset({429}) | frozenset(range(500, 600))


# ---------------------------------------------------------------------------- server specs
@dataclass(frozen=True)
class ServerSpec:
    """A served model: the server's URL (as given, without ``#MODEL`` and a trailing ``/``) and
    the served model's name, if the spec gives one."""

    url: str
    model: str | None = None

    @property
    def root(self) -> str:
        """The server without its API suffix: ``http://h:8000/v1`` -> ``http://h:8000``."""
        root = self.url
        for suffix in ("/pooling", "/v1"):
            root = root.removesuffix(suffix)
        return root

    def __str__(self) -> str:
        return f"{self.url}#{self.model}" if self.model else self.url


def is_server_spec(spec: object) -> bool:
    """Whether ``spec`` names a server (``http(s)://...``, optionally ``openai:``-prefixed)
    rather than a local checkpoint."""
    return isinstance(spec, str) and spec.strip().removeprefix("openai:").startswith(SCHEMES)


def parse_server_spec(spec: str, *, what: str = "server spec", require_model: bool = False) -> ServerSpec:
    """The :class:`ServerSpec` of ``http(s)://HOST:PORT[/path][#MODEL]`` (module docstring); a
    ``ValueError`` names ``what`` and the spec when it is not one, or when ``require_model`` and
    it names no model."""
    url, _, model = spec.strip().removeprefix("openai:").partition("#")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{what} {spec!r} is not an http(s)://host:port URL")
    if require_model and not model:
        raise ValueError(f"{what} {spec!r} names no model; write {url}#MODEL_NAME")
    return ServerSpec(url.rstrip("/"), model or None)


# ---------------------------------------------------------------------------- the client
class HTTPStatusError(GenerationError):
    """A server answered with an HTTP error; ``status`` says which."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class HttpClient:
    """JSON POST requests to the server at ``base_url`` within a concurrency limit, with a
    timeout per request, retries with backoff and a blocking bridge (module docstring)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        max_concurrency: int = 8,
        timeout: float = 600.0,
        max_retries: int = 5,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
    ) -> None:
        if not base_url.startswith(SCHEMES):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        for name, value, low in (("max_concurrency", max_concurrency, 1), ("max_retries", max_retries, 0)):
            if not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if not timeout > 0 or backoff_base < 0 or backoff_max < 0:
            raise ValueError("timeout must be > 0 and backoff_base, backoff_max >= 0")
        self.base_url = base_url.rstrip("/")
        self.max_concurrency, self.timeout, self.max_retries = max_concurrency, float(timeout), max_retries
        self.backoff_base, self.backoff_max = backoff_base, backoff_max
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._ssl_context = ssl.create_default_context()  # built once: connections are opened per burst
        self._semaphores: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._state_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"

    # ------------------------------------------------------------------ requests
    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[Connection]:
        """A connection pool for a burst of requests (closed on exit)."""
        async with httpx.AsyncClient(
            base_url=self.base_url,
            headers=self.headers,
            verify=self._ssl_context,
            timeout=httpx.Timeout(self.timeout),
            limits=httpx.Limits(max_connections=self.max_concurrency),
        ) as client:
            yield Connection(self, client)

    async def post(self, path: str, body: Mapping[str, Any]) -> dict:
        """One request on a connection of its own (see :meth:`Connection.post`)."""
        async with self.connect() as connection:
            return await connection.post(path, body)

    def backoff(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds to wait before retry ``attempt + 1`` (module docstring)."""
        delay = min(self.backoff_max, self.backoff_base * 2**attempt) * random.uniform(1.0, 1.25)
        try:
            delay = max(delay, min(self.backoff_max, float(retry_after))) if retry_after else delay
        except ValueError:  # an HTTP date instead of seconds: keep the computed delay
            pass
        return min(delay, self.backoff_max * 1.25)

    def semaphore(self) -> asyncio.Semaphore:
        """The concurrency limit of the running event loop."""
        loop = asyncio.get_running_loop()
        with self._state_lock:
            if loop not in self._semaphores:
                self._semaphores[loop] = asyncio.Semaphore(self.max_concurrency)
            return self._semaphores[loop]

    # ------------------------------------------------------------------ the sync bridge
    def run_sync(self, awaitable: Awaitable[T]) -> T:
        """Run a coroutine on this client's background event loop and wait for its result."""
        loop = self._background_loop()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise RuntimeError("blocking call from inside the client's own event loop; await instead")
        return asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), loop).result()

    def close(self) -> None:
        """Stop the background event loop (started by the first blocking call)."""
        with self._state_lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _background_loop(self) -> asyncio.AbstractEventLoop:
        with self._state_lock:
            if self._loop is None or self._loop.is_closed():
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name=f"{self!r} loop", daemon=True).start()
            return self._loop


class Connection:
    """An open connection pool of an :class:`HttpClient` (from :meth:`HttpClient.connect`)."""

    def __init__(self, http: HttpClient, client: httpx.AsyncClient) -> None:
        self.http, self.client = http, client

    async def post(self, path: str, body: Mapping[str, Any]) -> dict:
        """POST ``body`` as JSON to ``path`` within the limit, with retries (module docstring);
        the server's JSON object, or :class:`~cascade_rl.llm.base.GenerationError` naming the URL."""
        http, url = self.http, f"{self.http.base_url}{path}"
        for attempt in range(http.max_retries + 1):
            last = attempt == http.max_retries
            try:
                async with http.semaphore():
                    response = await asyncio.wait_for(self.client.post(path, json=body), http.timeout)
            except (httpx.TransportError, asyncio.TimeoutError) as error:
                if last:
                    raise GenerationError(
                        f"POST {url} {_failure(error)} after {attempt + 1} attempt(s) (timeout {http.timeout:g} s)"
                    ) from error
                await asyncio.sleep(http.backoff(attempt))
                continue
            if response.status_code < 400:
                return _json(response, url)
            error_text = f"POST {url} -> HTTP {response.status_code}: {response.text[:500]}"
            if response.status_code not in RETRY_STATUS:
                raise HTTPStatusError(error_text, response.status_code)
            if last:
                raise HTTPStatusError(f"{error_text} (after {attempt + 1} attempts)", response.status_code)
            await asyncio.sleep(http.backoff(attempt, response.headers.get("Retry-After")))
        raise AssertionError("unreachable")


def _failure(error: Exception) -> str:
    if isinstance(error, (httpx.TimeoutException, asyncio.TimeoutError)):
        return "timed out"
    return f"connection failed ({type(error).__name__}: {error})"


def _json(response: httpx.Response, url: str) -> dict:
    try:
        data = response.json()
    except ValueError as error:
        raise GenerationError(f"POST {url}: response is not JSON: {response.text[:300]!r}") from error
    if not isinstance(data, dict):
        raise GenerationError(f"POST {url}: expected a JSON object, got {str(data)[:300]}")
    return data


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable
