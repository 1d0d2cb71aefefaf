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


def fenced(code):
    return f"```python\n{code}\n```"


def test_gsm8k_answers_are_the_number_after_the_marks_and_the_worked_solution_is_kept(tmp_path):
    rows, summary, output = convert(tmp_path, "gsm8k.jsonl", "gsm8k")
    assert summary["kept"] == 4
    assert [r["answer"] for r in rows] == ["66", "1200", "-3", "1000"]  # thousands separators removed
    assert rows[0]["solution"] == (
        "In the afternoon she makes 48/2 = 24 rolls.\nAltogether she makes 48 + 24 = 72 rolls.\n"
        "She sells 72 - 6 = 66 rolls."
    )
    assert rows[3]["solution"] == "He saves 250 * 4 = $1000."  # calculator annotations removed
    assert rows[0]["prompt"].endswith("within \\boxed{}.") and rows[0]["domain"] == "math"
    loaded = load_rl(output)
    assert scores(loaded, [f"\\boxed{{{r['answer']}}}" for r in rows]) == [1.0] * 4
    assert scores(loaded, [r["solution"] for r in rows]) == [0.0] * 4  # the worked solution is no answer


def test_gsm8k_rows_without_a_number_after_the_marks_are_named(tmp_path):
    source = tmp_path / "gsm.jsonl"
    source.write_text(json.dumps({"question": "q?", "answer": "no marks"}) + "\n")
    source.write_text(source.read_text() + json.dumps({"question": "q?", "answer": "x\n#### twelve"}) + "\n")
    output = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        app, ["data", "convert", str(source), "-f", "gsm8k", "-o", str(output), "-q", "--skip-malformed"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out.jsonl.summary.json").read_text())["summary"]
    assert summary["kept"] == 0
    assert any("no '#### <number>' line" in reason for reason in summary["examples"])
    assert any("is not a number: 'twelve'" in reason for reason in summary["examples"])


MBPP_ROWS = [json.loads(line) for line in (SAMPLES / "mbpp.jsonl").read_text().splitlines()]


def test_mbpp_rows_run_assert_tests_after_the_setup_code_and_their_reference_code_passes(tmp_path):
    rows, summary, output = convert(tmp_path, "mbpp.jsonl", "mbpp")
    assert summary["kept"] == 4 and [r["id"] for r in rows] == ["2", "11", "520", "927"]
    assert rows[1]["tests"]["asserts"] == MBPP_ROWS[1]["test_list"] + MBPP_ROWS[1]["challenge_test_list"]
    assert rows[3]["tests"]["setup"].startswith("root = Node(1) \nroot.left = Node(2)")
    assert "setup" not in rows[0]["tests"]
    prompt = rows[0]["prompt"]  # the task, then its first test only: the function's name and signature
    assert prompt.startswith("Write a function to return the larger of two numbers.\n")
    assert "assert larger(3, 5) == 5" in prompt and "assert larger(-1, -4)" not in prompt
    assert "root = Node(1)" in rows[3]["prompt"]  # the setup code the tests need is shown
    loaded = load_rl(output)
    assert scores(loaded, [fenced(r["code"]) for r in MBPP_ROWS]) == [1.0] * 4
    assert scores(loaded, [fenced("def larger(a, b):\n    return a")] * 4) == [0.0] * 4


@pytest.mark.parametrize(
    ("split", "kept"), [("test", ["11"]), ("train", ["927"]), ("validation", ["520"]), ("prompt", ["2"])]
)
def test_mbpp_split_by_task_id(tmp_path, split, kept):
    rows, summary, _ = convert(tmp_path, "mbpp.jsonl", "mbpp", "--split", split)
    assert [r["id"] for r in rows] == kept
    assert summary["dropped"] == {f"not in the {split} split": 3}


def test_mbpp_split_is_checked_and_reaches_the_converter_from_a_benchmark(tmp_path):
    from cascade_rl.eval.benchmarks import load_benchmark
    from cascade_rl.recipe import Benchmark

    command = ["data", "convert", str(SAMPLES / "mbpp.jsonl"), "-f", "mbpp", "-o", str(tmp_path / "x.jsonl")]
    result = CliRunner().invoke(app, [*command, "--split", "dev"])
    assert result.exit_code == 2 and "--split must be all or one of prompt, test, validation, train" in result.output
    command = ["data", "convert", str(SAMPLES / "aime2024.jsonl"), "-f", "aime", "-o", str(tmp_path / "y.jsonl")]
    result = CliRunner().invoke(app, [*command, "--split", "test"])
    assert result.exit_code == 2 and "--split is an option of mbpp" in result.output
    bench = Benchmark(name="mbpp", data=str(SAMPLES / "mbpp.jsonl"), format="mbpp", format_options={"split": "test"})
    assert [row["id"] for row in load_benchmark(bench)] == ["11"]


RUNNING = "[max(numbers[: i + 1]) for i in range(len(numbers))]"


def test_humaneval_programs_are_standalone_and_run_after_the_prompt_code(tmp_path):
    rows, summary, output = convert(tmp_path, "humaneval.jsonl", "humaneval")
    source = [json.loads(line) for line in (SAMPLES / "humaneval.jsonl").read_text().splitlines()]
    assert summary["kept"] == 3 and rows[0]["id"] == "HumanEval/0"
    assert rows[0]["tests"] == {
        "asserts": ["check(running_max)"],
        "prelude": source[0]["prompt"],
        "setup": source[0]["test"],
    }
    assert "def running_max(numbers: List[int]) -> List[int]:" in rows[0]["prompt"]
    loaded = load_rl(output)
    canonical = [fenced(s["prompt"] + s["canonical_solution"]) for s in source]
    assert scores(loaded, canonical) == [1.0] * 3
    # the function alone: the prompt's imports (List) and helpers (shift_encode) come from the prompt's code
    alone = [
        fenced(f"def running_max(numbers: List[int]) -> List[int]:\n    return {RUNNING}"),
        fenced("def shift_decode(s):\n    return ''.join(chr((ord(c) - 100) % 26 + 97) for c in s)"),
        fenced("def is_palindrome(text):\n    return text[::-1] == text"),
    ]
    assert scores(loaded, alone) == [1.0] * 3
    # the prompt repeated without a body, or a wrong body, fails
    assert scores(loaded, [fenced(s["prompt"]) for s in source]) == [0.0] * 3
    assert scores(loaded, [fenced("def is_palindrome(text):\n    return True")] * 3) == [0.0] * 3


def test_nemo_gym_math_with_code_rows_name_their_answer_expected_result(tmp_path):
    """NeMo Gym's math_with_code resources server publishes the answer as ``expected_result``."""
    from cascade_rl.data.convert import nemo_gym

    question = "Compute $\\binom{8}{3}$ with the python tool."
    rows = [
        {"responses_create_params": {"input": [{"role": "user", "content": question}]}, "expected_result": "56"},
        {
            "responses_create_params": {"input": question},
            "verifier_metadata": {"expected_result": "\\(56\\)"},
            "expected_code_contains": "comb",
        },
    ]
    source = tmp_path / "math_with_code.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    output = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["data", "convert", str(source), "-f", "nemo-gym", "-o", str(output), "-q"])
    assert result.exit_code == 0, result.output
    converted = [json.loads(line) for line in output.read_text().splitlines()]
    assert [(r["domain"], r["answer"]) for r in converted] == [("math", "56"), ("math", "\\(56\\)")]
    assert scores(load_rl(output), ["<think>C(8,3)</think>\\boxed{56}"] * 2) == [1.0, 1.0]
    assert nemo_gym(rows[0], domain="math")["answer"] == "56"
    with pytest.raises(RowError, match="expected_result"):
        nemo_gym({"responses_create_params": {"input": question}})


@pytest.mark.parametrize("fmt", ["ifbench", "ifeval"])
def test_unknown_instruction_ids_are_malformed_rows(tmp_path, fmt):
    """A row whose instruction id has no checker would score 0 with an error for every response:
    it is malformed at conversion, named by file and line, and counted with the id when skipped."""
    source = tmp_path / "ifbench.jsonl"
    rows = [
        {"key": 1, "prompt": "Describe a city.", "instruction_id_list": ["words:start_verb"], "kwargs": [{}]},
        {"key": 2, "prompt": "Describe a sea.", "instruction_id_list": ["words:made_up"], "kwargs": [{}]},
        {"key": 3, "prompt": "Describe a sky.", "instruction_id_list": ["format:title_case", "count:nope"]},
    ]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    output = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["data", "convert", str(source), "-f", fmt, "-o", str(output), "-q"])
    assert result.exit_code == 2
    assert f"{source}:2: unknown instruction id 'words:made_up'" in result.output
    result = CliRunner().invoke(
        app, ["data", "convert", str(source), "-f", fmt, "-o", str(output), "-q", "--skip-malformed", "--overwrite"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out.jsonl.summary.json").read_text())["summary"]
    assert summary["read"] == 3 and summary["kept"] == 1
    examples = {key: where for key, where in summary["examples"].items() if "unknown instruction id" in key}
    assert sorted(examples.values()) == [f"{source}:2", f"{source}:3"]
    assert any("'words:made_up'" in key for key in examples) and any("'count:nope'" in key for key in examples)
    assert [json.loads(line)["instruction_id_list"] for line in output.read_text().splitlines()] == [
        ["words:start_verb"]
    ]


def test_nemo_gym_instruction_rows_with_unknown_ids_are_malformed(tmp_path):
    source = tmp_path / "gym.jsonl"
    row = {
        "responses_create_params": {"input": [{"role": "user", "content": "Write a line."}]},
        "verifier_metadata": {"instruction_id_list": ["words:made_up"], "kwargs": [{}]},
    }
    source.write_text(json.dumps(row) + "\n")
    output = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["data", "convert", str(source), "-f", "nemo-gym", "-o", str(output), "-q"])
    assert result.exit_code == 2 and f"{source}:1: unknown instruction id 'words:made_up'" in result.output
