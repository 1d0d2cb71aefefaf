"""Fixtures of the generation-backend tests: tiny chain models saved to temporary directories
and a real ``transformers serve`` process on loopback (see llm_helpers.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from llm_helpers import CHAT_CHAIN, JUDGE_CHAIN, JUDGE_TOKENS, build_chain_model, free_port, wait_for_http


@pytest.fixture(scope="session")
def chat_model_path(tmp_path_factory) -> Path:
    return build_chain_model(tmp_path_factory.mktemp("chat-model"), CHAT_CHAIN)


@pytest.fixture(scope="session")
def judge_model_path(tmp_path_factory) -> Path:
    return build_chain_model(tmp_path_factory.mktemp("judge-model"), JUDGE_CHAIN, JUDGE_TOKENS)


@pytest.fixture(scope="session")
def transformers_server(tmp_path_factory) -> Iterator[str]:
    """A real ``transformers serve`` on loopback (offline, CPU); yields its ``/v1`` base URL.
    Models are loaded on demand from the local path named in each request's ``model``."""
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    # transformers 5.19's GET /v1/models scans the hub cache and fails with HTTP 500 when it does not exist
    cache = tmp_path_factory.mktemp("hub-cache")
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS="1",
        HF_HUB_CACHE=str(cache),
    )
    cli = Path(sys.executable).with_name("transformers")
    with open(log, "w") as log_file:
        process = subprocess.Popen(
            [
                str(cli),
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--device",
                "cpu",
                "--log-level",
                "warning",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/health", process)
        yield f"http://127.0.0.1:{port}/v1"
    except Exception:
        print(log.read_text()[-4000:])
        raise
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
