"""`cascade data dedup | decontaminate | check-disjoint`, and what every data command shares:
resumable output after `kill -9`, a kept / dropped summary, malformed rows named by file and line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from cascade_rl.cli import app

SAMPLES = Path(__file__).parent / "samples"


def write(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def run(*args):
    return CliRunner().invoke(app, ["data", *map(str, args)], env={"COLUMNS": "250"})


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def summary_of(output: Path) -> dict:
    return json.loads(output.with_name(output.name + ".summary.json").read_text())["summary"]


def test_dedup_keeps_the_first_row_of_each_prompt_and_both_modes(tmp_path):
    rows = [
        {
            "messages": [
                {"role": "user", "content": "Hi  there", "mode": "think"},
                {"role": "assistant", "content": "a"},
            ]
        },
        {"messages": [{"role": "user", "content": "Hi there", "mode": "think"}, {"role": "assistant", "content": "b"}]},
        {
            "messages": [
                {"role": "user", "content": "Hi there", "mode": "no_think"},
                {"role": "assistant", "content": "c"},
            ]
        },
        {"prompt": "Hi there", "domain": "math", "answer": "1"},
        {"prompt": [{"role": "user", "content": "Hi there"}], "domain": "math", "answer": "2"},
    ]
    output = tmp_path / "out.jsonl"
    result = run("dedup", write(tmp_path / "in.jsonl", rows), "-o", output, "-q")
    assert result.exit_code == 0, result.output
    assert [r.get("answer") or r["messages"][1]["content"] for r in lines(output)] == ["a", "c", "1"]
    assert summary_of(output)["dropped"] == {"duplicate prompt": 2}
    assert "duplicate prompt" in result.output and "in.jsonl:2" in result.output
    keyed = tmp_path / "keyed.jsonl"
    assert run("dedup", tmp_path / "in.jsonl", "-o", keyed, "--key", "answer", "-q").exit_code == 2  # rows without it
    assert run("dedup", tmp_path / "in.jsonl", "-o", keyed, "--key", "answer", "-q", "--skip-malformed").exit_code == 0
    assert summary_of(keyed)["dropped"] == {"malformed: missing field 'answer'": 3}


def test_decontaminate_reports_each_benchmark(tmp_path):
    train = [
        {
            "prompt": "Find the number of positive integers $n \\le 30$ such that n is divisible by 3 or 5, please",
            "domain": "math",
            "answer": "14",
        },
        {"prompt": "Which planet is known as the Red Planet?", "domain": "math", "answer": "x"},
        {
            "prompt": "Tell me a story about a red planet and a brave cat who flies there in a rocket",
            "domain": "math",
            "answer": "x",
        },
        {
            "messages": [
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": "What is the remainder when $7^{4}$ is divided by $10$"},
            ]
        },
    ]
    output = tmp_path / "clean.jsonl"
    args = ["decontaminate", write(tmp_path / "train.jsonl", train), "-o", output, "-q"]
    args += ["-b", f"aime24={SAMPLES / 'aime2024.jsonl'}", "-b", f"mmlu={SAMPLES / 'mmlu.jsonl'}"]
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert [r.get("prompt", "")[:10] for r in lines(output)] == ["Tell me a ", ""]
    summary = summary_of(output)
    assert summary["dropped"] == {"shares a 9-gram with aime24": 1, "shares a 9-gram with mmlu": 1}
    table = {row["benchmark"]: row for row in summary["extra"]["per benchmark"]}
    assert table["aime24"]["rows removed"] == 1 and "positive integers n le 30" in table["aime24"]["by n-gram"]
    assert table["mmlu"]["rows removed"] == 1  # a short question: the same words are a match
    assert "per benchmark" in result.output
    # replies count too with --text all
    strict = tmp_path / "strict.jsonl"
    assert run(*args[:3], strict, "-q", "--text", "all", *args[5:]).exit_code == 0
    assert len(lines(strict)) == 1


def test_decontaminate_with_a_template_leaves_the_instruction_every_question_carries(tmp_path):
    ask = "Please reason step by step, and put your final answer within the box."
    bench = write(
        tmp_path / "bench.jsonl",
        [{"question": f"{q} {ask}"} for q in ("How many legs do four spiders have?", "What is seven times six?")],
    )
    train = write(tmp_path / "train.jsonl", [{"prompt": f"How many wheels do two bicycles have? {ask}"}])
    plain, templated = tmp_path / "plain.jsonl", tmp_path / "templated.jsonl"
    assert run("decontaminate", train, "-o", templated, "-q", "-b", f"b={bench}").exit_code == 0  # the default
    literal = run("decontaminate", train, "-o", plain, "-q", "-b", f"b={bench}", "--template", "0")
    assert literal.exit_code == 0
    assert lines(plain) == [] and len(lines(templated)) == 1  # the paper's literal rule drops it on the shared request
    template = summary_of(templated)["extra"]["per benchmark"][0]["template"]
    assert template == "“please reason step by step and put your final answer within the box” (2 rows)"
    assert "dropped 1 of 1 rows (100%), mostly by b: “" in " ".join(literal.output.split())  # said, with its n-gram


def test_a_raw_public_file_is_read_through_its_format_with_its_options(tmp_path):
    """`-b NAME=FILE` refused a raw public file (`no question text found`) though its help said
    any format convert reads; now FILE:FORMAT[,KEY=VALUE] converts it, e.g. MBPP's test split."""
    raw = write(
        tmp_path / "mbpp.jsonl",
        [
            {
                "task_id": 11,
                "text": "Write a python function to remove first and last occurrence of a given character "
                "from the string.",
                "test_list": ["assert remove_Occ('hello','l') == 'heo'"],
            },
            {
                "task_id": 601,
                "text": "Write a function to find the longest chain which can be formed from the given set of pairs.",
                "test_list": ["assert max_chain_length([], 0) == 0"],
            },
        ],
    )
    train = write(
        tmp_path / "train.jsonl",
        [
            {"prompt": "Remove first and last occurrence of a given character from the string, in Python."},
            {"prompt": "Find the longest chain which can be formed from the given set of pairs."},
        ],
    )
    output = tmp_path / "clean.jsonl"
    bare = run("decontaminate", train, "-o", output, "-q", "-b", f"mbpp={raw}")
    assert bare.exit_code == 2 and "name its public format: --benchmark mbpp=FILE:FORMAT" in bare.output
    result = run("decontaminate", train, "-o", output, "-q", "-b", f"mbpp={raw}:mbpp,split=test", "--overwrite")
    assert result.exit_code == 0, result.output
    # task 11 is in MBPP's test split: its copy goes; task 601 is a training task, not a question of the benchmark
    assert [row["prompt"][:8] for row in lines(output)] == ["Find the"]
    unknown = run("decontaminate", train, "-o", output, "-q", "-b", f"mbpp={raw}:mbpq")
    assert unknown.exit_code == 2 and "unknown format 'mbpq'" in unknown.output


def test_a_training_row_without_text_is_not_passed_as_clean(tmp_path):
    train = write(tmp_path / "train.jsonl", [{"text": "Write a function to add two numbers.", "test_list": []}])
    bench = write(tmp_path / "bench.jsonl", [{"question": "What is seven times six, in words?"}])
    result = run("decontaminate", train, "-o", tmp_path / "out.jsonl", "-q", "-b", f"b={bench}")
    assert result.exit_code == 2 and "no prompt text found (convert a public format first" in result.output


def test_check_disjoint_finds_shared_prompts_and_writes_disjoint_sets(tmp_path):
    sft = write(
        tmp_path / "sft.jsonl",
        [{"messages": [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"}]}],
    )
    rlhf = write(
        tmp_path / "rlhf.jsonl",
        [{"prompt": [{"role": "user", "content": "Write a poem."}], "chosen": "a", "rejected": "b"}],
    )
    rl = write(
        tmp_path / "rl.jsonl",
        [
            {"prompt": "what is  2+2?", "domain": "math", "answer": "4"},
            {"prompt": "3*3?", "domain": "math", "answer": "9"},
        ],
    )
    result = run("check-disjoint", "--sft", sft, "--rlhf", rlhf, "--rl", rl, "--write-dir", tmp_path / "disjoint")
    assert result.exit_code == 1, result.output
    assert "sft & rl" in result.output and "sft.jsonl:1 = " in result.output
    assert lines(tmp_path / "disjoint" / "rl-rl.jsonl") == [{"prompt": "3*3?", "domain": "math", "answer": "9"}]
    clean = run("check-disjoint", "--sft", sft, "--rl", tmp_path / "disjoint" / "rl-rl.jsonl")
    assert clean.exit_code == 0, clean.output


def test_classify_labels_topics_and_drops_math_and_code_with_counts(tmp_path):
    rows = [
        {"prompt": [{"role": "user", "content": "Write a haiku about autumn in all lowercase letters."}]},
        {"prompt": "Tom has 12 apples and gives away 5. How many apples does he have left?"},
        {"question": "Write a python function to reverse the words of a sentence."},
        {"messages": [{"role": "user", "content": "Solve for x: 2x + 3 = 11"}, {"role": "assistant", "content": "4"}]},
        {"prompt": "Plan a birthday party for 10 kids."},
    ]
    source = write(tmp_path / "rlhf.jsonl", rows)
    labelled = run("classify", source, "-o", tmp_path / "labelled.jsonl", "-q", "--explain")
    assert labelled.exit_code == 0, labelled.output
    out = lines(tmp_path / "labelled.jsonl")
    assert [row["topic"] for row in out] == ["other", "math", "code", "math", "other"]
    assert "math: how many / how much" in out[1]["topic_evidence"]
    kept = run("classify", source, "-o", tmp_path / "kept.jsonl", "-q", "--drop", "math,code")
    assert kept.exit_code == 0, kept.output
    assert [row["prompt"] for row in lines(tmp_path / "kept.jsonl")] == [rows[0]["prompt"], rows[4]["prompt"]]
    summary = summary_of(tmp_path / "kept.jsonl")
    assert summary["dropped"] == {"topic math": 2, "topic code": 1}
    assert summary["extra"]["topics kept"] == [{"topic": "other", "rows": 2}]
    assert "dropped: topic math" in kept.output
    bad = run("classify", source, "-o", tmp_path / "bad.jsonl", "--drop", "maths")
    assert bad.exit_code == 2 and "--drop: expected topics among math, code, other" in bad.output
    empty = write(tmp_path / "empty.jsonl", [{"id": 1}])
    no_text = run("classify", empty, "-o", tmp_path / "none.jsonl")
    assert no_text.exit_code == 2 and "empty.jsonl:1: no prompt text found" in no_text.output


def test_check_disjoint_finds_math_and_code_in_rlhf(tmp_path):
    rlhf = write(
        tmp_path / "rlhf.jsonl",
        [
            {"prompt": "Write a poem about rain."},
            {"prompt": "Find the remainder when $2^{100}$ is divided by 7."},
            {"prompt": "Given an integer array nums, return the number of pairs.\n\nInput\n\nOutput\n"},
        ],
    )
    rl = write(tmp_path / "rl.jsonl", [{"prompt": "3*3?", "domain": "math", "answer": "9"}])
    result = run("check-disjoint", "--rlhf", rlhf, "--rl", rl, "--write-dir", tmp_path / "clean")
    assert result.exit_code == 1, result.output
    assert "math and code prompts in the RLHF set" in result.output and "rlhf.jsonl:2" in result.output
    assert lines(tmp_path / "clean" / "rlhf-rlhf.jsonl") == [{"prompt": "Write a poem about rain."}]
    alone = run("check-disjoint", "--rlhf", tmp_path / "clean" / "rlhf-rlhf.jsonl")
    assert alone.exit_code == 0, alone.output


def test_a_killed_job_resumes_to_the_same_output(tmp_path):
    """kill -9 in the middle of a run, a half-written line at the end of the output: running the
    same command again gives exactly the output of an uninterrupted run."""
    rows = [{"ID": i, "Problem": f"What is {i} plus {i}? " + "pad " * 50, "Answer": 2 * i} for i in range(60000)]
    source = write(tmp_path / "big.jsonl", rows)
    output = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "cascade_rl.cli", "data", "convert", str(source), "-f", "aime", "-o", str(output)]
    process = subprocess.Popen(command + ["-q"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    state = output.with_name(output.name + ".summary.json")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if state.exists() and 0 < json.loads(state.read_text())["summary"]["read"] < len(rows) // 2:
            os.kill(process.pid, signal.SIGKILL)
            break
        time.sleep(0.01)
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL, "the job finished before it could be killed"
    with open(output, "a") as handle:
        handle.write('{"prompt": "half a li')  # as if the kill hit in the middle of a write
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    fresh = tmp_path / "fresh.jsonl"
    assert run("convert", source, "-f", "aime", "-o", fresh, "-q").exit_code == 0
    assert output.read_bytes() == fresh.read_bytes()
    assert summary_of(output)["kept"] == len(rows) and summary_of(output)["done"]
    again = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert "already complete" in again.stderr
    other = run("convert", source, "-f", "aime", "-o", output, "--suffix", "x", "-q")
    assert other.exit_code == 2 and "--overwrite" in other.output


def test_dedup_levels_default_to_whitespace_and_case_and_the_summary_names_the_level(tmp_path):
    rows = [
        {"prompt": "What is the capital of France?", "domain": "math", "answer": "1"},
        {"prompt": "what is the capital of  france?", "domain": "math", "answer": "2"},
        {"prompt": "What is the capital of France", "domain": "math", "answer": "3"},
        {"prompt": "What is the capital of France?", "domain": "math", "answer": "4"},
    ]
    source = write(tmp_path / "in.jsonl", rows)
    expected = {
        None: ["1", "3"],
        "exact": ["1", "2", "3"],
        "whitespace": ["1", "2", "3"],
        "whitespace-case": ["1", "3"],
        "whitespace-case-punctuation": ["1"],
    }
    for level, answers in expected.items():
        output = tmp_path / f"{level}.jsonl"
        result = run("dedup", source, "-o", output, "-q", *(["--level", level] if level else []))
        assert result.exit_code == 0, result.output
        assert [r["answer"] for r in lines(output)] == answers, level
        assert f"dedup ({level or 'whitespace-case'})" in result.output
        assert summary_of(output)["extra"]["level"] == (level or "whitespace-case")
    exact_spaces = write(tmp_path / "spaces.jsonl", [{"q": "a  b"}, {"q": "a b"}, {"q": "A B"}])
    keyed = tmp_path / "keyed.jsonl"
    assert run("dedup", exact_spaces, "-o", keyed, "--key", "q", "--level", "exact", "-q").exit_code == 0
    assert len(lines(keyed)) == 3
    assert run("dedup", exact_spaces, "-o", keyed, "--key", "q", "-q", "--overwrite").exit_code == 0
    assert len(lines(keyed)) == 1
    bad = run("dedup", source, "-o", tmp_path / "bad.jsonl", "--level", "case")
    assert bad.exit_code == 2 and "whitespace-case-punctuation" in bad.output
