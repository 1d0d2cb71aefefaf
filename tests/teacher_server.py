"""A real teacher server on loopback for tests: ``cascade serve teacher`` in its own
process, serving a tiny checkpoint with vLLM's ``/v1/completions`` ``prompt_logprobs`` protocol."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def health(root: str) -> dict:
    with urllib.request.urlopen(f"{root}/health", timeout=10) as response:
        return json.loads(response.read())


@contextmanager
def served_teacher(path: Path, *, name: str = "teacher", log: Path | None = None) -> Iterator[str]:
    """Serve ``path``; yields the root URL ``http://127.0.0.1:PORT`` (``{root}/v1#{name}`` names
    the model); the process is stopped on exit."""
    port = free_port()
    command = [sys.executable, "-m", "cascade_rl.cli", "serve", "teacher", str(path), "--port", str(port)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    sink = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115 - closed below
    process = subprocess.Popen([*command, "--served-model-name", name], stdout=sink, stderr=sink, env=env)
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert process.poll() is None, f"the teacher server exited with code {process.returncode}"
            try:
                health(root)
                break
            except OSError:
                assert time.monotonic() < deadline, "the teacher server did not come up within 180 s"
                time.sleep(0.2)
        yield root
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        if log:
            sink.close()
