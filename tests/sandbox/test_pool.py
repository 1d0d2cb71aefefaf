"""The bounded pool of persistent sandboxes (sandbox/pool.py, SPEC section 6: verification in
parallel and asynchronously)."""

import asyncio
import os
import signal
import time

import pytest

from cascade_rl import sandbox
from cascade_rl.sandbox import Limits, SandboxPool

DOUBLE = "print(int(input()) * 2)"


def test_results_come_back_in_submission_order():
    with SandboxPool(2) as pool:
        futures = [pool.submit_python(DOUBLE, stdin=f"{i}\n".encode()) for i in range(12)]
        assert [f.result().stdout for f in futures] == [f"{2 * i}\n".encode() for i in range(12)]


def test_workers_bound_concurrency():
    """Four one-second sleeps on two workers take two rounds, not one."""
    with SandboxPool(2) as pool:
        pool.submit(["true"]).result()  # start-up outside the measurement
        start = time.monotonic()
        futures = [pool.submit(["sleep", "1"], limits=Limits(time_s=5)) for _ in range(4)]
        assert all(f.result().ok for f in futures)
        assert 1.9 < time.monotonic() - start < 6


def test_async_api_runs_while_the_event_loop_does_other_work():
    async def main(pool):
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        results = await asyncio.gather(pool.run_async(["sleep", "0.3"]), pool.run_python_async(DOUBLE, stdin=b"5\n"))
        task.cancel()
        return results, ticks

    with SandboxPool(2) as pool:
        (slept, doubled), ticks = asyncio.run(main(pool))
    assert slept.ok and doubled.stdout == b"10\n"
    assert ticks >= 10  # the loop kept running while the sandboxes worked


def test_a_dead_sandbox_is_replaced_before_the_next_run():
    with SandboxPool(1) as pool:
        first = pool.submit_job(
            lambda runner: (runner.run_python(DOUBLE, stdin=b"1\n"), runner._live_server())
        ).result()
        result, server = first
        assert result.stdout == b"2\n"
        os.killpg(server._process.pid, signal.SIGKILL)  # e.g. the OOM killer
        server._process.wait()
        assert pool.submit_python(DOUBLE, stdin=b"4\n").result().stdout == b"8\n"


def test_jobs_keep_one_worker_for_several_runs(bwrap_only):  # the private /tmp is bwrap's
    def two_runs(runner):
        runner.run_python("open('/tmp/note', 'w').write('kept')")
        return runner.run(["cat", "/tmp/note"])

    with SandboxPool(1) as pool:
        # /tmp is wiped between runs, so the second run of the job cannot see the note either
        assert pool.submit_job(two_runs).result().returncode == 1


def test_workdir_runs_get_a_one_shot_sandbox(tmp_path):
    (tmp_path / "x.txt").write_text("hello")
    with SandboxPool(1) as pool:
        result = pool.submit(["cat", "x.txt"], workdir=tmp_path).result()
    assert result.stdout == b"hello" and (tmp_path / "x.txt").exists()


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_bad_worker_counts_are_rejected(workers):
    with pytest.raises(ValueError, match="workers"):
        SandboxPool(workers)


def test_closed_pool_refuses_work_and_shared_pool_is_reused():
    pool = SandboxPool(1)
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(["true"])
    assert sandbox.shared_pool() is sandbox.shared_pool()
