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
* **Robustness.** The HTTP machinery is :class:`~cascade_rl.llm.transport.HttpClient`'s (the
  generator is one): at most ``max_concurrency`` requests in flight, a wall-clock ``timeout``
  per request, retries with exponential backoff on connection errors, timeouts, HTTP 429 and
  5xx, and a blocking bridge (:meth:`run_sync`) on one background event loop. Other HTTP errors
  fail at once with the server's message.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from cascade_rl.chat import THINK_CLOSE, THINK_OPEN, TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from cascade_rl.llm.base import GenerationError, Messages, Sampling, apply_modes, check_messages
from cascade_rl.llm.transport import Connection, HttpClient, HTTPStatusError

REASONING_FIELDS = ("reasoning_content", "reasoning")
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


class OpenAICompatGenerator(HttpClient):
    """Samples completions from an OpenAI-compatible chat-completions server (module docstring).

    ``base_url`` is the API root (e.g. ``http://localhost:8000/v1``); ``model`` the served
    model's name; ``extra_body`` is merged into every request (e.g. ``{"seed": 0}`` or
    ``{"chat_template_kwargs": {...}}``); ``keep_special_tokens=False`` never sends
    ``skip_special_tokens`` (for servers known to refuse it). The other options are the HTTP
    client's."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        default_mode: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        keep_special_tokens: bool = True,
        **http: Any,
    ) -> None:
        super().__init__(base_url, **http)
        if not model:
            raise ValueError("model must name the served model")
        apply_modes([], default_mode)  # validates default_mode
        self.model, self.default_mode, self.extra_body = model, default_mode, dict(extra_body or {})
        self.server_honours_n: bool | None = None  # learnt from the first n > 1 request
        # None: ask with skip_special_tokens false; False: not asked (refused once, or not wanted)
        self.keeps_special_tokens: bool | None = None if keep_special_tokens else False

    def __repr__(self) -> str:
        return f"OpenAICompatGenerator({self.base_url!r}, model={self.model!r})"

    # ------------------------------------------------------------------ public API

    def generate(self, messages: list[dict], sampling: Sampling = Sampling()) -> list[str]:
        """``sampling.n`` completions of one conversation (blocking; thread-safe)."""
        return self.run_sync(self.agenerate(messages, sampling))

    async def agenerate(self, messages: list[dict], sampling: Sampling = Sampling()) -> list[str]:
        """``sampling.n`` completions of one conversation. ``top_k`` goes into the request body only
        when set (vLLM and SGLang read it there; OpenAI's own API has no such parameter)."""
        check_messages(messages)
        params = sampling.settings()
        n = sampling.n
        async with self.connect() as connection:
            texts: list[str] = []
            if n > 1 and self.server_honours_n is not False:
                texts = await self._ask_for_n(connection, messages, n, params)
            missing = n - len(texts)
            singles = await asyncio.gather(*(self._chat(connection, messages, params) for _ in range(missing)))
        return texts + [choice_text(response["choices"][0]) for response in singles]

    def generate_batch(self, conversations: Sequence[Messages], sampling: Sampling = Sampling()) -> list[list[str]]:
        """Completions for many conversations, requested concurrently (within the limit)."""
        return self.run_sync(self.agenerate_batch(conversations, sampling))

    async def agenerate_batch(
        self, conversations: Sequence[Messages], sampling: Sampling = Sampling()
    ) -> list[list[str]]:
        return list(await asyncio.gather(*(self.agenerate(list(m), sampling) for m in conversations)))

    async def arequest(self, messages: Messages, **params: Any) -> dict:
        """One raw chat-completions request (``params`` such as ``logprobs`` go into the body),
        with the concurrency limit, timeout and retries; returns the server's JSON."""
        check_messages(messages)
        async with self.connect() as connection:
            return await self._chat(connection, messages, params)

    # ------------------------------------------------------------------ internals

    async def _ask_for_n(self, connection: Connection, messages: Messages, n: int, params: dict) -> list[str]:
        """Completions from one request for ``n``; fewer (or none, if the server rejects ``n``)
        when the server does not honour it."""
        try:
            response = await self._chat(connection, messages, {**params, "n": n})
        except HTTPStatusError as error:
            if error.status not in N_REJECTED_STATUS:
                raise
            self.server_honours_n = False
            return []
        texts = [choice_text(choice) for choice in response["choices"]]
        self.server_honours_n = len(texts) >= n
        return texts[:n]

    async def _chat(self, connection: Connection, messages: Messages, params: Mapping[str, Any]) -> dict:
        body = {**self.extra_body, **params, "model": self.model, "messages": apply_modes(messages, self.default_mode)}
        if self.keeps_special_tokens is not False:
            body.setdefault(KEEP_SPECIAL_TOKENS, False)
        try:
            response = await connection.post("/chat/completions", body)
        except HTTPStatusError as error:  # a server that refuses the extension: ask without it from now on
            if error.status not in N_REJECTED_STATUS or KEEP_SPECIAL_TOKENS not in str(error):
                raise
            self.keeps_special_tokens = False
            body.pop(KEEP_SPECIAL_TOKENS)
            response = await connection.post("/chat/completions", body)
        if not response.get("choices"):
            raise GenerationError(f"{self.base_url}: response without choices: {str(response)[:300]}")
        return response
