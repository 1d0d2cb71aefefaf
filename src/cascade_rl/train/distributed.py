"""Several processes, one run (DESIGN convention 12): who writes, how the others wait, and how
results are shared. Works the same under ``torchrun`` / ``accelerate launch`` (any backend)
and in a single plain process, where every function is a no-op around local work.

* :func:`gather` — every process gets every process's object, in rank order (a collective:
  all processes call it at the same point; bounded by the process group's timeout).
* :func:`on_main` — the main process does some work (writing run files, evaluating,
  building the toy world) while the others wait for its result. The wait is not a collective:
  it polls the launcher's key-value store, so a main-only phase may take hours (evaluation at
  64K tokens), yet a main process that dies or raises makes the others stop with a clear
  error within ``stale_after`` seconds instead of hanging (the main process keeps a heartbeat
  in the store while it works).

Only the main process writes run files; every other process reads what it needs after
:func:`on_main` returns (the run directory is on a filesystem all nodes share, as checkpoints
are at paper scale).
"""

from __future__ import annotations

import itertools
import pickle
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class MainProcessError(RuntimeError):
    """The main process failed or stopped while this process waited for it."""


HEARTBEAT_S = 5.0
POLL_S = 0.2
STALE_AFTER_S = 120.0
_sections = itertools.count()


def _dist():
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


def world_size() -> int:
    dist = _dist()
    if dist is None:
        from accelerate import PartialState

        return PartialState().num_processes
    return dist.get_world_size()


def rank() -> int:
    dist = _dist()
    if dist is None:
        from accelerate import PartialState

        return PartialState().process_index
    return dist.get_rank()


def local_rank() -> int:
    """This process's index among the processes of its node."""
    from accelerate import PartialState

    return PartialState().local_process_index


def local_world_size() -> int:
    """How many processes of the run share this node (``LOCAL_WORLD_SIZE``, set by the launchers)."""
    import os

    return int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def is_main() -> bool:
    return rank() == 0


def start() -> None:
    """Join the process group when launched by ``torchrun`` / ``accelerate launch`` (no-op
    otherwise), so that the sections before the first trainer can already coordinate."""
    from accelerate import PartialState

    PartialState()


def gather(value: Any) -> list[Any]:
    """``value`` of every process, in rank order (all processes must call it)."""
    dist = _dist()
    if dist is None or dist.get_world_size() == 1:
        return [value]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def agree(value: T) -> T:
    """The main process's ``value`` on every process (all processes must call it)."""
    dist = _dist()
    if dist is None or dist.get_world_size() == 1:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    dist = _dist()
    if dist is not None and dist.get_world_size() > 1:
        dist.barrier()


def on_main(name: str, work: Callable[[], T], *, stale_after: float = STALE_AFTER_S) -> T:
    """Run ``work`` on the main process only; every process returns its result (which must
    pickle). An exception on the main process is raised again on every process."""
    dist = _dist()
    if dist is None or dist.get_world_size() == 1:
        return work()
    from torch.distributed.distributed_c10d import _get_default_store

    store = _get_default_store()
    key = f"cascade/on_main/{next(_sections)}/{name}"
    if dist.get_rank() == 0:
        return _run_as_main(store, key, work)
    return _wait_for_main(store, key, name, stale_after)


def _run_as_main(store: Any, key: str, work: Callable[[], T]) -> T:
    stop = threading.Event()

    def beat() -> None:
        count = 0
        while not stop.is_set():
            store.set(f"{key}/heartbeat", str(count))
            count += 1
            stop.wait(HEARTBEAT_S)

    thread = threading.Thread(target=beat, name="cascade-heartbeat", daemon=True)
    thread.start()
    try:
        result = work()
    except BaseException as error:
        store.set(key, pickle.dumps(("error", f"{type(error).__name__}: {error}")))
        raise
    finally:
        stop.set()
        thread.join()
    store.set(key, pickle.dumps(("ok", result)))
    return result


def _wait_for_main(store: Any, key: str, name: str, stale_after: float) -> Any:
    last_beat, changed_at = None, time.monotonic()
    while not store.check([key]):
        beat = store.get(f"{key}/heartbeat").decode() if store.check([f"{key}/heartbeat"]) else None
        if beat != last_beat:
            last_beat, changed_at = beat, time.monotonic()
        elif time.monotonic() - changed_at > stale_after:
            raise MainProcessError(
                f"the main process stopped responding during {name!r} (no heartbeat for {stale_after:.0f} s); "
                "stopping this process too"
            )
        time.sleep(POLL_S)
    status, value = pickle.loads(store.get(key))
    if status == "error":
        raise MainProcessError(f"the main process failed during {name!r}: {value}")
    return value
