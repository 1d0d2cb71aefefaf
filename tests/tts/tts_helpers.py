"""Helpers of the test-time-scaling tests: the shipped reference solutions, problem files
written on the fly, a scripted generator at the ``Generator`` protocol boundary, and a real
loopback HTTP server speaking the OpenAI chat-completions API with scripted answers (and
token log-probabilities), so that ``cascade tts`` runs end to end against a served "model"."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

from cascade_rl.llm.base import Sampling
from cascade_rl.tts.problem import SHIPPED_DIR


def solution(problem_id: str, name: str) -> str:
    return (SHIPPED_DIR / problem_id / "solutions" / f"{name}.py").read_text()


def respond(code: str) -> str:
    """A thinking response whose answer is ``code`` in a python block (appendix C.3's format)."""
    return f"<think>Let me think about the constraints.</think>\nHere is my solution.\n```python\n{code}\n```\n"


def write_problem(directory: Path, **fields) -> Path:
    """A problem.yaml (plus statement and checker files) from keyword fields; defaults make
    a valid two-subtask A+B problem with inline tests."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "statement.md").write_text("Read two integers a and b and print a + b.\n")
    spec = {
        "id": directory.name,
        "statement": "statement.md",
        "time_limit_s": 1.0,
        "memory_mb": 256,
        "samples": [{"input": "1 2\n", "output": "3\n"}],
        "subtasks": [
            {"points": 40, "constraints": "0 <= a, b <= 10", "tests": [{"input": "2 3\n", "output": "5\n"}]},
            {"points": 60, "constraints": "|a|, |b| <= 10^18", "tests": [{"input": "-7 11\n", "output": "4\n"}]},
        ],
    }
    checker = fields.pop("checker_source", None)
    if checker is not None:
        (directory / "checker.py").write_text(checker)
        spec["checker"] = "checker.py"
    spec.update(fields)
    spec = {key: value for key, value in spec.items() if value is not None}
    (directory / "problem.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return directory / "problem.yaml"


def subtask_of(prompt: str) -> str:
    """The subtask a prompt targets ("You are solving: Subtask 2 ...")."""
    return prompt.split("You are solving: Subtask ", 1)[1].split(" ", 1)[0]


class ScriptedGenerator:
    """``generate`` / ``agenerate`` of :class:`cascade_rl.llm.Generator`, answering each prompt
    with ``script(prompt)``; records every prompt it was asked."""

    def __init__(self, script: Callable[[str], str]):
        self.script = script
        self.prompts: list[str] = []
        self.lock = threading.Lock()

    def generate(self, messages, sampling=Sampling()):
        with self.lock:
            self.prompts.extend([messages[-1]["content"]] * sampling.n)
        return [self.script(messages[-1]["content"]) for _ in range(sampling.n)]

    async def agenerate(self, messages, sampling=Sampling()):
        return self.generate(messages, sampling)


#: (prompt, request number) -> (answer, the top log-probabilities at every token of it)
Script = Callable[[str, int], tuple[str, list[float]]]
SURE = [-0.01, -6.0, -8.0]  # a peaked next-token distribution
UNSURE = [-1.0, -1.2, -1.5]  # a flat one


class ScriptedServer(ThreadingHTTPServer):
    """A loopback OpenAI-compatible chat-completions server: ``script(prompt, number)`` gives
    the answer and the top log-probabilities at each of its tokens (the first is the chosen
    token's), returned when the request asks for ``logprobs``. Each answer waits ``delay``
    seconds; ``completed`` counts the answers sent."""

    daemon_threads = True

    def __init__(self, script: Script, delay: float = 0.0):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script, self.delay = script, delay
        self.completed = self.in_flight = self.max_in_flight = 0
        self.bodies: list[dict] = []
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> ScriptedServer:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: ScriptedServer

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            number = len(self.server.bodies)
            self.server.bodies.append(body)
            self.server.in_flight += 1
            self.server.max_in_flight = max(self.server.max_in_flight, self.server.in_flight)
        text, top = self.server.script(body["messages"][-1]["content"], number)
        time.sleep(self.server.delay)
        with self.server.lock:
            self.server.in_flight -= 1
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        if body.get("logprobs"):
            alternatives = [{"token": "t", "logprob": value} for value in top[: body.get("top_logprobs") or 1]]
            choice["logprobs"] = {
                "content": [{"token": word, "logprob": top[0], "top_logprobs": alternatives} for word in text.split()]
            }
        payload = json.dumps({"id": f"c{number}", "object": "chat.completion", "choices": [choice]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        with self.server.lock:
            self.server.completed += 1
