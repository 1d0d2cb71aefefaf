"""`cascade data convert`: every public format of tests/data/samples/ converts to rows the stages
load, the converted references score their gold answers 1, and bad rows are named by file and
line; LiveCodeBench's compressed private tests decode as plain data only."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cascade_rl.cli import app
from cascade_rl.data.convert import decode_private_tests
from cascade_rl.data.loading import load_sources, normalise_preference, normalise_sft, rl_normaliser
from cascade_rl.data.rows import RowError
from cascade_rl.recipe import DataSource
from cascade_rl.rewards.registry import get_domain, score_batch

SAMPLES = Path(__file__).parent / "samples"


def convert(tmp_path, sample, fmt, *options):
    output = tmp_path / f"{Path(sample).stem}.{fmt}.jsonl"
    result = CliRunner().invoke(
        app, ["data", "convert", str(SAMPLES / sample), "-f", fmt, "-o", str(output), "-q", *options]
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    return rows, json.loads(output.with_name(output.name + ".summary.json").read_text())["summary"], output


def load_rl(path):
    rows, report = load_sources([DataSource(path=str(path))], rl_normaliser(None))
    assert not report.skipped, report.summary()
    return rows


def scores(rows, responses):
    domain = get_domain(rows[0]["domain"])
    requests = [{**row["reference"], "response": r, "prompt": ""} for row, r in zip(rows, responses)]
    return [s.reward for s in score_batch(domain, requests, None, workers=2)]


RL_SAMPLES = [
    ("nemo_gym_math.jsonl", "nemo-gym", ["\\boxed{100}", "\\boxed{2}", "\\boxed{56}"]),
    ("aime2024.jsonl", "aime", ["\\boxed{14}", "\\boxed{1}"]),
    ("aime2025.jsonl", "aime", ["<think>1+2+3+4+6+12</think>\\boxed{28}"]),
    ("mmlu.jsonl", "mcq", ["Answer: B", "The answer is C"]),
    ("mmlu_pro.jsonl", "mcq", ["\\boxed{D}"]),
    (
        "nemo_gym_instruction_following.jsonl",
        "nemo-gym",
        ["the sun climbs slowly over the quiet hills.", '"Rain taps the window / soft grey hours / puddles hold sky"'],
    ),
    ("ifbench.jsonl", "ifbench", ["The sea is calm today."]),
    (
        "nemo_gym_competitive_coding.jsonl",
        "nemo-gym",
        [
            "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
            "```python\ninput()\nprint(max(map(int, input().split())))\n```",
        ],
    ),
    (
        "livecodebench.jsonl",
        "livecodebench",
        [
            "```python\nprint(2 * int(input()))\n```",
            "```python\nclass Solution:\n    def addTwo(self, a, b):\n        return a + b\n```",
        ],
    ),
    (
        "taco.jsonl",
        "taco",
        [
            "```python\nprint(sum(c in 'aeiou' for c in input()))\n```",
            "```python\ndef square(n):\n    return n * n\n```",
        ],
    ),
    ("apps.jsonl", "apps", ["```python\na, b = map(int, input().split())\nprint(a * b)\n```"]),
]


@pytest.mark.parametrize(("sample", "fmt", "gold"), RL_SAMPLES, ids=[s[0] for s in RL_SAMPLES])
def test_rl_formats_convert_to_rows_whose_gold_answers_score_one(tmp_path, sample, fmt, gold):
    rows, summary, output = convert(tmp_path, sample, fmt)
    loaded = load_rl(output)
    assert len(loaded) == len(gold) == summary["kept"]
    assert scores(loaded, gold) == [1.0] * len(gold)
    assert scores(loaded, ["I do not know, sorry."] * len(gold)) == [0.0] * len(gold)


def test_nemo_gym_keeps_tools_and_renders_them(tmp_path):
    rows, _, output = convert(tmp_path, "nemo_gym_math.jsonl", "nemo-gym")
    assert rows[2]["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "python",
                "description": "Run Python code and return its stdout.",
                "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
            },
        }
    ]
    assert rows[2]["prompt"][1]["content"].endswith("Compute $\\binom{8}{3}$.")  # Responses-API content parts
    loaded = load_rl(output)
    assert "<tools>" in loaded[2]["prompt"][0]["content"] and "You can run Python." in loaded[2]["prompt"][0]["content"]
    assert [r["answer"] for r in rows] == ["100", "2", "56"] and rows[0]["source"] == "NuminaMath-CoT"


def test_ifeval_rows_keep_set_kwargs_only_and_count_non_letters(tmp_path):
    rows, _, output = convert(tmp_path, "ifeval.jsonl", "ifeval")
    assert rows[0]["kwargs"] == [{"num_paragraphs": 2}, {"letter": "#", "let_frequency": 2, "let_relation": "at least"}]
    assert rows[0]["id"] == "1000"
    loaded = load_rl(output)
    story = "A cat # sat.\n***\nIt # slept."
    assert scores(loaded, [story, "apples, pears and plums."]) == [1.0, 1.0]


def test_bfcl_rows_keep_their_tools_and_accept_several_values(tmp_path):
    rows, summary, output = convert(
        tmp_path, "bfcl_simple.jsonl", "bfcl", "--answers", str(SAMPLES / "bfcl_simple_answers.jsonl")
    )
    assert summary["kept"] == 3
    assert rows[0]["tools"][0]["function"]["parameters"]["type"] == "object"  # BFCL "dict"
    assert rows[2]["tools"][0]["function"]["parameters"]["properties"]["weight"]["type"] == "number"  # "float"
    assert rows[2]["expected_calls"] == []  # irrelevance: no call is right
    loaded = load_rl(output)
    assert '"calculate_triangle_area"' in loaded[0]["prompt"][0]["content"]  # the model sees its tools
    call = '<tool_call>\n{{"name": "{}", "arguments": {}}}\n</tool_call>'
    gold = [
        call.format("calculate_triangle_area", '{"base": 10, "height": 5}'),
        call.format("math.factorial", '{"number": 5}'),
        "A circle of radius 3 has area 9 pi.",
    ]
    assert scores(loaded, gold) == [1.0, 1.0, 1.0]
    # without the answers the rows cannot be converted: an error naming the file and line
    result = CliRunner().invoke(
        app, ["data", "convert", str(SAMPLES / "bfcl_simple.jsonl"), "-f", "bfcl", "-o", str(tmp_path / "x.jsonl")]
    )
    assert result.exit_code == 2 and "bfcl_simple.jsonl:1: no ground truth" in result.output


def test_gpqa_options_are_shuffled_with_a_fixed_seed(tmp_path):
    rows, _, _ = convert(tmp_path, "gpqa_diamond.jsonl", "mcq")
    again, _, _ = convert(tmp_path / "again", "gpqa_diamond.jsonl", "mcq")
    assert rows == again
    row = rows[0]
    assert row["choices"][ord(row["answer"]) - ord("A")] == "1s2 2s2 2p2" and row["id"] == "rec06pnAkLOr2t2mp"
    assert f"{row['answer']}) 1s2 2s2 2p2" in row["prompt"]


def test_sft_and_preference_formats(tmp_path):
    rows, _, _ = convert(tmp_path, "openai_messages_sft.jsonl", "messages")
    sft = [normalise_sft(row) for row in rows]
    assert sft[1]["messages"][1]["content"] == "<think>91 = 7 * 13.</think>No: 91 = 7 x 13."
    assert json.loads(sft[2]["tools"])[0]["function"]["name"] == "get_weather"
    pairs, summary, _ = convert(tmp_path, "helpsteer3_preference.jsonl", "helpsteer")
    assert summary["dropped"] == {"tie (preference 0)": 1}
    assert pairs[0]["chosen"][0]["content"].startswith("Keep a regular bedtime")
    assert pairs[1]["chosen"][0]["content"].startswith("Use `items[::-1]`") and len(pairs[1]["prompt"]) == 3
    hs2, _, _ = convert(tmp_path, "helpsteer2_preference.jsonl", "helpsteer")
    assert [p["chosen"][0]["content"] for p in hs2] == ["Red.", "4"]
    assert all(normalise_preference(p) for p in pairs + hs2)


def test_swe_instances_from_swe_bench_and_nemo_gym(tmp_path):
    from cascade_rl.swe.pipeline import SweInstance

    direct, _, _ = convert(tmp_path, "swebench.jsonl", "swebench")
    gym, _, _ = convert(tmp_path, "nemo_gym_swe.jsonl", "nemo-gym")
    assert gym[0] == direct[0]
    assert direct[0]["FAIL_TO_PASS"] == ["tests/test_ops.py::test_add"] and direct[1]["PASS_TO_PASS"] != []
    assert SweInstance.from_dict(direct[0]).gold_files == ["calc/ops.py"]


def test_livecodebench_public_only_and_dates_kept(tmp_path):
    rows, _, _ = convert(tmp_path, "livecodebench.jsonl", "livecodebench", "--tests", "public")
    assert [len(r["tests"]["inputs"]) for r in rows] == [1, 1]
    assert rows[0]["contest_date"] == "2024-08-10T00:00:00" and rows[1]["tests"]["fn_name"] == "addTwo"
    full, _, _ = convert(tmp_path / "all", "livecodebench.jsonl", "livecodebench")
    assert [len(r["tests"]["inputs"]) for r in full] == [3, 2]


class Boom:
    def __reduce__(self):
        return (print, ("owned",))


def test_private_tests_decode_plain_data_only():
    tests = [{"input": "1\n", "output": "2\n", "testtype": "stdin"}]
    packed = base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()
    assert decode_private_tests(packed) == tests
    assert decode_private_tests(json.dumps(tests)) == tests
    evil = base64.b64encode(zlib.compress(pickle.dumps(Boom()))).decode()
    with pytest.raises(RowError, match="refused to load builtins.print"):
        decode_private_tests(evil)
    with pytest.raises(RowError, match="neither JSON nor base64"):
        decode_private_tests("not-base64!")


def test_malformed_rows_name_file_and_line_or_are_counted(tmp_path):
    source = tmp_path / "aime.jsonl"
    source.write_text('{"problem": "1+1?", "answer": "2"}\n{"problem": "no answer"}\n{broken\n')
    output = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["data", "convert", str(source), "-f", "aime", "-o", str(output), "-q"])
    assert result.exit_code == 2
    assert f"{source}:2: missing field 'answer' / 'Answer' / 'expected_answer'" in result.output
    result = CliRunner().invoke(
        app, ["data", "convert", str(source), "-f", "aime", "-o", str(output), "-q", "--skip-malformed", "--overwrite"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out.jsonl.summary.json").read_text())["summary"]
    assert summary["kept"] == 1 and summary["read"] == 3
    assert summary["examples"][
        "malformed: invalid JSON (Expecting property name enclosed in double quotes at column 2)"
    ] == (f"{source}:3")
    result = CliRunner().invoke(app, ["data", "convert", str(source), "-f", "nope", "-o", str(output)])
    assert result.exit_code == 2 and "unknown format 'nope'" in result.output


def test_rename_reads_nested_fields(tmp_path):
    source = tmp_path / "custom.jsonl"
    source.write_text(json.dumps({"meta": {"q": "What is 6*7?", "gold": 42}}) + "\n")
    output = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        app,
        ["data", "convert", str(source), "-f", "aime", "-o", str(output), "-q"]
        + ["--rename", "problem=meta.q", "--rename", "answer=meta.gold", "--suffix", ""],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(output.read_text()) == {"prompt": "What is 6*7?", "domain": "math", "answer": "42"}


def test_parquet_input(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in (SAMPLES / "mmlu.jsonl").read_text().splitlines()]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "mmlu.parquet")
    output = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        app, ["data", "convert", str(tmp_path / "mmlu.parquet"), "-f", "mcq", "-o", str(output)]
    )
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["answer"] for line in output.read_text().splitlines()] == ["B", "C"]
