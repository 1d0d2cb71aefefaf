"""A bounded pool of persistent sandboxes with a futures and an asyncio API (SPEC section 6:
"verification runs in parallel and asynchronously").

``SandboxPool(workers)`` owns ``workers`` threads; each thread lazily starts one
:class:`~cascade_rl.sandbox.core.SandboxServer` and keeps it for every program it runs, so a
run costs a fork inside the sandbox instead of a bwrap and interpreter start-up. A server that
dies (a program killed it) is replaced before the next run. A call that needs a different
sandbox shape (a ``workdir`` or another network setting) gets a one-shot sandbox.

Jobs: ``submit_job(job, *args)`` runs ``job(runner, *args)`` on a worker, where ``runner`` is
that worker's :class:`Runner` (``runner.run(argv, ...)`` / ``runner.run_python(source,
...)``); a job holds its worker until it returns, so e.g. all tests of one program run back to
back in one sandbox and the job can stop at the first failure.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from cascade_rl.sandbox import core
from cascade_rl.sandbox.core import DEFAULT_LIMITS, Limits, RunResult, SandboxServer

T = TypeVar("T")


class Runner:
    """Runs programs, one at a time, in one worker's persistent sandbox."""

    def __init__(self, *, network: bool, tmp_mb: int) -> None:
        self.network = network
        self.tmp_mb = tmp_mb
        self._server: SandboxServer | None = None
        self._replaced = 0  # dead sandboxes replaced

    @property
    def replacements(self) -> int:
        """Sandboxes this worker replaced because they died (a program killed its supervisor)."""
        return self._replaced

    def _live_server(self) -> SandboxServer:
        if self._server is None or not self._server.alive:
            if self._server is not None:
                self._replaced += 1
                self._server.close()
                self._server = None
            self._server = SandboxServer(limits=Limits(tmp_mb=self.tmp_mb), network=self.network)
        return self._server

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes = b"",
        limits: Limits = DEFAULT_LIMITS,
        env: Mapping[str, str] | None = None,
        workdir: Path | None = None,
        writable_workdir: bool = True,
        network: bool | None = None,
    ) -> RunResult:
        """Like :func:`cascade_rl.sandbox.run`, in this worker's sandbox when it fits."""
        if workdir is not None or (network is not None and network != self.network):
            return core.run(
                list(argv),
                stdin=stdin,
                limits=limits,
                workdir=workdir,
                writable_workdir=writable_workdir,
                env=dict(env or {}),
                network=bool(network),
            )
        return self._live_server().run(argv, stdin=stdin, limits=limits, env=env)

    def run_python(self, source: str, **options: Any) -> RunResult:
        """Like :meth:`SandboxServer.run_python`, in this worker's sandbox."""
        return self._live_server().run_python(source, **options)

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None


class SandboxPool:
    """``workers`` persistent sandboxes behind a thread pool (see the module docstring)."""

    def __init__(
        self, workers: int | None = None, *, network: bool = False, tmp_mb: int = DEFAULT_LIMITS.tmp_mb
    ) -> None:
        workers = (os.cpu_count() or 1) if workers is None else workers
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"SandboxPool: workers must be a positive integer, got {workers!r}")
        self.workers = workers
        self.network = network
        self.tmp_mb = tmp_mb
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cascade-sandbox")
        self._local = threading.local()
        self._runners: list[Runner] = []
        self._closed_replacements = 0
        self._lock = threading.Lock()
        self._closed = False

    @property
    def replacements(self) -> int:
        """Sandboxes replaced so far by this pool's workers because they died: none while
        programs behave."""
        with self._lock:
            return self._closed_replacements + sum(runner.replacements for runner in self._runners)

    def _runner(self) -> Runner:
        runner = getattr(self._local, "runner", None)
        if runner is None:
            runner = Runner(network=self.network, tmp_mb=self.tmp_mb)
            self._local.runner = runner
            with self._lock:
                self._runners.append(runner)
        return runner

    def submit_job(self, job: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Run ``job(runner, *args, **kwargs)`` on a free worker."""
        if self._closed:
            raise RuntimeError("SandboxPool is closed")
        return self._executor.submit(lambda: job(self._runner(), *args, **kwargs))

    def submit(self, argv: Sequence[str], **options: Any) -> Future[RunResult]:
        """Run ``argv`` on a free worker (options as for :func:`cascade_rl.sandbox.run`)."""
        return self.submit_job(lambda runner: runner.run(argv, **options))

    def submit_python(self, source: str, **options: Any) -> Future[RunResult]:
        """Run Python ``source`` on a free worker (options as for ``run_python``)."""
        return self.submit_job(lambda runner: runner.run_python(source, **options))

    async def run_async(self, argv: Sequence[str], **options: Any) -> RunResult:
        return await asyncio.wrap_future(self.submit(argv, **options))

    async def run_python_async(self, source: str, **options: Any) -> RunResult:
        return await asyncio.wrap_future(self.submit_python(source, **options))

    def close(self) -> None:
        """Finish queued work, then stop every sandbox."""
        if self._closed:
            return
        self._closed = True
        self._executor.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            runners, self._runners = self._runners, []
        for runner in runners:
            runner.close()
        with self._lock:
            self._closed_replacements += sum(runner.replacements for runner in runners)

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_shared: dict[int | None, SandboxPool] = {}
_shared_lock = threading.Lock()


def shared_pool(workers: int | None = None) -> SandboxPool:
    """The process-wide pool of ``workers`` sandboxes (default ``os.cpu_count()``), started on
    first use and kept for later calls asking for the same size, closed at exit."""
    with _shared_lock:
        pool = _shared.get(workers)
        if pool is None or pool._closed:
            pool = _shared[workers] = SandboxPool(workers)
            atexit.register(pool.close)
        return pool
