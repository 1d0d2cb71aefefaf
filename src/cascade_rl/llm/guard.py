"""Fail fast while a server is down (SPEC sections 5 and 11: a reward that cannot be computed has
no verdict, and the run goes on).

A client retries each request with backoff (:class:`~cascade_rl.llm.transport.HttpClient`),
so one request to a dead or hanging server costs ``(max_retries + 1) * timeout`` seconds plus
the backoff. Without a guard, a batch of 1,024 rollouts against a hanging reward model would
cost that once per wave of ``max_concurrency`` requests: hours per RL step. A
:class:`ServiceGuard` lets at most ``limit`` calls run at once and, once a call has failed
because of the *server* (it timed out, could not connect, or kept answering HTTP 429 / 5xx
through all its retries), fails every call that starts in the next ``cooldown`` seconds at once
with :class:`ServiceUnavailable`, naming the first failure. A call that fails for its own
reasons (HTTP 400: an input the server refuses) does not open the guard. After the cooldown the
next calls reach the server again, so a server that comes back is used again.

:func:`wait_for_url` is the other half: before a stage trains, wait (bounded) for a server that
is still loading its model to answer.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from cascade_rl.llm.base import GenerationError
from cascade_rl.llm.transport import RETRY_STATUS

T = TypeVar("T")
log = logging.getLogger(__name__)


class ServiceUnavailable(GenerationError):
    """A call was not sent: the server failed an earlier call less than ``cooldown`` s ago."""


def server_failed(error: BaseException) -> bool:
    """Whether ``error`` says the server is down or overloaded, rather than that it refused this
    one request (HTTP errors other than 429 / 5xx carry a ``status``)."""
    if isinstance(error, ServiceUnavailable):
        return False
    status = getattr(error, "status", None)
    return isinstance(error, (GenerationError, asyncio.TimeoutError)) and (status is None or status in RETRY_STATUS)


class ServiceGuard:
    """At most ``limit`` calls at once; fail fast for ``cooldown`` s after a server failure
    (module docstring). ``name`` (the server's URL) appears in the errors."""

    def __init__(self, name: str, *, limit: int, cooldown: float = 60.0) -> None:
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive integer, got {limit!r}")
        if cooldown < 0:
            raise ValueError(f"cooldown must be >= 0, got {cooldown!r}")
        self.name, self.limit, self.cooldown = name, limit, float(cooldown)
        self.open_until = 0.0
        self.reason = ""
        self._gates: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    async def run(self, call: Callable[[], Awaitable[T]]) -> T:
        """Await ``call()`` within the limit, unless the guard is open."""
        async with self._gate():
            self.check()
            try:
                return await call()
            except Exception as error:
                if server_failed(error):
                    self.trip(error)
                raise

    def check(self) -> None:
        """Raise :class:`ServiceUnavailable` while the guard is open."""
        remaining = self.open_until - time.monotonic()
        if remaining > 0:
            raise ServiceUnavailable(
                f"not sent: {self.name} failed {self.cooldown - remaining:.0f} s ago ({self.reason}); "
                f"calls fail at once for {self.cooldown:g} s after a server failure"
            )

    def trip(self, error: BaseException) -> None:
        with self._lock:
            if self.open_until <= time.monotonic():
                self.reason = f"{type(error).__name__}: {error}"[:300]
                log.warning("%s failed; failing calls for %g s: %s", self.name, self.cooldown, self.reason)
            self.open_until = time.monotonic() + self.cooldown

    def _gate(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        with self._lock:
            if loop not in self._gates:
                self._gates[loop] = asyncio.Semaphore(self.limit)
            return self._gates[loop]


def wait_for_url(url: str, deadline: float, headers: Mapping[str, str] | None = None) -> None:
    """Poll ``GET url`` until it answers 200; ``TimeoutError`` with the last reason (connection
    refused, an HTTP status) at ``deadline`` (a ``time.monotonic()`` value)."""
    reason = "no answer"
    while True:
        request = urllib.request.Request(url, headers=dict(headers or {}))
        try:
            with urllib.request.urlopen(request, timeout=max(0.1, min(5.0, deadline - time.monotonic()))):
                return
        except urllib.error.HTTPError as error:
            reason = f"GET {url} -> HTTP {error.code}"
        except (urllib.error.URLError, OSError) as error:
            reason = str(getattr(error, "reason", error))
        if time.monotonic() >= deadline:
            raise TimeoutError(reason)
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
