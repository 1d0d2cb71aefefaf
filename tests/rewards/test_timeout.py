"""Tests for the hard-deadline worker pool used by scorers (SPEC sections 5-6)."""

import operator
import os
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from cascade_rl.rewards.timeout import CallTimeout, WorkerDied, WorkerPool


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as handle:  # a zombie is dead too
        return handle.read().split(") ")[1][0] != "Z"


def _wait_dead(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return not _alive(pid)


@pytest.fixture
def pool():
    with WorkerPool(2, memory_limit_mb=1024) as workers:
        yield workers


def test_results_and_errors_come_back_and_the_worker_is_reused(pool):
    first = pool.call(os.getpid, timeout=30)
    assert first != os.getpid()
    assert pool.call(pow, 2, 10, timeout=5) == 1024
    with pytest.raises(ZeroDivisionError):
        pool.call(operator.truediv, 1, 0, timeout=5)
    assert pool.call(os.getpid, timeout=5) == first  # an exception does not cost the worker


def test_a_hung_call_is_killed_at_its_deadline_and_replaced(pool):
    hung = pool.call(os.getpid, timeout=30)
    start = time.perf_counter()
    with pytest.raises(CallTimeout):
        pool.call(time.sleep, 60, timeout=0.5)
    assert time.perf_counter() - start < 0.5 + 1.0
    assert _wait_dead(hung, 5)
    replacement = pool.call(os.getpid, timeout=30)
    assert replacement != hung and pool.call(pow, 3, 3, timeout=5) == 27


def _worker_children() -> list[int]:
    """Live worker processes started by this test process."""
    children = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat, open(f"/proc/{entry}/cmdline") as cmdline:
                fields = stat.read().split(") ")[1].split()
                if int(fields[1]) == os.getpid() and fields[0] != "Z" and "timeout import serve" in cmdline.read():
                    children.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return children


def test_many_threads_share_a_bounded_number_of_workers(pool):
    others = set(_worker_children())  # workers of other pools in this process (e.g. math's)
    with ThreadPoolExecutor(max_workers=6) as threads:
        start = time.perf_counter()
        sleeps = [threads.submit(pool.call, time.sleep, 0.5, timeout=10) for _ in range(6)]
        time.sleep(0.3)
        assert 1 <= len(set(_worker_children()) - others) <= 2
        assert [future.result(timeout=30) for future in sleeps] == [None] * 6
        assert time.perf_counter() - start >= 1.5  # 6 calls queued on 2 workers
        hung = threads.submit(pool.call, time.sleep, 60, timeout=0.5)
        fine = threads.submit(pool.call, pow, 2, 5, timeout=10)
        with pytest.raises(CallTimeout):
            hung.result(timeout=30)
        assert fine.result(timeout=30) == 32
    assert len(set(_worker_children()) - others) <= 2


def test_memory_limit_turns_a_huge_allocation_into_memory_error(pool):
    with pytest.raises(MemoryError):
        pool.call(bytearray, 4 * 1024**3, timeout=30)
    assert pool.call(pow, 2, 3, timeout=5) == 8


def test_a_worker_that_dies_raises_and_is_replaced(pool):
    with pytest.raises(WorkerDied):
        pool.call(os._exit, 3, timeout=30)
    assert pool.call(pow, 2, 2, timeout=30) == 4


def test_unpicklable_calls_fail_cleanly(pool):
    with pytest.raises(Exception, match="pickle|Pickl|lambda"):
        pool.call(lambda: 1, timeout=5)
    assert pool.call(pow, 2, 1, timeout=30) == 2


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="size"):
        WorkerPool(0)
    with WorkerPool(1) as workers, pytest.raises(ValueError, match="timeout"):
        workers.call(pow, 2, 2, timeout=0)


def test_prestart_starts_ready_workers():
    with WorkerPool(2, preload=("json",)) as workers:
        workers.prestart()
        assert len(workers.worker_pids) == 2
        start = time.perf_counter()
        assert workers.call(pow, 2, 3, timeout=5) == 8
        assert time.perf_counter() - start < 0.5  # no start-up left to pay
        workers.prestart()  # already full: starts nothing
        assert len(workers.worker_pids) == 2


def test_a_failing_preload_is_reported():
    with WorkerPool(1, preload=("no_such_module_here",)) as workers:
        with pytest.raises(WorkerDied, match="no_such_module_here"):
            workers.call(pow, 2, 2, timeout=5)


def test_close_kills_the_workers():
    workers = WorkerPool(1)
    pid = workers.call(os.getpid, timeout=30)
    workers.close()
    assert _wait_dead(pid, 5)
    with pytest.raises(RuntimeError, match="closed"):
        workers.call(os.getpid, timeout=5)


def _run_parent(body: str) -> subprocess.Popen:
    script = textwrap.dedent("""
        import os, sys, threading, time
        from cascade_rl.rewards.timeout import WorkerPool
        pool = WorkerPool(1)
    """) + textwrap.dedent(body)
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)


def test_workers_die_with_a_normal_interpreter_exit():
    parent = _run_parent("print(pool.call(os.getpid, timeout=30), flush=True)\n")
    worker = int(parent.stdout.readline())
    assert parent.wait(timeout=30) == 0
    assert _wait_dead(worker, 5)


def test_busy_workers_exit_when_their_parent_is_killed():
    parent = _run_parent("""
        print(pool.call(os.getpid, timeout=30), flush=True)
        threading.Thread(target=pool.call, args=(time.sleep, 600), kwargs={"timeout": 600}).start()
        time.sleep(600)
    """)
    worker = int(parent.stdout.readline())
    time.sleep(0.3)  # the worker is now busy sleeping
    parent.kill()
    parent.wait(timeout=10)
    assert _wait_dead(worker, 5)
