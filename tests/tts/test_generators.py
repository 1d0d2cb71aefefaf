"""The loop on real generation backends: an OpenAI-compatible server (scripted answers with
token log-probabilities, so Tail-10 has confidences to rank) and a local tiny Qwen3."""

from __future__ import annotations

import json
import math
import threading
from collections import Counter

from tts_helpers import SURE, UNSURE, ScriptedServer, respond, subtask_of, write_problem

from cascade_rl.llm import LocalGenerator, OpenAICompatGenerator
from cascade_rl.tts.loop import TTSConfig, run_tts
from cascade_rl.tts.problem import load_problem, load_problems
from cascade_rl.tts.sampling import Sampling

RIGHT = "print(sum(map(int, input().split())))"
SAMPLE_ONLY = "print(3)"  # passes the sample (1 2 -> 3), fails every test


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_served_model_tail10_submits_the_most_confident_candidate(tmp_path, judge):
    problem = load_problem(write_problem(tmp_path / "p" / "a-plus-b"))

    asked, lock = Counter(), threading.Lock()

    def script(prompt, number):  # per subtask: three unsure wrong answers, then a sure right one
        with lock:
            asked[subtask_of(prompt)] += 1
            fourth = asked[subtask_of(prompt)] == 4
        return (respond(RIGHT), SURE) if fourth else (respond(SAMPLE_ONLY), UNSURE)

    with ScriptedServer(script, delay=0.05) as server:
        generator = OpenAICompatGenerator(server.base_url, "scripted", max_concurrency=2)
        config = TTSConfig(candidates=4, rounds=1, sampling=Sampling(max_tokens=64))
        (summary,) = run_tts([problem], generator, tmp_path / "out", config, judge=judge)
        generator.close()
    assert summary["score"] == 100.0 and summary["submissions"]["used"] == 1
    assert {(b["logprobs"], b["top_logprobs"], b["max_tokens"]) for b in server.bodies} == {(True, 20, 64)}
    assert server.bodies[0]["messages"][0]["content"].endswith(" /think")  # the mode flag
    made = rows(tmp_path / "out" / "a-plus-b" / "generations.jsonl")
    confidences = sorted(round(g["confidence"], 6) for g in made if g["subtask"] == 0)
    assert confidences == [round(-sum(UNSURE) / 3, 6)] * 3 + [round(-sum(SURE) / 3, 6)]  # DeepConf, k = 3
    step = rows(tmp_path / "out" / "a-plus-b" / "steps.jsonl")[0]
    assert step["kept"] == 4 and step["confidence"] == max(g["confidence"] for g in made if g["subtask"] == 0)


def test_loop_once_with_a_real_local_tiny_model(tmp_path, judge, tiny_checkpoint):
    generator = LocalGenerator(tiny_checkpoint, batch_size=2)
    config = TTSConfig(candidates=2, rounds=1, sampling=Sampling(max_tokens=24))
    (summary,) = run_tts(load_problems(["digit-sum"]), generator, tmp_path, config, judge=judge)
    made = rows(tmp_path / "digit-sum" / "generations.jsonl")
    assert summary["generations"]["used"] == len(made) == 4  # 2 candidates x 2 subtasks
    assert all(isinstance(g["confidence"], float) and math.isfinite(g["confidence"]) for g in made)
    assert len({g["text"] for g in made}) > 1  # sampled, not one repeated string
    steps = rows(tmp_path / "digit-sum" / "steps.jsonl")
    assert [(s["round"], s["subtask"]) for s in steps] == [(1, 0), (1, 1)]
    assert all(sum(s["dropped"].values()) + s["kept"] == 2 for s in steps)
    assert (tmp_path / "digit-sum" / "trajectory.png").is_file() and summary["rounds"] == 1
