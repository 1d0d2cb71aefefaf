"""`cascade data offtopic` (SPEC 4, appendix C.1): rewrite, YES/NO judge, strong model answers the
rewrite (rejected), weak model answers the original (chosen); with scripted models at the
Generator boundary, real local checkpoints, and a real `transformers serve` on loopback behind a
proxy that records every request and the requests in flight."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

from typer.testing import CliRunner

from cascade_rl.chat import IM_END
from cascade_rl.cli import app
from cascade_rl.data.offtopic import JUDGE_TEMPLATE, REWRITE_TEMPLATE, OfftopicModels, clean_rewrite, offtopic_pairs
from cascade_rl.llm.base import Sampling

LLM_TESTS = Path(__file__).parents[1] / "llm"
sys.path.insert(0, str(LLM_TESTS))
from llm_helpers import CHAT_CHAIN, SURE, ProxyServer, build_chain_model  # noqa: E402

_spec = importlib.util.spec_from_file_location("llm_conftest", LLM_TESTS / "conftest.py")
_llm_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_llm_conftest)
transformers_server = _llm_conftest.transformers_server  # the real `transformers serve` fixture

#: a judge that answers "NO" (the instructions differ) with probability 19/20
DIFFERENT_JUDGE = {"\n": {"Y": SURE, "N": SURE + math.log(19.0)}, "Y": {"E": SURE}, "E": {"S": SURE}}
DIFFERENT_JUDGE |= {"S": {IM_END: SURE}, "N": {"O": SURE}, "O": {IM_END: SURE}}


class ScriptedModel:
    def __init__(self, answer):
        self.answer, self.prompts = answer, []

    def generate(self, messages, sampling=Sampling()):
        n = sampling.n
        self.prompts.append(messages[-1]["content"])
        return [self.answer(messages[-1]["content"])] * n


class ScriptedJudge:
    backend = None

    def __init__(self, same: set[str]):
        self.same, self.asked = same, []

    def probability_yes(self, messages):
        text = messages[-1]["content"]
        self.asked.append(text)
        return 0.9 if any(s in text for s in self.same) else 0.1


def write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_pipeline_builds_pairs_and_drops_what_the_judge_calls_the_same(tmp_path):
    rewriter = ScriptedModel(
        lambda p: (
            "Generated input: Name the capital of Italy."
            if "France" in p
            else ("<think>hmm" if "unfinished" in p else "Describe a cat's sleeping habits.")
        )
    )
    strong = ScriptedModel(lambda p: "<think>easy</think>Rome is the capital of Italy.")
    weak = ScriptedModel(lambda p: "Paris." if "France" in p else "Cats purr.")
    judge = ScriptedJudge(same={"cat"})
    rows = [
        {"prompt": "What is the capital of France?"},
        {"messages": [{"role": "user", "content": "Why do cats purr?"}, {"role": "assistant", "content": "x"}]},
        {"question": "unfinished rewrite please"},
    ]
    output = tmp_path / "pairs.jsonl"
    models = OfftopicModels(strong, weak, judge, rewriter, {"all": "scripted"})
    summary = offtopic_pairs([write(tmp_path / "in.jsonl", rows)], output, models, progress=False)
    pairs = [json.loads(line) for line in output.read_text().splitlines()]
    assert pairs == [
        {
            "prompt": [{"role": "user", "content": "What is the capital of France?"}],
            "chosen": [{"role": "assistant", "content": "Paris."}],
            "rejected": [{"role": "assistant", "content": "Rome is the capital of Italy."}],
            "rewritten_prompt": "Name the capital of Italy.",
            "judge_p_same": 0.1,
            "source": "offtopic",
        }
    ]
    assert summary.dropped == {"judge: the rewrite asks the same thing": 1, "no usable rewrite": 1}
    assert rewriter.prompts[0] == REWRITE_TEMPLATE.format(instruction="What is the capital of France?")
    assert judge.asked[0] == JUDGE_TEMPLATE.format(a="What is the capital of France?", b="Name the capital of Italy.")
    assert strong.prompts == ["Name the capital of Italy."] and weak.prompts == ["What is the capital of France?"]
    from cascade_rl.data.loading import normalise_preference

    assert normalise_preference(pairs[0])["chosen"] == pairs[0]["chosen"]  # loads as reward-model data


def test_clean_rewrite():
    assert clean_rewrite('**Generated input:** "Name a river."') == "Name a river."
    assert clean_rewrite("<think>plan</think>Name a lake.") == "Name a lake."
    assert clean_rewrite("<think>never done") == ""


def test_cli_with_local_checkpoints(tmp_path):
    chat = build_chain_model(tmp_path / "chat", CHAT_CHAIN)
    judge = build_chain_model(tmp_path / "judge", DIFFERENT_JUDGE)
    output = tmp_path / "pairs.jsonl"
    source = write(tmp_path / "in.jsonl", [{"prompt": "Say something."}, {"prompt": "  "}])
    args = ["data", "offtopic", str(source), "-o", str(output), "--strong", str(chat), "--weak", str(chat)]
    args += ["--judge", str(judge), "--max-tokens", "8", "-q"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "in.jsonl:2: no user prompt" in result.output  # before any model loads
    result = CliRunner().invoke(app, [*args, "--skip-malformed"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    pair = json.loads(output.read_text())
    assert pair["rewritten_prompt"] == "ok" and pair["rejected"] == [{"role": "assistant", "content": "ok"}]
    assert abs(pair["judge_p_same"] - 0.05) < 1e-3  # P(YES) read from the local judge's logits


def test_cli_through_an_openai_compatible_server(tmp_path, transformers_server):
    chat = build_chain_model(tmp_path / "chat", CHAT_CHAIN)
    judge = build_chain_model(tmp_path / "judge", DIFFERENT_JUDGE)
    rows = [{"prompt": f"Tell me about topic {i}."} for i in range(3)]
    output = tmp_path / "pairs.jsonl"
    with ProxyServer(transformers_server) as proxy:
        args = ["data", "offtopic", str(write(tmp_path / "in.jsonl", rows)), "-o", str(output), "-q"]
        args += ["--strong", f"{proxy.base_url}#{chat}", "--weak", f"{proxy.base_url}#{chat}"]
        args += ["--judge", f"{proxy.base_url}#{judge}", "--max-tokens", "8", "--concurrency", "2"]
        result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
        bodies = list(proxy.bodies)
        most = proxy.max_in_flight
    assert result.exit_code == 0, result.output
    pairs = [json.loads(line) for line in output.read_text().splitlines()]
    assert [p["prompt"][0]["content"] for p in pairs] == [r["prompt"] for r in rows]
    assert all(p["judge_p_same"] < 0.5 for p in pairs)
    # transformers serve refuses vLLM's skip_special_tokens: those first requests were asked again without it
    answered = [body for body in bodies if "skip_special_tokens" not in body]
    texts = [body["messages"][-1]["content"] for body in answered]
    assert sum("Given input: Tell me about topic 0." in t for t in texts) == 1
    assert any(t.startswith("There are two instructions") and "Instruction B: ok" in t for t in texts)
    assert all(t.endswith(" /no_think") for t in texts)
    assert 1 <= most <= 2
