"""`cascade data difficulty` (pass rates over k samples; the paper's math and code filters) and
`cascade data verify` (responses that disagree with the ground truth), with scripted
generators at the Generator boundary and a real tiny local checkpoint through the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from typer.testing import CliRunner

from cascade_rl.cli import app
from cascade_rl.data.difficulty import PRESETS, PassRateFilter, filter_difficulty
from cascade_rl.llm.base import Sampling

sys.path.insert(0, str(Path(__file__).parents[1] / "llm"))
from llm_helpers import SURE, build_chain_model  # noqa: E402

from cascade_rl.chat import IM_END  # noqa: E402


class Scripted:
    """``generate`` answers a prompt with the responses scripted for a word in it, cycled to n."""

    def __init__(self, script: dict[str, list[str]]):
        self.script, self.calls = script, []

    def generate(self, messages, sampling=Sampling()):
        n = sampling.n
        text = messages[-1]["content"]
        self.calls.append((text, n))
        lines = next(v for k, v in self.script.items() if k in text)
        return [lines[i % len(lines)] for i in range(n)]


def write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


MATH = [
    {"id": "easy", "prompt": "easy: 2+2?", "domain": "math", "answer": "4"},
    {"id": "medium", "prompt": "medium: 3+3?", "domain": "math", "answer": "6"},
    {"id": "hard", "prompt": "hard: 9*9?", "domain": "math", "answer": "81"},
]


def test_math_preset_drops_prompts_solved_three_quarters_of_sixteen_times(tmp_path):
    model = Scripted(
        {
            "easy": ["\\boxed{4}"] * 12 + ["\\boxed{5}"] * 4,  # 12 of 16 = 0.75: dropped (>= 75%)
            "medium": ["\\boxed{6}"] * 11 + ["no"] * 5,  # 11 of 16: kept
            "hard": ["\\boxed{80}"],
        }
    )
    output = tmp_path / "out.jsonl"
    math = PRESETS["math"]
    rule = PassRateFilter(model, math["k"], drop_at_or_above=math["drop_at_or_above"], spec="scripted")
    summary = filter_difficulty([write(tmp_path / "in.jsonl", MATH)], output, [rule], progress=False)
    rows = read(output)
    assert [(r["id"], r["pass_rate"]) for r in rows] == [("medium", 11 / 16), ("hard", 0.0)]
    assert summary.dropped == {"too easy: model pass rate >= 0.75 of 16": 1}
    assert {n for _, n in model.calls} == {16}
    assert all(text.endswith(" /think") is False for text, _ in model.calls)  # mode is a message key here


def test_code_preset_uses_a_small_and_a_strong_model(tmp_path):
    solve = "```python\nprint(int(input()) * 2)\n```"
    rows = [
        {
            "id": name,
            "prompt": f"{name}: double the number",
            "domain": "code",
            "tests": {"inputs": ["2\n"], "outputs": ["4\n"]},
        }
        for name in ("trivial", "fine", "hopeless")
    ]
    small = Scripted({"trivial": [solve], "fine": [solve, "no code"], "hopeless": ["no code"]})
    strong = Scripted({"fine": [solve, "no code"], "hopeless": ["no code"]})
    code = PRESETS["code"]
    rules = [
        PassRateFilter(small, 2, drop_at_or_above=code["drop_at_or_above"], spec="small"),
        PassRateFilter(
            strong, 2, drop_at_or_below=code["strong_drop_at_or_below"], column="strong_pass_rate", name="strong model"
        ),
    ]
    output = tmp_path / "out.jsonl"
    summary = filter_difficulty([write(tmp_path / "in.jsonl", rows)], output, rules, progress=False, workers=2)
    assert read(output) == [{**rows[1], "pass_rate": 0.5, "strong_pass_rate": 0.5}]
    assert summary.dropped == {
        "too easy: model pass rate >= 1 of 2": 1,
        "hopeless: strong model pass rate <= 0 of 2": 1,
    }
    assert [text.split(":")[0] for text, _ in strong.calls] == ["fine", "hopeless"]  # not the dropped one


def test_bad_rows_fail_before_any_generation(tmp_path):
    model = Scripted({"": ["\\boxed{4}"]})
    source = write(tmp_path / "in.jsonl", [MATH[0], {"prompt": "x", "domain": "math"}])
    result = CliRunner().invoke(
        app, ["data", "difficulty", str(source), "-o", str(tmp_path / "o.jsonl"), "--model", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "in.jsonl:2: domain math needs field 'answer'" in result.output
    assert model.calls == []


def test_cli_with_a_local_checkpoint(tmp_path):
    """A real tiny Qwen3 checkpoint that always answers \\boxed{7}: problems whose answer is 7
    are solved 4/4 and dropped; the rest are kept with pass rate 0."""
    chain = {"\n": {"\\": SURE}, "\\": {"b": SURE}, "b": {"o": SURE}, "o": {"x": SURE}, "x": {"e": SURE}}
    chain |= {"e": {"d": SURE}, "d": {"{": SURE}, "{": {"7": SURE}, "7": {"}": SURE}, "}": {IM_END: SURE}}
    model = build_chain_model(tmp_path / "model", chain)
    rows = [
        {"prompt": "3+4?", "answer": "7"},
        {"prompt": "3+5?", "answer": "8"},
    ]
    output = tmp_path / "out.jsonl"
    args = ["data", "difficulty", str(write(tmp_path / "in.jsonl", rows)), "-o", str(output), "--model", str(model)]
    args += ["--domain", "math", "-k", "4", "--max-tokens", "16", "-q"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert read(output) == [{"prompt": "3+5?", "answer": "8", "pass_rate": 0.0}]
    assert "too easy: model pass rate >= 0.75 of 4" in result.output


def test_cli_samples_with_the_top_k_it_is_given(tmp_path):
    """A checkpoint that answers \\boxed{7} three times in four and \\boxed{8} once: with --top-k 1
    only the likelier answer is drawn, so 3+5 is never solved; without it, it sometimes is."""
    import math

    chain = {"\n": {"\\": SURE}, "\\": {"b": SURE}, "b": {"o": SURE}, "o": {"x": SURE}, "x": {"e": SURE}}
    chain |= {"e": {"d": SURE}, "d": {"{": SURE}, "{": {"7": SURE + math.log(3.0), "8": SURE}}
    chain |= {"7": {"}": SURE}, "8": {"}": SURE}, "}": {IM_END: SURE}}
    model = build_chain_model(tmp_path / "model", chain)
    rows = write(tmp_path / "in.jsonl", [{"prompt": "3+5?", "answer": "8"}])

    def pass_rate(*options: str) -> float:
        output = tmp_path / f"out{len(options)}.jsonl"
        args = ["data", "difficulty", str(rows), "-o", str(output), "--model", str(model), "--domain", "math"]
        args += ["-k", "32", "--max-tokens", "16", "--temperature", "1", "--top-p", "1", "-q", *options]
        result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        return read(output)[0]["pass_rate"]

    assert 0 < pass_rate() < 0.75
    assert pass_rate("--top-k", "1") == 0.0


def test_verify_drops_responses_that_disagree_with_the_ground_truth(tmp_path):
    def sft(answer, response, **extra):
        messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": response}]
        return {"messages": messages, **({"domain": "math", "answer": answer} if answer else {}), **extra}

    rows = [sft("4", "<think>2+2</think>\\boxed{4}"), sft("4", "\\boxed{5}"), sft(None, "hello")]
    output = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        app,
        ["data", "verify", str(write(tmp_path / "in.jsonl", rows)), "-o", str(output), "-q"],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert read(output) == [rows[0], rows[2]]
    summary = json.loads((tmp_path / "out.jsonl.summary.json").read_text())["summary"]
    assert summary["dropped"] == {"response disagrees with the ground truth": 1}
    assert summary["extra"]["unchecked"] == [{"rows": "no ground truth (kept)", "count": 1}]


def test_one_pass_rate_rule_serves_the_difficulty_command_and_the_prompt_filter():
    """``cascade data difficulty`` (a pass reaches the threshold) and a stage's prompt filter (a
    sample solves above it) are the same rule with their own boundaries (issue 43)."""
    from cascade_rl.data.difficulty import DifficultyRule, Passing
    from cascade_rl.recipe import PromptFilter
    from cascade_rl.train.prompt_filter import difficulty_rule

    command = DifficultyRule(Passing(1.0), too_easy_at=0.75, hopeless_at=0.0)
    assert [command.verdict(r) for r in ([1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0])] == ["too easy", "keep", "hopeless"]
    swe = difficulty_rule(PromptFilter())  # the paper's SWE filter: 4 of 8 above 0.5, none above 0
    assert swe.verdict([0.5] * 8) == "keep" and Passing(0.5).rate([0.5]) == 1.0  # at the threshold: not above it
    assert swe.verdict([0.6] * 4 + [0.1] * 4) == "too easy" and swe.verdict([0.0] * 8) == "hopeless"
