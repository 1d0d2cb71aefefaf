"""Code RL's data filter (data/code_filter.py, `cascade data code-filter`): judge kinds, reference
solutions and mutants run in the sandbox, source-URL dedup, on TACO- and LiveCodeBench-format rows
(tests/data/code_filter/) and real MBPP rows."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cascade_rl.cli import app
from cascade_rl.data.code_filter import input_variants, judge_kind, mutants, solutions_of, source_key
from cascade_rl.data.rows import RowError

ROWS = Path(__file__).parent / "code_filter"
REAL_DATA = Path(os.environ.get("CASCADE_REAL_DATA") or Path(__file__).resolve().parents[3] / "shared" / "real-data")


def run(*args):
    return CliRunner().invoke(app, ["data", *map(str, args)], env={"COLUMNS": "250"})


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def summary_of(output: Path) -> dict:
    return json.loads(output.with_name(output.name + ".summary.json").read_text())["summary"]


def test_judge_kinds_standard_output_cannot_judge():
    assert judge_kind("This is an interactive problem. After each query flush the output.") == "interactive problem"
    assert judge_kind("Solve it.\n\n-----Interaction-----\n\nRead the judge's reply.") == "interactive problem"
    assert judge_kind("If there are several answers, print any of them.").startswith("special judge")
    assert judge_kind("Return the answer in any order.").startswith("special judge")
    looser = "Your answer is accepted if its absolute or relative error does not exceed $10^{-4}$."
    assert judge_kind(looser) == "special judge: answer tolerance looser than the comparison's"
    # the reward compares numbers within 1e-6: a problem asking for that (or stricter) is judged as is
    assert judge_kind("The absolute or relative error must not exceed 10^{-6}.") is None
    assert judge_kind("Print the sum of a and b. Output any trailing newline.") is None
    assert judge_kind("A checkerboard of n rows; print the number of black cells.") is None


def test_source_keys():
    same = [
        "https://codeforces.com/problemset/problem/1000/A",
        "http://www.codeforces.com/contest/1000/problem/a/",
        "codeforces.com/contest/1000/problem/A?locale=en",
    ]
    assert {source_key({"url": url}) for url in same} == {"codeforces:1000A"}
    assert (
        source_key({"url": "https://atcoder.jp/contests/abc1/tasks/abc1_a#top"})
        == "atcoder.jp/contests/abc1/tasks/abc1_a"
    )
    assert source_key({"platform": "LeetCode", "question_id": "3500"}) == "leetcode:3500"
    assert source_key({"prompt": "no source"}) is None


def test_mutants_change_one_thing_each():
    source = "def count(xs, k):\n    return sum(1 for x in xs if x > k)\n"
    variants = mutants(source, 10, seed=1)
    assert variants and len(set(variants)) == len(variants)
    original = ast.unparse(ast.parse(source))
    for variant in variants:
        ast.parse(variant)
        assert variant != original
    assert sorted(mutants(source, 50)) == sorted(
        [original.replace("x > k", "x >= k"), original.replace("(1 for", "(0 for")]
    )
    assert mutants(source, 10, seed=1) == variants  # drawn with the seed
    assert mutants("def broken(:", 5) == []


def test_input_variants_move_values_and_keep_sizes():
    variants = input_variants([b"3 2\n1 2 3\n", b"1 5\n5\n"], 6, seed="s")
    assert len(variants) == 6 and len(set(variants)) == 6
    for variant in variants:
        first, values, _ = variant.split("\n")
        assert first in ("3 2", "1 5") and len(values.split()) == int(first.split()[0])
    assert all(v != "7\n" for v in input_variants([b"7\n"], 3, seed=0))  # one line: moved whole


def test_solutions_field():
    assert solutions_of({"solutions": '["print(1)", ""]'}) == ["print(1)"]
    assert solutions_of({}) == []
    with pytest.raises(RowError, match="solutions is not a JSON list"):
        solutions_of({"solutions": "[oops"})


def test_code_filter_on_taco_rows(tmp_path):
    converted = tmp_path / "taco-code.jsonl"
    assert run("convert", ROWS / "taco.jsonl", "-f", "taco", "-o", converted, "-q").exit_code == 0
    rows = lines(converted)
    assert rows[0]["url"] == "https://codeforces.com/problemset/problem/1000/A" and rows[0]["solutions"]
    output = tmp_path / "filtered.jsonl"
    result = run("code-filter", converted, "-o", output, "-q", "--workers", "2")
    assert result.exit_code == 0, result.output
    kept = lines(output)
    assert [row["id"] for row in kept] == ["largest", "count-greater-strong", "digit-sum", "no-solution"]
    assert all("solutions" not in row for row in kept)
    assert kept[0]["mutation_score"] >= 0.8 and kept[3]["mutation_score"] is None
    summary = summary_of(output)
    assert summary["dropped"] == {
        "duplicate source URL": 1,
        "interactive problem": 1,
        "special judge: several answers accepted": 1,
        "special judge: answer tolerance looser than the comparison's": 1,
        "reference solutions fail their tests": 1,
        "weak tests: over 20% of mutants pass": 1,
    }
    assert {"check": "kept unchecked: no reference solution", "rows": 1} in summary["extra"]["kept rows"]
    assert "dropped: weak tests" in result.output


def test_code_filter_on_livecodebench_rows(tmp_path):
    converted = tmp_path / "lcb-code.jsonl"
    assert run("convert", ROWS / "livecodebench.jsonl", "-f", "livecodebench", "-o", converted, "-q").exit_code == 0
    assert lines(converted)[2]["metadata"] == {"func_name": "sortPeople"}
    output = tmp_path / "filtered.jsonl"
    assert run("code-filter", converted, "-o", output, "-q").exit_code == 0
    assert [row["question_id"] for row in lines(output)] == ["abc400_a"]
    assert summary_of(output)["dropped"] == {"duplicate source URL": 1, "special judge: several answers accepted": 1}


def test_bad_rows_are_named(tmp_path):
    source = tmp_path / "rows.jsonl"
    source.write_text(json.dumps({"prompt": "x", "domain": "math", "answer": "1"}) + "\n")
    result = run("code-filter", source, "-o", tmp_path / "out.jsonl")
    assert result.exit_code == 2 and "rows.jsonl:1: not a code row (domain 'math')" in result.output


@pytest.mark.skipif(not (REAL_DATA / "mbpp").is_dir(), reason="the real public data (shared/real-data) is not here")
def test_code_filter_on_real_mbpp_rows(tmp_path):
    """The first 30 MBPP problems: every reference solution passes its own tests; the problems
    dropped for weak tests are those where a mutant passes (task 3, "identify non-prime numbers":
    `n % i == 1` passes all three asserts)."""
    converted = tmp_path / "mbpp.jsonl"
    source = tmp_path / "mbpp-30.jsonl"
    source.write_text("".join((REAL_DATA / "mbpp" / "mbpp.jsonl").read_text().splitlines(keepends=True)[:30]))
    assert run("convert", source, "-f", "mbpp", "-o", converted, "-q").exit_code == 0
    output = tmp_path / "filtered.jsonl"
    assert run("code-filter", converted, "-o", output, "-q", "--workers", "2").exit_code == 0
    summary = summary_of(output)
    assert summary["read"] == 30 and "reference solutions fail their tests" not in summary["dropped"]
    assert "3" not in {row["id"] for row in lines(output)}
    assert 0 < summary["dropped"]["weak tests: over 20% of mutants pass"] < 15


def test_a_slow_reference_is_named_apart_from_a_wrong_one(tmp_path):
    tests = {"inputs": ["1\n"], "outputs": ["1\n"]}
    rows = [
        {
            "prompt": "Echo n.",
            "domain": "code",
            "tests": tests,
            "solutions": ["import time\ntime.sleep(3)\nprint(input())"],
        },
        {"prompt": "Echo n.", "domain": "code", "tests": tests, "solutions": ["print(2)"]},
    ]
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = run("code-filter", source, "-o", tmp_path / "out.jsonl", "-q", "--time-limit", "0.5")
    assert result.exit_code == 0, result.output
    assert summary_of(tmp_path / "out.jsonl")["dropped"] == {
        "reference solutions exceed the time limit": 1,
        "reference solutions fail their tests": 1,
    }
