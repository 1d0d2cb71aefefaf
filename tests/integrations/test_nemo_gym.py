"""`cascade serve verifiers`: a real server process speaking NeMo Gym's resources-server protocol.
NeMo Gym itself does not install here (it needs Python >= 3.12; this machine has 3.11), so the
requests and answers follow its published shapes: a verify request is the task row plus the
policy's Responses API ``response``; the answer is the request with ``reward``, ``mask_sample``
and ``failure_reason`` (``nemo_gym/base_resources_server.py``), ``instance_config.mask_sample``
as NeMo RL reads it. NVIDIA's rows are the samples of `cascade data convert -f nemo-gym`."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cascade_rl.integrations.nemo_gym import response_text

TESTS = Path(__file__).resolve().parents[1]
SAMPLES = TESTS / "data" / "samples"
sys.path.insert(0, str(TESTS / "llm"))
from llm_helpers import free_port, wait_for_http  # noqa: E402


def sample(name: str) -> dict:
    return json.loads((SAMPLES / f"nemo_gym_{name}.jsonl").read_text().splitlines()[0])


def message(text: str, reasoning: str | None = None, calls=()) -> dict:
    """A Responses API object as NeMo Gym's agents send it."""
    output = []
    if reasoning is not None:
        output.append({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": reasoning}]})
    output.append(
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
    )
    for name, arguments in calls:
        output.append({"type": "function_call", "call_id": "c1", "name": name, "arguments": json.dumps(arguments)})
    return {"id": "resp_1", "object": "response", "created_at": 0, "model": "policy", "output": output}


@contextlib.contextmanager
def process(command: list[str], health: str):
    started = subprocess.Popen(command, env={**os.environ, "COLUMNS": "200"}, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_http(health, started, timeout=120)
        yield
    finally:
        started.terminate()
        try:
            started.wait(timeout=15)
        except subprocess.TimeoutExpired:  # a verification thread still waiting on a hanging judge
            started.kill()
            started.wait(timeout=15)


@pytest.fixture(scope="module")
def judge():
    port = free_port()
    with process(
        [sys.executable, str(TESTS / "rewards" / "genrm_judge.py"), str(port)], f"http://127.0.0.1:{port}/stats"
    ):
        yield f"http://127.0.0.1:{port}/v1"


@pytest.fixture(scope="module")
def server(judge):
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "cascade_rl.cli",
        "serve",
        "verifiers",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    command += ["--option", f"genrm.judge={judge}#judge", "--group-size", "3", "--timeout", "20", "--concurrency", "4"]
    with process(command, f"http://127.0.0.1:{port}/health"):
        yield f"http://127.0.0.1:{port}"


def post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def verify(server: str, row: dict, response: dict) -> dict:
    status, answer = post(f"{server}/verify", {**row, "response": response})
    assert status == 200, answer
    return answer


def test_nvidia_rows_are_routed_by_their_fields_and_answered_in_nemo_gyms_shape(server):
    math = sample("math")
    right = verify(server, math, message("The sum is \\boxed{100}.", reasoning="1+3+...+19"))
    wrong = verify(server, math, message("\\boxed{99}"))
    assert (right["reward"], wrong["reward"]) == (1.0, 0.0) and right["domain"] == "math"
    # the request comes back whole, with the verdict and NeMo Gym's failure fields
    assert right["responses_create_params"] == math["responses_create_params"] and right["source"] == math["source"]
    assert right["response"]["output"][0]["type"] == "reasoning"
    assert right["mask_sample"] is False and right["failure_reason"] is None
    assert right["instance_config"] == {"mask_sample": False}

    ifeval = sample("instruction_following")
    assert (
        verify(
            server,
            ifeval,
            message("the sun rises slowly over the quiet hills, and the sky turns a soft shade of gold."),
        )["reward"]
        == 1.0
    )
    assert (
        verify(
            server,
            ifeval,
            message("The sun rises slowly over the quiet hills, and the sky turns a soft shade of gold."),
        )["reward"]
        == 0.0
    )

    code = sample("competitive_coding")
    solution = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    assert verify(server, code, message(solution))["reward"] == 1.0
    assert verify(server, code, message(solution.replace("a + b", "a - b")))["reward"] == 0.0


def test_a_row_in_the_projects_layout_and_tool_calls_from_function_call_items(server):
    row = {
        "domain": "tool_call",
        "responses_create_params": {"input": [{"role": "user", "content": "Weather in Paris?"}]},
        "expected_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
    }
    good = verify(server, row, message("", calls=[("get_weather", {"city": "Paris"})]))
    bad = verify(server, row, message("", calls=[("get_weather", {"city": "Rome"})]))
    assert (good["reward"], bad["reward"], good["domain"]) == (1.0, 0.0, "tool_call")


def test_a_row_without_verifier_fields_is_refused_naming_them(server):
    status, answer = post(f"{server}/verify", {"responses_create_params": {"input": "hi"}, "response": message("x")})
    assert status == 422 and "expected_answer" in answer["detail"]
    status, answer = post(f"{server}/verify", {**sample("math"), "response": {"output": "not a list"}})
    assert status == 422 and "Responses API object" in answer["detail"]
    status, answer = post(f"{server}/seed_session", {})
    assert (status, answer) == (200, {})


def genrm_row(task: int) -> dict:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": f"Write a haiku ({task})."}]},
        "domain": "genrm",
        "_ng_task_index": task,
    }


def test_a_genrm_group_waits_for_its_rollouts_and_a_failing_judge_masks_the_sample(server):
    texts = ["quality=5", "quality=2", "quality=1"]
    with ThreadPoolExecutor(6) as pool:
        first = pool.map(lambda text: verify(server, genrm_row(1), message(text)), texts)
        second = pool.map(lambda text: verify(server, genrm_row(2), message(text + " FAIL")), texts)
        first, second = list(first), list(second)
    # circular over the three: (0,1) 5 vs 2, (1,2) 2 vs 1, (2,0) 1 vs 5
    assert [a["reward"] for a in first] == [5.0, 2.0, 1.0] and not any(a["mask_sample"] for a in first)
    assert all(a["mask_sample"] and a["reward"] == 0.0 for a in second)
    assert all("judge failed" in a["failure_reason"] and a["instance_config"]["mask_sample"] for a in second)


def test_a_verification_past_the_timeout_is_masked(judge):
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "cascade_rl.cli",
        "serve",
        "verifiers",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    command += ["--option", f"genrm.judge={judge}#judge", "--group-size", "2", "--timeout", "1"]
    with process(command, f"http://127.0.0.1:{port}/health"):
        url = f"http://127.0.0.1:{port}"
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda text: verify(url, genrm_row(7), message(text)), ["HANG a", "HANG b"]))
    assert all(a["mask_sample"] and "timed out" in a["failure_reason"] for a in answers)


def test_responses_api_objects_become_the_projects_text():
    assert response_text(message("4", reasoning="2+2")) == "<think>2+2</think>4"
    assert response_text(message("ok")) == "ok"
    called = response_text(message("", calls=[("f", {"x": 1})]))
    assert called == '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>'


def test_the_documented_example_answers_as_docs_integrations_says(server):
    body = json.loads((TESTS.parent / "examples" / "nemo-gym-verify.json").read_text())
    answer = verify(server, {k: v for k, v in body.items() if k != "response"}, body["response"])
    assert (answer["domain"], answer["reward"], answer["mask_sample"]) == ("math", 1.0, False)
    assert "# math 1.0 False" in (TESTS.parent / "docs" / "integrations.md").read_text()
