"""Hard deadlines for scorer calls that may hang (SPEC sections 5-6: verification must never stall
a rollout batch).

Symbolic checkers (sympy behind math-verify), regex engines and user code can run for hours on
pathological input such as ``9^{9^{9^{9}}}``. ``signal.alarm`` only works in the main thread, and a
thread cannot be killed, so a real deadline needs a process: :class:`WorkerPool` keeps a few
persistent worker processes (started lazily, reused across calls), sends each call
``fn(*args, **kwargs)`` (picklable ``fn``, arguments and result) to an idle worker and waits at
most ``timeout`` seconds for the answer. On a timeout the worker is killed (SIGKILL), a fresh one
is started in its place and :class:`CallTimeout` is raised; the caller never hangs. It works from
any thread, and from many threads at once (each call holds one worker; callers queue when all are
busy).

What the workers do and do not guarantee:

* a worker runs one call at a time; a call's deadline starts when the request is sent, not while
  waiting for a free worker or for a new worker to start (imports can take a second);
* ``memory_limit_mb`` caps each worker's address space (``RLIMIT_AS``), so an answer that makes
  sympy build a gigantic integer fails with ``MemoryError`` inside the worker instead of swapping
  the machine; a worker that dies mid-call raises :class:`WorkerDied`;
* workers are plain subprocesses of the current interpreter (no ``fork`` of a multi-threaded
  parent); they ignore SIGINT, exit when their parent closes the connection, exit within a second
  when the parent dies, and are killed at interpreter exit (``atexit``);
* this is a deadline, not a sandbox: the function runs with the caller's user rights (use
  :mod:`cascade_rl.sandbox` for untrusted programs).
"""

from __future__ import annotations

import atexit
import importlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["CallTimeout", "WorkerDied", "WorkerPool"]


class CallTimeout(TimeoutError):
    """The call did not finish before its deadline; its worker was killed."""


class WorkerDied(RuntimeError):
    """The worker process exited during the call (crash, memory limit, killed from outside)."""


_LIVE_WORKERS: weakref.WeakSet[_Worker] = weakref.WeakSet()


class _Worker:
    """One worker subprocess and the socket it is driven through."""

    def __init__(self, preload: Sequence[str], memory_limit_mb: int | None) -> None:
        parent_end, child_end = socket.socketpair()
        command = [
            sys.executable,
            "-c",
            "from cascade_rl.rewards.timeout import serve; serve()",
            str(child_end.fileno()),
            str(memory_limit_mb or 0),
            *preload,
        ]
        with child_end:
            self.process = subprocess.Popen(
                command, pass_fds=(child_end.fileno(),), stdin=subprocess.DEVNULL, env=_child_environment()
            )
        self.connection = Connection(parent_end.detach())
        self.ready = False
        #: a request was sent and its answer not yet read: the connection is out of step
        self.busy = False
        _LIVE_WORKERS.add(self)

    def wait_ready(self, start_timeout: float) -> None:
        """Block until the worker has imported its preload modules."""
        if self.ready:
            return
        if not self.connection.poll(start_timeout):
            raise WorkerDied(f"worker did not start within {start_timeout:g} s")
        kind, detail = self._receive()
        if kind != "ready":
            raise WorkerDied(f"worker failed to start: {detail}")
        self.ready = True

    def call(self, fn: Callable, args: tuple, kwargs: dict, timeout: float) -> Any:
        self.connection.send((fn, args, kwargs))  # pickles first: a bad request sends nothing
        self.busy = True
        if not self.connection.poll(timeout):
            raise CallTimeout(f"{getattr(fn, '__qualname__', fn)} did not finish within {timeout:g} s")
        ok, value = self._receive()
        self.busy = False
        if not ok:
            raise value
        return value

    def _receive(self) -> Any:
        try:
            return self.connection.recv()
        except (EOFError, OSError) as error:
            code = self.process.poll()
            raise WorkerDied(f"worker process exited (code {code}) during the call") from error

    @property
    def healthy(self) -> bool:
        return self.ready and not self.busy and self.process.poll() is None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - kernel did not reap in time
            pass
        self.connection.close()
        _LIVE_WORKERS.discard(self)


def _child_environment() -> dict[str, str]:
    """The parent's environment, with its import path, so functions defined anywhere the parent
    can import (a test module, a user package) unpickle in the worker."""
    paths = [os.path.abspath(path) for path in sys.path if path]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


class WorkerPool:
    """Up to ``size`` persistent worker processes that run calls under a hard deadline.

    ``preload``: what each worker does before it takes calls, paid once per worker and outside
    any deadline: ``"module"`` imports a module, ``"module:function"`` also calls
    ``function()`` (a warm-up, e.g. to build a parser's tables). ``memory_limit_mb``: address-space cap per
    worker (None: no cap).
    ``start_timeout``: how long a new worker may take to start before :class:`WorkerDied`.
    """

    def __init__(
        self,
        size: int = 2,
        *,
        preload: Sequence[str] = (),
        memory_limit_mb: int | None = None,
        start_timeout: float = 120.0,
    ) -> None:
        if size < 1:
            raise ValueError(f"WorkerPool size must be >= 1, got {size}")
        if memory_limit_mb is not None and memory_limit_mb < 64:
            raise ValueError(f"memory_limit_mb must be >= 64 (or None), got {memory_limit_mb}")
        self.size = size
        self.preload = tuple(preload)
        self.memory_limit_mb = memory_limit_mb
        self.start_timeout = start_timeout
        self._condition = threading.Condition()
        self._reset_state()

    def _reset_state(self) -> None:
        self._idle: list[_Worker] = []
        self._live = 0
        self._closed = False
        self._owner_pid = os.getpid()

    def call(self, fn: Callable, *args: Any, timeout: float, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in a worker; its result, or the exception it raised.

        Raises :class:`CallTimeout` if it runs longer than ``timeout`` seconds (the worker is
        killed and replaced) and :class:`WorkerDied` if the worker exits during the call.
        """
        if not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        worker = self._acquire()
        try:
            worker.wait_ready(self.start_timeout)
            return worker.call(fn, args, kwargs, timeout)
        finally:
            # fn raising in the worker, or a request that did not pickle, leaves it healthy;
            # a timeout, a crash or an interrupt while waiting does not.
            self._release(worker, worker.healthy)

    def _acquire(self) -> _Worker:
        with self._condition:
            if self._owner_pid != os.getpid():  # we are a forked child: the workers are not ours
                self._reset_state()
            if self._closed:
                raise RuntimeError("WorkerPool is closed")
            while not self._idle and self._live >= self.size:
                self._condition.wait()
            if self._idle:
                return self._idle.pop()
            self._live += 1
        try:
            return _Worker(self.preload, self.memory_limit_mb)
        except BaseException:
            with self._condition:
                self._live -= 1
                self._condition.notify()
            raise

    def _release(self, worker: _Worker, healthy: bool) -> None:
        replacement = None
        if not healthy:
            worker.kill()
            if not self._closed:
                # start the replacement now, so its imports overlap with the caller's work
                try:
                    replacement = _Worker(self.preload, self.memory_limit_mb)
                except OSError:
                    replacement = None
        with self._condition:
            if healthy and not self._closed:
                self._idle.append(worker)
            elif replacement is not None and not self._closed:
                self._idle.append(replacement)
            else:
                self._live -= 1
                if healthy:
                    worker.kill()
                if replacement is not None:
                    replacement.kill()
            self._condition.notify()

    def prestart(self, count: int | None = None) -> None:
        """Start workers now, up to ``count`` (default: ``size``) in all, and wait until they are
        ready, so that the first calls do not wait for start-up (imports, warm-up)."""
        with self._condition:
            if self._owner_pid != os.getpid():
                self._reset_state()
            missing = max(0, min(self.size if count is None else count, self.size) - self._live)
            self._live += missing
        workers: list[_Worker] = []
        try:
            for _ in range(missing):
                workers.append(_Worker(self.preload, self.memory_limit_mb))
            for worker in workers:
                worker.wait_ready(self.start_timeout)
        except BaseException:
            for worker in workers:
                worker.kill()
            workers = []
            raise
        finally:
            with self._condition:
                self._live -= missing - len(workers)
                self._idle.extend(workers)
                self._condition.notify_all()

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the idle workers (for tests and diagnostics)."""
        with self._condition:
            return [worker.process.pid for worker in self._idle]

    def close(self) -> None:
        """Kill the idle workers; busy ones are killed when their call returns."""
        with self._condition:
            self._closed = True
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            self._condition.notify_all()
        for worker in idle:
            worker.kill()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@atexit.register
def _kill_all_workers() -> None:
    for worker in list(_LIVE_WORKERS):
        worker.kill()


# ----------------------------------------------------------------------------- worker side
def serve() -> None:
    """Entry point of a worker process: ``argv = [fd, memory_limit_mb, *preload]``."""
    fd, memory_limit_mb, preload = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if memory_limit_mb:
        import resource

        limit = memory_limit_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    _exit_when_orphaned()
    connection = Connection(fd)
    try:
        for entry in preload:
            module_name, _, function = entry.partition(":")
            module = importlib.import_module(module_name)
            if function:
                getattr(module, function)()
    except BaseException as error:  # noqa: BLE001 - reported to the parent
        connection.send(("error", f"{type(error).__name__}: {error}"))
        return
    connection.send(("ready", os.getpid()))
    while True:
        try:
            fn, args, kwargs = connection.recv()
        except (EOFError, OSError):
            return  # parent closed the connection or exited
        except BaseException as error:  # noqa: BLE001 - request did not unpickle here
            _send_result(connection, False, error)
            continue
        try:
            _send_result(connection, True, fn(*args, **kwargs))
        except BaseException as error:  # noqa: BLE001 - raised again in the parent
            _send_result(connection, False, error)


def _send_result(connection: Connection, ok: bool, value: Any) -> None:
    try:
        connection.send((ok, value))
    except Exception as error:  # noqa: BLE001 - unpicklable result or exception
        described = value if ok else f"{type(value).__name__}: {value}"
        connection.send((False, RuntimeError(f"worker could not send back {described!r}: {error}")))


def _exit_when_orphaned() -> None:
    """Exit within a second once the parent is gone, even while busy in a long computation."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, daemon=True, name="orphan-watch").start()
