"""Generation through any OpenAI-compatible chat-completions server -- vLLM, SGLang,
``transformers serve`` -- configured by base URL and model name (DESIGN: ``llm/``; the
large-model path of the SWE pipeline, SPEC section 7, and of data building, SPEC section 6).

* **Thinking rejoined.** Servers with a reasoning parser return the thinking apart from the
  answer (``reasoning_content``: vLLM before 0.10 and ``transformers serve``; ``reasoning``:
  newer vLLM). :func:`join_reasoning` puts it back as ``<think>{reasoning}</think>{content}``
  so that scorers see the same text as with local generation; a response cut by the token
  limit while still thinking (``finish_reason == "length"``, no content) stays *unfinished*
  (``<think>{reasoning}`` without the closing tag, SPEC section 2). Tool calls a server parsed
  out of the text go back in as ``<tool_call>`` blocks (:func:`tool_call_text`).
* **Special tokens kept.** Requests carry ``skip_special_tokens: false`` (vLLM's and SGLang's
  field), so markers that a tokenizer declares special (``<think>``) stay in the text, as local
  decoding keeps them; a server that refuses the field is asked without it from then on.
* **Modes.** ``mode`` keys on user messages become ` /think` / ` /no_think` flags in the
  content before sending (:func:`~cascade_rl.llm.base.apply_modes`): servers drop unknown keys.
* **n > 1.** ``n`` is requested in one call; a server that ignores it (answers with fewer
  choices, as ``transformers serve`` does) or rejects it (HTTP 400/422) gets the missing
  samples as separate requests, and later calls go straight to separate requests.
* **Robustness.** At most ``max_concurrency`` requests in flight (an ``asyncio.Semaphore`` per
  event loop; all synchronous calls share one background loop, hence one limit); each request
  has a wall-clock ``timeout``; connection errors, timeouts, HTTP 429 and 5xx are retried up to
  ``max_retries`` times with exponential backoff (``backoff_base * 2**attempt``, capped at
  ``backoff_max``, times a random factor in [1, 1.25); a ``Retry-After`` header is honoured up
  to the cap). Other HTTP errors fail at once with the server's message.
"""

from __future__ import annotations

import asyncio
import json
import random
import ssl
import threading
import weakref
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from cascade_rl.chat import THINK_CLOSE, THINK_OPEN, TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from cascade_rl.llm.base import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TEMPERATURE,
    DEFAULT_TOP_P,
    GenerationError,
    Messages,
    apply_modes,
    check_request,
)

T = TypeVar("T")

REASONING_FIELDS = ("reasoning_content", "reasoning")
RETRY_STATUS = frozenset({429}) | frozenset(range(500, 600))
N_REJECTED_STATUS = frozenset({400, 422})
#: vLLM / SGLang's request field; false keeps special tokens such as ``<think>`` in the text
KEEP_SPECIAL_TOKENS = "skip_special_tokens"


def join_reasoning(reasoning: str | None, content: str | None, *, finished: bool = True) -> str:
    """The response text in the project's format from a server's separate fields (module
    docstring). Content that already holds ``</think>`` is returned unchanged."""
    content = content or ""
    if not reasoning or THINK_CLOSE in content:
        return content
    if not content and not finished:
        return f"{THINK_OPEN}{reasoning}"
    return f"{THINK_OPEN}{reasoning}{THINK_CLOSE}{content}"


def tool_call_text(content: str | None, tool_calls: Sequence[Mapping[str, Any]] | None) -> str:
    """Content with the server's parsed ``tool_calls`` written back as ``<tool_call>`` blocks,
    the way the Cascade chat template renders them (SPEC section 2)."""
    text = content or ""
    for call in tool_calls or []:
        function = call.get("function") or call
        arguments = function.get("arguments", {})
        arguments = arguments if isinstance(arguments, str) else json.dumps(arguments)
        separator = "\n" if text else ""
        text += (
            f'{separator}{TOOL_CALL_OPEN}\n{{"name": {json.dumps(function.get("name"))}, '
            f'"arguments": {arguments}}}\n{TOOL_CALL_CLOSE}'
        )
    return text


def choice_text(choice: Mapping[str, Any]) -> str:
    """The text of one chat-completion choice, thinking and tool calls rejoined."""
    message = choice.get("message") or {}
    reasoning = next((message[field] for field in REASONING_FIELDS if message.get(field)), None)
    content = tool_call_text(message.get("content"), message.get("tool_calls"))
    return join_reasoning(reasoning, content, finished=choice.get("finish_reason") != "length")


class _HTTPStatusError(GenerationError):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class OpenAICompatGenerator:
    """Samples completions from an OpenAI-compatible chat-completions server (module docstring).

    ``base_url`` is the API root (e.g. ``http://localhost:8000/v1``); ``model`` the served
    model's name; ``extra_body`` is merged into every request (e.g. ``{"seed": 0}`` or
    ``{"chat_template_kwargs": {...}}``); ``keep_special_tokens=False`` never sends
    ``skip_special_tokens`` (for servers known to refuse it)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        max_concurrency: int = 8,
        timeout: float = 600.0,
        max_retries: int = 5,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        default_mode: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        keep_special_tokens: bool = True,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if not model:
            raise ValueError("model must name the served model")
        for name, value, low in (("max_concurrency", max_concurrency, 1), ("max_retries", max_retries, 0)):
            if not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if not timeout > 0 or backoff_base < 0 or backoff_max < 0:
            raise ValueError("timeout must be > 0 and backoff_base, backoff_max >= 0")
        apply_modes([], default_mode)  # validates default_mode
        self.base_url, self.model = base_url.rstrip("/"), model
        self.max_concurrency, self.timeout, self.max_retries = max_concurrency, float(timeout), max_retries
        self.backoff_base, self.backoff_max = backoff_base, backoff_max
        self.default_mode, self.extra_body = default_mode, dict(extra_body or {})
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._ssl_context = ssl.create_default_context()  # built once: clients are made per call
        self.server_honours_n: bool | None = None  # learnt from the first n > 1 request
        # None: ask with skip_special_tokens false; False: not asked (refused once, or not wanted)
        self.keeps_special_tokens: bool | None = None if keep_special_tokens else False
        self._semaphores: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._state_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"OpenAICompatGenerator({self.base_url!r}, model={self.model!r})"

    # ------------------------------------------------------------------ public API

    def generate(
        self,
        messages: list[dict],
        *,
        n: int = 1,
        temperature: float = DEFAULT_TEMPERATURE,
        top_p: float = DEFAULT_TOP_P,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> list[str]:
        """``n`` completions of one conversation (blocking; thread-safe)."""
        return self.run_sync(self.agenerate(messages, n=n, temperature=temperature, top_p=top_p, max_tokens=max_tokens))

    async def agenerate(
        self,
        messages: list[dict],
        *,
        n: int = 1,
        temperature: float = DEFAULT_TEMPERATURE,
        top_p: float = DEFAULT_TOP_P,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> list[str]:
        """``n`` completions of one conversation."""
        check_request(messages, n, temperature, top_p, max_tokens)
        params = {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens}
        async with self._client() as client:
            texts: list[str] = []
            if n > 1 and self.server_honours_n is not False:
                texts = await self._ask_for_n(client, messages, n, params)
            missing = n - len(texts)
            singles = await asyncio.gather(*(self._chat(client, messages, params) for _ in range(missing)))
        return texts + [choice_text(response["choices"][0]) for response in singles]

    def generate_batch(self, conversations: Sequence[Messages], **sampling: Any) -> list[list[str]]:
        """Completions for many conversations, requested concurrently (within the limit)."""
        return self.run_sync(self.agenerate_batch(conversations, **sampling))

    async def agenerate_batch(self, conversations: Sequence[Messages], **sampling: Any) -> list[list[str]]:
        return list(await asyncio.gather(*(self.agenerate(list(m), **sampling) for m in conversations)))

    async def arequest(self, messages: Messages, **params: Any) -> dict:
        """One raw chat-completions request (``params`` such as ``logprobs`` go into the body),
        with the concurrency limit, timeout and retries; returns the server's JSON."""
        check_request(messages, 1, 0.0, 1.0, 1)
        async with self._client() as client:
            return await self._chat(client, messages, params)

    def run_sync(self, awaitable: Awaitable[T]) -> T:
        """Run a coroutine on this generator's background event loop and wait for its result."""
        loop = self._background_loop()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise RuntimeError("blocking call from inside the generator's own event loop; await instead")
        return asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), loop).result()

    def close(self) -> None:
        """Stop the background event loop (started by the first blocking call)."""
        with self._state_lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)

    def __enter__(self) -> OpenAICompatGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base_url,
            headers=self.headers,
            verify=self._ssl_context,
            timeout=httpx.Timeout(self.timeout),
            limits=httpx.Limits(max_connections=self.max_concurrency),
        )

    def _background_loop(self) -> asyncio.AbstractEventLoop:
        with self._state_lock:
            if self._loop is None or self._loop.is_closed():
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name=f"{self!r} loop", daemon=True).start()
            return self._loop

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        with self._state_lock:
            if loop not in self._semaphores:
                self._semaphores[loop] = asyncio.Semaphore(self.max_concurrency)
            return self._semaphores[loop]

    async def _ask_for_n(self, client: httpx.AsyncClient, messages: Messages, n: int, params: dict) -> list[str]:
        """Completions from one request for ``n``; fewer (or none, if the server rejects ``n``)
        when the server does not honour it."""
        try:
            response = await self._chat(client, messages, {**params, "n": n})
        except _HTTPStatusError as error:
            if error.status not in N_REJECTED_STATUS:
                raise
            self.server_honours_n = False
            return []
        texts = [choice_text(choice) for choice in response["choices"]]
        self.server_honours_n = len(texts) >= n
        return texts[:n]

    async def _chat(self, client: httpx.AsyncClient, messages: Messages, params: Mapping[str, Any]) -> dict:
        body = {**self.extra_body, **params, "model": self.model, "messages": apply_modes(messages, self.default_mode)}
        if self.keeps_special_tokens is not False:
            body.setdefault(KEEP_SPECIAL_TOKENS, False)
        try:
            response = await self._post_with_retries(client, "/chat/completions", body)
        except _HTTPStatusError as error:  # a server that refuses the extension: ask without it from now on
            if error.status not in N_REJECTED_STATUS or KEEP_SPECIAL_TOKENS not in str(error):
                raise
            self.keeps_special_tokens = False
            body.pop(KEEP_SPECIAL_TOKENS)
            response = await self._post_with_retries(client, "/chat/completions", body)
        if not response.get("choices"):
            raise GenerationError(f"{self.base_url}: response without choices: {str(response)[:300]}")
        return response

    async def _post_with_retries(self, client: httpx.AsyncClient, path: str, body: dict) -> dict:
        url = f"{self.base_url}{path}"
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            try:
                async with self._semaphore():
                    response = await asyncio.wait_for(client.post(path, json=body), self.timeout)
            except (httpx.TransportError, asyncio.TimeoutError) as error:
                reason = (
                    "timed out"
                    if isinstance(error, (httpx.TimeoutException, asyncio.TimeoutError))
                    else f"connection failed ({type(error).__name__}: {error})"
                )
                if last:
                    raise GenerationError(
                        f"POST {url} {reason} after {attempt + 1} attempt(s) (timeout {self.timeout:g} s)"
                    ) from error
                await asyncio.sleep(self._backoff(attempt))
                continue
            if response.status_code < 400:
                return _json(response, url)
            error_text = f"POST {url} -> HTTP {response.status_code}: {response.text[:500]}"
            if response.status_code not in RETRY_STATUS:
                raise _HTTPStatusError(error_text, response.status_code)
            if last:
                raise _HTTPStatusError(f"{error_text} (after {attempt + 1} attempts)", response.status_code)
            await asyncio.sleep(self._backoff(attempt, response.headers.get("Retry-After")))
        raise AssertionError("unreachable")

    def _backoff(self, attempt: int, retry_after: str | None = None) -> float:
        delay = min(self.backoff_max, self.backoff_base * 2**attempt) * random.uniform(1.0, 1.25)
        try:
            delay = max(delay, min(self.backoff_max, float(retry_after))) if retry_after else delay
        except ValueError:  # an HTTP date instead of seconds: keep the computed delay
            pass
        return min(delay, self.backoff_max * 1.25)


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
