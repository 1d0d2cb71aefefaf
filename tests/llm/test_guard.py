"""ServiceGuard: at most `limit` calls at once; after a server failure, calls fail at once for
`cooldown` seconds, then reach the server again; a refused request does not count."""

import asyncio
import time

import pytest

from cascade_rl.llm.base import GenerationError
from cascade_rl.llm.guard import ServiceGuard, ServiceUnavailable, wait_for_url


class Refused(GenerationError):
    status = 400


def run(guard, outcome):
    async def call():
        await asyncio.sleep(0.01)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return asyncio.run(guard.run(call))


def test_a_server_failure_opens_the_guard_for_the_cooldown():
    guard = ServiceGuard("http://rm:8000/pooling", limit=2, cooldown=0.3)
    assert run(guard, 1.5) == 1.5
    with pytest.raises(Refused):
        run(guard, Refused("HTTP 400: too long"))
    assert run(guard, 2.5) == 2.5  # a refused request is not the server's failure
    with pytest.raises(GenerationError, match="timed out"):
        run(guard, GenerationError("POST http://rm:8000/pooling timed out after 4 attempt(s)"))
    with pytest.raises(ServiceUnavailable, match="not sent: http://rm:8000/pooling failed .* timed out"):
        run(guard, 3.5)
    time.sleep(0.35)
    assert run(guard, 4.5) == 4.5  # back after the cooldown


def test_at_most_limit_calls_run_at_once():
    guard = ServiceGuard("s", limit=3)
    running = peak = 0

    async def call():
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1

    async def many():
        await asyncio.gather(*(guard.run(call) for _ in range(10)))

    asyncio.run(many())
    assert peak == 3


def test_wait_for_url_names_why_it_gave_up():
    with pytest.raises(TimeoutError, match="refused"):
        wait_for_url("http://127.0.0.1:9/health", time.monotonic() + 0.5)
