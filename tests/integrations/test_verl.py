"""The verl reward function and `cascade data export --to verl`: routing on verl's own source names
and the project's domains, verl's answer conventions, the dataset's layout read back the way verl
reads it (`datasets`' parquet loader), and -- where an interpreter with verl is named by
CASCADE_VERL_PYTHON (verl and ray do not belong in the project's environment) -- verl's own naive
and batch reward managers scoring that dataset through the function loaded as verl loads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cascade_rl.integrations.verl import compute_score, compute_score_batch, reference_fields, verl_row
from cascade_rl.rewards.registry import REGISTRY

HERE = Path(__file__).parent
TACO_TESTS = json.dumps({"inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]})
ADD = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"


@pytest.mark.parametrize(
    "source, right, wrong, truth",
    [
        ("openai/gsm8k", "Natalia sold 48 + 24 = 72 clips.\n#### 72", "#### 71", "72"),
        ("openai/gsm8k", "<think>48+24</think>So \\boxed{72}.", "\\boxed{70}", "72"),
        ("lighteval/MATH", "The answer is $\\boxed{\\frac{1}{2}}$", "\\boxed{2}", "\\frac{1}{2}"),
        ("math_dapo", "Reasoning...\nAnswer: 34", "Answer: 35", "34"),
        ("aime2024", "so the count is\nAnswer: 204", "Answer: 25", "204"),
        ("numina_olympiads", "\\boxed{7}", "\\boxed{8}", "7"),
        ("math", "\\boxed{42}", "\\boxed{41}", "42"),
        ("taco", ADD, ADD.replace("a + b", "a * b"), TACO_TESTS),
        ("codeforces", ADD, "no code", TACO_TESTS),
        ("code", ADD, ADD.replace("+", "-"), TACO_TESTS),
        ("multiple_choice", "Answer: C", "Answer: B", "C"),
    ],
)
def test_verl_sources_and_project_domains_are_scored_by_the_projects_verifiers(source, right, wrong, truth):
    assert compute_score(source, right, truth) == {"score": 1.0, "masked": False}
    assert compute_score(source, wrong, truth, {"index": 0})["score"] < 1.0


def test_structured_ground_truth_and_the_prompt_from_extra_info():
    instructions = json.dumps({"instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{}]})
    assert compute_score("ifeval", "all lowercase here, as asked.", instructions)["score"] == 1.0
    calls = json.dumps([{"name": "get_weather", "arguments": {"city": "Paris"}}])
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    assert compute_score("tool_call", call, calls)["score"] == 1.0
    # the language check reads the prompt: an English prompt answered with Cyrillic is mixed
    assert compute_score("math", "\\boxed{4} четыре", "4", {"prompt": "What is 2 + 2?"})["score"] == -1.0
    assert reference_fields(REGISTRY["code"], TACO_TESTS) == {"tests": json.loads(TACO_TESTS)}


def test_no_verdict_and_unknown_sources_and_arguments_are_told_apart():
    # an instruction with no checker: the scorer raises, so there is no verdict (masked), not a 0
    unknown = json.dumps({"instruction_id_list": ["words:made_up"], "kwargs": [{}]})
    assert compute_score("ifeval", "anything", unknown) == {"score": 0.0, "masked": True}
    with pytest.raises(NotImplementedError, match="searchR1_nq"):
        compute_score("searchR1_nq", "x", "y")  # a verl source of no project domain, verl not installed here
    with pytest.raises(TypeError, match="unknown argument"):
        compute_score("math", "\\boxed{1}", "1", None, langauge_penalty=-1)
    assert compute_score("math", "\\boxed{1}", "1", None, sandbox_fusion_url=None)["score"] == 1.0  # verl's own
    options = {"math": {"language_penalty": -0.5}}
    assert compute_score("math", "\\boxed{4} четыре", "4", {"prompt": "2+2?"}, options=options)["score"] == -0.5


def test_the_batch_function_scores_every_domain_in_one_call():
    results = compute_score_batch(
        ["openai/gsm8k", "taco", "math", "taco"],
        ["#### 72", ADD, "\\boxed{3}", "print(1)"],
        ["72", TACO_TESTS, "4", TACO_TESTS],
        [{"index": 0}, {"index": 1}, None, {"index": 1}],
        workers=2,
    )
    assert [r["score"] for r in results] == [1.0, 1.0, 0.0, 0.0]


RL_ROWS = [
    {"prompt": [{"role": "user", "content": "What is 6 * 7?", "mode": "think"}], "domain": "math", "answer": "42"},
    {
        "prompt": "Greet me in lowercase.",
        "domain": "ifeval",
        "instruction_id_list": ["change_case:english_lowercase"],
        "kwargs": [{}],
        "id": 3,
    },
    {"prompt": "Add two numbers.", "domain": "code", "tests": json.loads(TACO_TESTS)},
    {"prompt": "Weather?", "domain": "tool_call", "expected_calls": [{"name": "w", "arguments": {"c": "P"}}]},
]
GOLD = [
    "<think>6*7</think>\\boxed{42}",
    "hello there, my dear friend, how are you today?",
    ADD,
    '<tool_call>\n{"name": "w", "arguments": {"c": "P"}}\n</tool_call>',
]
WRONG = ["\\boxed{41}", "Hello There.", "print(0)", '<tool_call>\n{"name": "w", "arguments": {"c": "R"}}\n</tool_call>']


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("verl")
    source = folder / "rl.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in [*RL_ROWS, {"prompt": "x", "domain": "astrology"}]))
    target = folder / "train.parquet"
    command = [sys.executable, "-m", "cascade_rl.cli", "data", "export", str(source), "--to", "verl", "-o", str(target)]
    refused = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and f"{source}:5: domain 'astrology'" in refused.stderr
    done = subprocess.run([*command, "--skip-malformed"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "skipped: domain 'astrology' is not a registered reward domain" in done.stdout
    return target


def test_the_export_is_verls_layout_and_its_rows_score_their_gold_answers(exported):
    import datasets

    rows = list(datasets.load_dataset("parquet", data_files=str(exported))["train"])  # as verl's RLHFDataset
    assert [r["data_source"] for r in rows] == ["math", "ifeval", "code", "tool_call"]
    first = rows[0]
    assert first["prompt"] == [{"role": "user", "content": "What is 6 * 7? /think"}] and first["ability"] == "math"
    assert first["reward_model"] == {"style": "rule", "ground_truth": "42"}
    assert first["extra_info"] == {"split": "train", "index": 0, "prompt": "What is 6 * 7?", "id": None}
    assert rows[1]["extra_info"]["id"] == "3"
    for row, gold, wrong in zip(rows, GOLD, WRONG):
        args = (row["data_source"], row["reward_model"]["ground_truth"])
        assert compute_score(args[0], gold, args[1], row["extra_info"])["score"] == 1.0, row["data_source"]
        assert compute_score(args[0], wrong, args[1], row["extra_info"])["score"] < 1.0, row["data_source"]
    with pytest.raises(ValueError, match="needs field"):
        verl_row({"prompt": "x", "domain": "math"}, 0)


@pytest.mark.skipif(not os.environ.get("CASCADE_VERL_PYTHON"), reason="no interpreter with verl (CASCADE_VERL_PYTHON)")
def test_verls_own_reward_managers_score_the_export(exported, tmp_path):
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps([GOLD[0], WRONG[1], GOLD[2], GOLD[3]]))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE.parents[1] / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    script = [os.environ["CASCADE_VERL_PYTHON"], str(HERE / "verl_manager_check.py")]
    result = subprocess.run(
        [*script, str(exported), str(responses), str(tmp_path)], capture_output=True, text=True, timeout=600, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["naive"] == [1.0, 0.0, 1.0, 1.0] and out["batch"] == [1.0, 0.0, 1.0, 1.0]
    assert out["naive_masked"] == [False] * 4


def test_the_documented_examples_score_as_docs_integrations_says():
    assert compute_score("openai/gsm8k", "48 + 24 = 72\n#### 72", "72") == {"score": 1.0, "masked": False}
    assert compute_score("math", "<think>6*7</think>\\boxed{42}", "42") == {"score": 1.0, "masked": False}
