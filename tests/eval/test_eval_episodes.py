"""Benchmarks of multi-turn domains: each sample an episode played to its end and scored by its
environment, on a local checkpoint's token ids (the trainer's loop: tests/episode_assets.py's
tool-calling model) and through any generator's messages; the calls written beside each sample
re-judge to the same reward offline; an interrupted evaluation resumes from its progress file;
a benchmark mixing multi-turn and single-turn domains is refused."""

import json
import random

import pytest
from episode_assets import build_caller, caller_rows

from cascade_rl.eval.benchmarks import evaluate
from cascade_rl.llm.base import Sampling
from cascade_rl.llm.local import LocalGenerator
from cascade_rl.recipe import Benchmark
from cascade_rl.rewards.workplace.scorer import score
from cascade_rl.world import office


def write(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def samples_of(out_dir, name):
    return [json.loads(line) for line in (out_dir / "eval-samples" / f"{name}.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def caller(tmp_path_factory):
    return build_caller(tmp_path_factory.mktemp("caller") / "model")


def test_a_local_model_plays_each_sample_as_an_episode_and_its_calls_rejudge_offline(caller, tmp_path):
    rows = caller_rows(6, seed=4)
    data = write(tmp_path / "bench.jsonl", rows)
    bench = Benchmark(name="calls", data=str(data), k=3, max_new_tokens=1500, max_turns=2, temperature=1.0,
                      top_p=1.0, mode="no_think")  # fmt: skip
    result = evaluate(caller, [bench], tmp_path / "out")["calls"]
    samples = samples_of(tmp_path / "out", "calls")
    assert len(samples) == 18 and result["prompts"] == 6
    for sample in samples:
        assert sample["details"]["turns"] == 2 and sample["details"]["end"] == "step budget"
        assert "<tool_response>" in sample["response"]  # the transcript holds what the model read
        row = rows[sample["prompt_index"]]
        offline = score(calls=sample["calls"], ground_truth=row["ground_truth"], database=row["database"])
        assert sample["reward"] == offline.reward
    passed = sum(sample["reward"] for sample in samples)
    assert result["value"] == pytest.approx(100 * passed / 18) and 0 < passed < 18  # two even draws per episode


def test_an_interrupted_evaluation_resumes_without_playing_the_finished_prompts(caller, tmp_path, monkeypatch):
    data = write(tmp_path / "bench.jsonl", caller_rows(4))
    bench = Benchmark(name="calls", data=str(data), k=2, max_new_tokens=1500, max_turns=2, mode="no_think")
    first = evaluate(caller, [bench], tmp_path / "out")
    progress = tmp_path / "out" / "eval-samples" / "calls.progress.jsonl"
    lines = progress.read_text().splitlines()
    progress.write_text("\n".join(lines[:2]) + "\n")  # killed after two prompts
    played = []
    original = LocalGenerator.sample_ids

    def counted(self, prompt_ids, max_tokens, sampling):
        played.append(len(prompt_ids))
        return original(self, prompt_ids, max_tokens, sampling)

    monkeypatch.setattr(LocalGenerator, "sample_ids", counted)
    again = evaluate(caller, [bench], tmp_path / "out")
    assert played and played[0] == 2 * 2  # only the two missing prompts, k episodes each
    assert len(samples_of(tmp_path / "out", "calls")) == 8
    assert set(again["calls"]) == set(first["calls"])


class Office:
    """A generator that plays the toy office: each task's reference calls, one per turn, then its answer."""

    def __init__(self, tasks):
        self.replies = {task.request: [self.call(n, a) for n, a in task.calls] + [task.answer] for task in tasks}
        self.requests: list[Sampling] = []

    @staticmethod
    def call(name, arguments):
        return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"

    def generate(self, messages, sampling=Sampling()):
        self.requests.append(sampling)
        request = next(m["content"] for m in messages if m["role"] == "user").removesuffix(" /no_think")
        return [self.replies[request][sum(m["role"] == "tool" for m in messages)]]

    async def agenerate(self, messages, sampling=Sampling()):
        return self.generate(messages, sampling)


def test_a_served_model_plays_on_messages_one_request_per_turn(tmp_path):
    rng = random.Random(7)
    tasks = [office.office_task(rng) for _ in range(4)]
    data = write(tmp_path / "bench.jsonl", [office.rl_row(task, f"t{i}") for i, task in enumerate(tasks)])
    bench = Benchmark(name="toy-workplace", data=str(data), k=2, max_new_tokens=256, max_turn_tokens=96,
                      mode="no_think")  # fmt: skip
    generator = Office(tasks)
    result = evaluate(generator, [bench], tmp_path / "out")["toy-workplace"]
    assert result["value"] == 100.0
    assert len(generator.requests) == 4 * 2 * 3 and {s.max_tokens for s in generator.requests} == {96}
    sample = samples_of(tmp_path / "out", "toy-workplace")[0]
    assert sample["details"]["turns"] == 3 and len(sample["calls"]) == 2
    assert sample["response"].count("<tool_response>") == 2


def test_a_benchmark_mixing_multi_turn_and_single_turn_rows_is_refused(tmp_path):
    rows = [*caller_rows(1), {"prompt": "2+2?", "domain": "mcqa", "options": [{"A": "4"}], "expected_answer": "A"}]
    bench = Benchmark(name="mixed", data=str(write(tmp_path / "mixed.jsonl", rows)), k=1)
    with pytest.raises(ValueError, match="mixed: mixes multi-turn and single-turn"):
        evaluate(Office([]), [bench], tmp_path / "out")
