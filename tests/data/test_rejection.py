"""`cascade data rejection-sample`: SFT rows from a model's own responses that the row's verifier
accepts (the real IF and math scorers), the first accepted first, prompts without one dropped
and counted; and the SFT formats of the real files (GSM8K, MBPP) whose references pass their
own verifiers."""

from __future__ import annotations

import json
from pathlib import Path

from cascade_rl.data.formats import FORMATS
from cascade_rl.data.loading import rl_normaliser
from cascade_rl.data.rejection import rejection_sample
from cascade_rl.llm.base import Sampling
from cascade_rl.rewards.registry import score_samples

NO_COMMA = {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}
FEW_WORDS = {
    "instruction_id_list": ["length_constraints:number_words"],
    "kwargs": [{"relation": "less than", "num_words": 10}],
}


class Scripted:
    """Answers a prompt with the responses scripted for a word in it, cycled to n."""

    def __init__(self, script: dict[str, list[str]]):
        self.script = script

    def generate(self, messages, sampling=Sampling()):
        n = sampling.n
        lines = next(v for k, v in self.script.items() if k in messages[-1]["content"])
        return [lines[i % len(lines)] for i in range(n)]


def write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_accepted_responses_become_sft_rows_and_prompts_without_one_are_counted(tmp_path):
    rows = [
        {"prompt": "Describe the sea.", "domain": "ifeval", **NO_COMMA},
        {"prompt": "Describe the sky.", "domain": "ifeval", **NO_COMMA},
        {"prompt": "What is 2 plus 2?", "domain": "math", "answer": "4"},
    ]
    generator = Scripted(
        {
            "sea": ["Blue, wide.", "Blue and wide.", "Deep and calm."],  # the 2nd and 3rd pass
            "sky": ["High, blue.", "Grey, low."],  # none passes
            "2 plus 2": ["\\boxed{5}", "\\boxed{4}"],
        }
    )
    out = tmp_path / "sft.jsonl"
    summary = rejection_sample([write(tmp_path / "rl.jsonl", rows)], out, generator, k=3, keep=2, workers=1)
    kept = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["messages"][-1]["content"] for row in kept] == ["Blue and wide.", "Deep and calm.", "\\boxed{4}"]
    assert kept[0]["messages"][0] == {"role": "user", "content": "Describe the sea."}
    assert kept[0]["domain"] == "ifeval" and kept[0]["instruction_id_list"] == ["punctuation:no_comma"]
    assert kept[2]["answer"] == "4" and kept[2]["reward"] == 1.0
    assert summary.kept == 2 and dict(summary.dropped) == {"none of 3 accepted": 1}


def sft_rows(fmt: str, path: Path, **options) -> list[dict]:
    rows = []
    for line in path.read_text().splitlines()[:40]:
        row = FORMATS[fmt].convert(json.loads(line), **options)
        if isinstance(row, dict):
            rows.append(row)
    return rows


def test_sft_formats_of_gsm8k_and_mbpp_pass_their_own_verifiers(tmp_path):
    gsm8k = [
        {
            "question": "Tom has 3 apples and buys 4,000 more. How many?",
            "answer": "3 + 4000 = <<3+4000=4003>>4003\n#### 4,003",
        }
    ]
    mbpp = [
        {"task_id": 601, "text": "Write a function to add two numbers.", "code": "def add(a, b):\r\n    return a + b",
         "test_list": ["assert add(1, 2) == 3", "assert add(2, 2) == 4"], "test_setup_code": ""},
        {"task_id": 11, "text": "In the test split.", "code": "x = 1", "test_list": ["assert x == 1"]},
    ]  # fmt: skip
    math_rows = sft_rows("gsm8k-sft", write(tmp_path / "gsm8k.jsonl", gsm8k))
    code_rows = sft_rows("mbpp-sft", write(tmp_path / "mbpp.jsonl", mbpp))
    assert len(code_rows) == 1  # task 11 is MBPP's test split: never an SFT row
    assert math_rows[0]["messages"][1]["content"].endswith("The answer is $\\boxed{4003}$.")
    assert "<<" not in math_rows[0]["messages"][1]["content"]
    assert code_rows[0]["messages"][1]["content"] == "```python\ndef add(a, b):\n    return a + b\n```"
    rows = math_rows + code_rows
    responses = [[row["messages"][1]["content"]] for row in rows]
    as_rl = rl_normaliser(None)
    references = [
        as_rl({k: v for k, v in row.items() if k != "messages"} | {"prompt": row["messages"][:1]}) for row in rows
    ]
    scores = score_samples(references, responses, {"math": {}, "code": {}}, workers=1)
    assert [group[0].reward for group in scores] == [1.0, 1.0]


def test_the_command_samples_a_local_model_and_writes_the_accepted_rows(tmp_path):
    import sys

    from typer.testing import CliRunner

    from cascade_rl.chat import IM_END
    from cascade_rl.cli import app

    sys.path.insert(0, str(Path(__file__).parents[1] / "llm"))
    from llm_helpers import SURE, build_chain_model

    words = ["Sure", ",", " here", " it", " is"]
    chain = {"\n": {words[0]: SURE}, **{a: {b: SURE} for a, b in zip(words, words[1:])}, words[-1]: {IM_END: SURE}}
    model = build_chain_model(tmp_path / "model", chain, tuple(w for w in words if len(w) > 1))
    rows = [
        {"prompt": "Reply briefly.", "domain": "ifeval", **NO_COMMA},
        {"prompt": "Reply in few words.", "domain": "ifeval", **FEW_WORDS},
    ]
    out = tmp_path / "sft.jsonl"
    arguments = ["data", "rejection-sample", str(write(tmp_path / "rl.jsonl", rows)), "--output", str(out), "--model",
                 str(model), "-k", "2", "--max-tokens", "12", "--temperature", "0", "--workers", "1"]  # fmt: skip
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 0, result.output
    kept = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["messages"][0]["content"] for row in kept] == ["Reply in few words."]
    assert kept[0]["messages"][1]["content"] == "Sure, here it is"
