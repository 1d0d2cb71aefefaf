"""Toy tool calls: rendered calls match the chat template, gold calls score 1.0, tools shown
include every tool the answer calls."""

from cascade_rl.chat import parse_tool_calls, render
from cascade_rl.world import tools
from cascade_rl.world.tasks import sft_row
from tests.world.conftest import TOOL_CALL_DOMAIN, draw


def test_same_seed_same_tasks():
    assert draw(tools.tool_task, 40) == draw(tools.tool_task, 40)


def test_gold_response_is_what_the_template_renders():
    for task in draw(tools.tool_task, 60):
        for mode in ("think", "no_think"):
            row = sft_row(task, mode, "x")
            assert render(row["messages"], row.get("tools")).endswith(task.response(mode) + "<|im_end|>\n")


def test_called_tools_are_shown_and_calls_parse():
    tasks = draw(tools.tool_task, 100)
    assert {t.kind for t in tasks} >= {"no_tool", "two_cities", "weather", "currency"}
    for task in tasks:
        shown = {schema["function"]["name"] for schema in task.tools}
        expected = task.reference["expected_calls"]
        assert {call["name"] for call in expected} <= shown
        assert parse_tool_calls(task.response("no_think")) == expected


def test_gold_calls_score_one(score_gold):
    tasks = draw(tools.tool_task, 100)
    for mode in ("no_think", "think"):
        assert score_gold(TOOL_CALL_DOMAIN, tasks, mode) == [1.0] * len(tasks)


def test_tool_call_benchmark_prompt_shows_its_tools(tmp_path, tiny_checkpoint):
    """The prompt the model sees in the tool-call benchmark (eval/benchmarks.py: load the rows,
    flag the mode, render with the tokenizer's template as ``sample_responses`` does) lists
    exactly the tools of its row, as SFT showed them."""
    import json

    from transformers import AutoTokenizer

    from cascade_rl.chat import with_mode
    from cascade_rl.eval.benchmarks import load_benchmark
    from cascade_rl.recipe import Benchmark
    from cascade_rl.world.tasks import rl_row

    tasks = draw(tools.tool_task, 12)
    path = tmp_path / "bench_tool-call.jsonl"
    path.write_text("".join(json.dumps(rl_row(task, f"t{i}")) + "\n" for i, task in enumerate(tasks)))
    bench = Benchmark(name="tool-call", data=str(path), domain=TOOL_CALL_DOMAIN, mode="no_think")
    rows = load_benchmark(bench)
    assert len(rows) == len(tasks)
    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint)
    for task, row in zip(tasks, rows):
        seen = tokenizer.apply_chat_template(
            with_mode(row["prompt"], bench.mode), tokenize=False, add_generation_prompt=True
        )
        sft = render(with_mode(list(task.prompt), "no_think"), list(task.tools), add_generation_prompt=True)
        assert seen == sft
        shown = {
            json.loads(line)["function"]["name"]
            for line in seen.split("<tools>\n")[1].split("\n</tools>")[0].splitlines()
        }
        assert shown == {schema["function"]["name"] for schema in task.tools}
