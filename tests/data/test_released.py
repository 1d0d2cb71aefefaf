"""The paper's released datasets read as published (data/released.py): each format converts the
sample rows of tests/data/samples/nemotron_cascade* (written in the published schemas) into rows
the stages load and the rewards score, with every quirk of the releases handled, and malformed or
unusable rows counted with their reason."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cascade_rl.chat import render, split_thinking
from cascade_rl.cli import app
from cascade_rl.cli import common as cli_common
from cascade_rl.data.convert import instruction_fields
from cascade_rl.data.loading import load_sources, normalise_preference, normalise_sft, rl_normaliser
from cascade_rl.data.released import nemotron_cascade_rl_swe, thinking_flag, uncheckable_task
from cascade_rl.data.rows import RowError, iter_rows, prompt_key
from cascade_rl.recipe import DataSource
from cascade_rl.rewards.registry import get_domain, score_batch

SAMPLES = Path(__file__).parent / "samples"


def convert(tmp_path, sample, fmt, *options, expect=0):
    output = tmp_path / f"{Path(sample).stem}.{fmt}.jsonl"
    command = ["data", "convert", str(SAMPLES / sample), "-f", fmt, "-o", str(output), "-q", "--overwrite", *options]
    result = CliRunner().invoke(app, command)
    assert result.exit_code == expect, result.output
    if expect:
        return result.output
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    return rows, json.loads(output.with_name(output.name + ".summary.json").read_text())["summary"], output


def load_rl(path, domain=None):
    rows, report = load_sources([DataSource(path=str(path))], rl_normaliser(domain))
    assert not report.skipped, report.summary()
    return rows


def scores(rows, responses):
    domain = get_domain(rows[0]["domain"])
    requests = [{**row["reference"], "response": r, "prompt": ""} for row, r in zip(rows, responses)]
    return [s.reward for s in score_batch(domain, requests, None, workers=1)]


def sample_rows(name):
    return [row.data for row in iter_rows(SAMPLES / name)]


# ----------------------------------------------------------------------------- SFT (Cascade 1)
def test_sft_rows_keep_parallel_thinking_and_non_thinking_samples_with_their_flags(tmp_path):
    rows, summary, output = convert(tmp_path, "nemotron_cascade_sft.jsonl", "nemotron-cascade-sft")
    assert summary["read"] == 7 and summary["kept"] == 6
    assert summary["dropped"] == {"unfinished thinking (no </think>)": 1}
    think, no_think = rows[0], rows[1]  # one prompt, both responses: two samples, one per mode
    assert think["messages"][0]["content"] == no_think["messages"][0]["content"]
    assert (think["messages"][0]["mode"], no_think["messages"][0]["mode"]) == ("think", "no_think")
    assert render(think["messages"][:1]).rstrip().endswith("hunt at night. /think<|im_end|>")
    assert render(no_think["messages"][:1]).rstrip().endswith("hunt at night. /no_think<|im_end|>")
    assert prompt_key(think) != prompt_key(no_think)  # dedup keeps both
    dedup = CliRunner().invoke(app, ["data", "dedup", str(output), "-o", str(tmp_path / "dedup.jsonl"), "-q"])
    assert dedup.exit_code == 0 and len((tmp_path / "dedup.jsonl").read_text().splitlines()) == 6
    # a flag written into the text becomes the turn's mode; no empty <think></think> in a non-thinking reply
    assert rows[2]["messages"] == [
        {"role": "user", "content": "Name a prime number between 20 and 25.", "mode": "no_think"},
        {"role": "assistant", "content": "23 is prime."},
    ]
    assert [r["source"] for r in rows] == ["general", "general", "general", "math", "code", "science"]
    assert rows[3]["origin"] == "OpenMathReasoning" and rows[3]["generator"] == "DeepSeek-R1-0528"
    loaded, report = load_sources(
        [DataSource(path=str(SAMPLES / "nemotron_cascade_sft.jsonl"), format="nemotron-cascade-sft")], normalise_sft
    )
    assert len(loaded) == 6 and report.skipped == {"unfinished thinking (no </think>)": 1}


def test_the_answer_of_a_thinking_sample_is_what_follows_think_close(tmp_path):
    """Draft answers appear inside the reasoning: verification reads only the text after </think>."""
    math = sample_rows("nemotron_cascade_sft.jsonl")[3]
    reply = math["messages"][1]["content"]
    assert "\\boxed{25}" in split_thinking(reply).reasoning and "\\boxed{100}" in split_thinking(reply).answer
    wrong = json.loads(json.dumps(math).replace("answer is $\\\\boxed{100}$", "answer is $\\\\boxed{25}$"))
    source = tmp_path / "math.jsonl"
    source.write_text("".join(json.dumps({**r, "answer": "100"}) + "\n" for r in (math, wrong)))
    converted = tmp_path / "math.sft.jsonl"
    command = ["data", "convert", str(source), "-f", "nemotron-cascade-sft", "-o", str(converted), "-q"]
    assert CliRunner().invoke(app, command).exit_code == 0
    assert [json.loads(line)["domain"] for line in converted.read_text().splitlines()] == ["math", "math"]
    verified = tmp_path / "verified.jsonl"
    result = CliRunner().invoke(app, ["data", "verify", str(converted), "-o", str(verified), "-q", "--workers", "1"])
    assert result.exit_code == 0, result.output
    kept = [json.loads(line) for line in verified.read_text().splitlines()]
    assert len(kept) == 1 and kept[0]["messages"][1]["content"].endswith("$\\boxed{100}$.")


def test_sft_options_keep_one_mode_or_some_categories(tmp_path):
    rows, summary, _ = convert(
        tmp_path, "nemotron_cascade_sft.jsonl", "nemotron-cascade-sft", "--option", "modes=think"
    )
    assert {r["messages"][0]["mode"] for r in rows} == {"think"} and summary["dropped"][
        "no_think sample (modes: think)"
    ] == 2
    rows, summary, _ = convert(
        tmp_path / "c", "nemotron_cascade_sft.jsonl", "nemotron-cascade-sft", "--option", 'categories=["math", "code"]'
    )
    assert [r["source"] for r in rows] == ["math", "code"]
    assert summary["dropped"]["category 'general' not selected"] == 4
    swe, _, _ = convert(
        tmp_path, "nemotron_cascade_sft_swe.jsonl", "nemotron-cascade-sft", "--option", "categories=swe"
    )
    assert [(r["source"], r["category"]) for r in swe] == [("swe", "SWE Repair"), ("swe", "SWE Localization")]
    output = convert(tmp_path, "nemotron_cascade_sft.jsonl", "nemotron-cascade-sft", "--option", "mode=think", expect=2)
    assert "format nemotron-cascade-sft takes no option 'mode'" in output


def test_tool_calling_samples_keep_their_tools_and_calls(tmp_path):
    rows, _, _ = convert(tmp_path, "nemotron_cascade_sft_tool_calling.jsonl", "nemotron-cascade-sft")
    row = normalise_sft(rows[0])
    assert json.loads(row["tools"])[0]["function"]["name"] == "get_weather"
    assert row["messages"][2]["tool_calls"] == [
        {"function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}}
    ]
    text = render(row["messages"], json.loads(row["tools"]))
    assert "<tools>" in text and '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lisbon"}}' in text


@pytest.mark.parametrize(
    ("value", "mode"),
    [(True, "think"), (False, "no_think"), ("on", "think"), ("off", "no_think"), (1, "think"), (None, None)],
)
def test_thinking_flags_in_any_spelling(value, mode):
    assert thinking_flag(value) == mode


def test_malformed_sft_rows_name_the_field(tmp_path):
    source = tmp_path / "bad.jsonl"
    rows = [
        {"messages": "[not json", "thinking": True},
        {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "thinking": "maybe"},
        {"messages": json.dumps([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])},
    ]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    output = tmp_path / "out.jsonl"
    command = ["data", "convert", str(source), "-f", "nemotron-cascade-sft", "-o", str(output), "-q"]
    result = CliRunner().invoke(app, [*command, "--skip-malformed"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out.jsonl.summary.json").read_text())["summary"]
    assert summary["kept"] == 1  # messages given as JSON text
    assert any(reason.startswith("malformed: messages is not valid JSON") for reason in summary["dropped"])
    assert "malformed: thinking is not a thinking flag: 'maybe'" in summary["dropped"]


# ----------------------------------------------------------------------------- RL (Cascade 1)
IF_GOLD = [
    "<<Lighthouse at Dusk>>\nThe beam turns slowly over a violet sea.",
    "wiring, plumbing pipes and coins.",
    "Our cat is missing; he has white whiskers and sleeps on the porch. Any other questions?",
    "* practice daily, practice slowly\n* practice with two balls first",
    "Spring is mild.\n\nBut nothing beats the colours of autumn",
]


def test_instruction_following_parquet_rows_score_their_gold_answers(tmp_path):
    rows, summary, output = convert(tmp_path, "nemotron_cascade_rl_if.parquet", "nemotron-cascade-rl-if")
    assert summary["kept"] == 5
    assert rows[1]["kwargs"] == [{}]  # Parquet's struct column filled every absent key with null
    assert rows[0]["kwargs"] == [{}, {"relation": "less than", "num_words": 80}]
    assert rows[0]["prompt"][0]["content"].startswith("Describe a lighthouse") and rows[0]["id"] == "0"
    loaded = load_rl(output)
    assert scores(loaded, IF_GOLD) == [1.0] * 5
    assert scores(loaded, ["I refuse."] * 5) == [0.0] * 5


def test_the_two_if_rl_sub_stages_read_the_one_release_by_taxonomy(tmp_path):
    first, summary, _ = convert(
        tmp_path, "nemotron_cascade_rl_if.parquet", "nemotron-cascade-rl-if", "--option", "taxonomy=ifeval"
    )
    assert [r["id"] for r in first] == ["0", "1", "2", "3"]
    assert summary["dropped"] == {"instructions outside the IFEval taxonomy (taxonomy: ifeval)": 1}
    second, summary, _ = convert(
        tmp_path / "2", "nemotron_cascade_rl_if.parquet", "nemotron-cascade-rl-if", "--option", "taxonomy=iftrain"
    )
    assert [r["instruction_id_list"] for r in second] == [["last_word:last_word_answer"]]
    assert summary["dropped"] == {"IFEval-taxonomy instructions only (taxonomy: iftrain)": 4}


def test_kwargs_are_decoded_whatever_their_encoding():
    ids = ["change_case:english_lowercase", "startend:end_checker"]
    phrase = {"end_phrase": "the end."}
    expected = {"instruction_id_list": ids, "kwargs": [{}, phrase]}
    assert instruction_fields(ids, [None, phrase]) == expected  # null entries
    assert instruction_fields(ids, [None, json.dumps(phrase)]) == expected  # an entry as JSON text
    assert instruction_fields(json.dumps(ids), json.dumps([{}, phrase])) == expected  # both lists as JSON text
    assert (
        instruction_fields(ids, [{"end_phrase": None}, {**phrase, "keywords": None}, None, "{}"]) == expected
    )  # padded
    assert (
        instruction_fields(ids, None) == instruction_fields(ids, []) == {"instruction_id_list": ids, "kwargs": [{}, {}]}
    )
    with pytest.raises(RowError, match="kwargs has 1 entries for 2 instructions"):
        instruction_fields(ids, [phrase])
    with pytest.raises(RowError, match="kwargs has 3 entries for 2 instructions"):
        instruction_fields(ids, [None, phrase, {"num_words": 3}])
    with pytest.raises(RowError, match="kwargs entry is not valid JSON"):
        instruction_fields(ids, [None, "{end_phrase"])


def test_math_is_one_json_list_and_tasks_without_a_checkable_answer_are_dropped(tmp_path):
    assert [row.where.rsplit(":", 1)[1] for row in iter_rows(SAMPLES / "nemotron_cascade_rl_math.json")][:2] == [
        "row 1",
        "row 2",
    ]
    rows, summary, output = convert(tmp_path, "nemotron_cascade_rl_math.json", "nemotron-cascade-rl-math")
    assert summary["read"] == 6 and [r["answer"] for r in rows] == ["1", "24", "7"]
    assert summary["dropped"] == {
        "task_type 'proof': a proof, no answer Math RL checks": 1,
        "task_type 'multiple_choice': multiple choice (guessable), no answer Math RL checks": 1,
        "task_type 'yes/no': yes/no (guessable), no answer Math RL checks": 1,
    }
    assert rows[0]["prompt"].endswith("within \\boxed{}.") and rows[0]["source"] == "NuminaMath-CoT"
    loaded = load_rl(output)
    assert scores(loaded, ["<think>7^4 = 1 mod 5</think>\\boxed{1}", "\\boxed{24}", "\\boxed{7}"]) == [1.0] * 3
    source = DataSource(path=str(SAMPLES / "nemotron_cascade_rl_math.json"), format="nemotron-cascade-rl-math")
    read, report = load_sources([source], rl_normaliser("math"))
    assert len(read) == 3 and report.read == 6 and sum(report.skipped.values()) == 3


@pytest.mark.parametrize(
    ("task_type", "checkable"),
    [
        ("proof", False),
        ("converted_proof", False),
        ("Multiple Choice", False),
        ("MCQ", False),
        ("yes/no", False),
        ("true_false", False),
        ("multi-part", False),
        ("short_answer", True),
        ("has_answer_extracted", True),
        (None, True),
    ],
)
def test_math_task_types(task_type, checkable):
    assert (uncheckable_task(task_type) is None) == checkable


EDITS = [
    "```python\n### stats/core.py\n<<<<<<< SEARCH\ndef mean(values):\n    return sum(values) / len(values)\n=======\n"
    'def mean(values):\n    if not values:\n        raise ValueError("mean() of an empty sequence")\n'
    "    return sum(values) / len(values)\n>>>>>>> REPLACE\n```",
    "```python\n### stats/median.py\n<<<<<<< SEARCH\n=======\ndef median(values):\n    ordered = sorted(values)\n"
    "    middle = len(ordered) // 2\n    return ordered[middle]\n>>>>>>> REPLACE\n```\n"
    "```python\n### stats/__init__.py\n<<<<<<< SEARCH\nfrom stats.core import mean\n=======\n"
    "from stats.core import mean\nfrom stats.median import median\n>>>>>>> REPLACE\n```",
]


def test_swe_rows_give_the_repair_prompt_the_files_and_the_golden_patch(tmp_path):
    released = sample_rows("nemotron_cascade_rl_swe.jsonl")
    rows, summary, output = convert(tmp_path, "nemotron_cascade_rl_swe.jsonl", "nemotron-cascade-rl-swe")
    assert summary["dropped"] == {"golden patch changes a file the prompt does not show": 1}
    assert rows[0]["prompt"] == [{"role": "user", "content": released[0]["prompt"]}]  # files inside, as released
    assert rows[1]["files"] == {
        "stats/__init__.py": "from stats.core import mean\n",
        "stats/core.py": released[1]["relevant_file_contents"][1]["content"],
    }
    assert "stats/median.py" not in rows[1]["files"]  # the golden patch creates it
    assert rows[0]["id"] == "stats__stats-101" and rows[0]["original_prompt"].startswith("Calling `mean([])`")
    loaded = load_rl(output)
    answers = [f"<think>fix it</think>{edit}" for edit in EDITS]
    assert scores(loaded, answers) == [1.0, 1.0]  # the golden patches are reachable, the new file included
    assert scores(loaded, ["<think>hm</think>no edits here"] * 2) == [-1.0, -1.0]


def test_rlhf_rows_are_one_user_turn_for_the_reward_model(tmp_path):
    rows, summary, output = convert(tmp_path, "nemotron_cascade_rl_rlhf.jsonl", "nemotron-cascade-rl-rlhf")
    assert summary["kept"] == 3
    assert rows[0] == {
        "prompt": [
            {"role": "user", "content": "Plan a relaxed three-day trip to Kyoto for someone who likes gardens."}
        ],
        "domain": "preference",
        "category": "general",
        "data_source": "helpsteer3",
    }
    assert [row["domain"] for row in load_rl(output)] == ["preference"] * 3


def test_reward_model_rows_are_chosen_and_rejected_pairs(tmp_path):
    pairs, summary, output = convert(tmp_path, "nemotron_cascade_rm.jsonl", "nemotron-cascade-rm")
    assert summary["dropped"] == {"chosen and rejected are the same": 1}
    assert pairs[1]["prompt"] == [{"role": "user", "content": "How do I reverse a list in Python?"}]
    assert pairs[1]["chosen"] == [
        {"role": "assistant", "content": "Use `items[::-1]` for a reversed copy or `items.reverse()` in place."}
    ]
    assert pairs[1]["rejected"] == [{"role": "assistant", "content": "Python lists cannot be reversed."}]
    assert all(normalise_preference(pair) == {k: pair[k] for k in ("prompt", "chosen", "rejected")} for pair in pairs)
    helpsteer = {
        "context": [{"role": "user", "content": "Hi"}],
        "response1": "Hello!",
        "response2": "Go away.",
        "overall_preference": -2,
    }
    implicit = {
        "chosen": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}],
        "rejected": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Go away."}],
    }
    source = tmp_path / "more.jsonl"
    source.write_text(json.dumps(helpsteer) + "\n" + json.dumps(implicit) + "\n")
    read, report = load_sources([DataSource(path=str(source), format="nemotron-cascade-rm")], normalise_preference)
    assert [(p["prompt"][0]["content"], p["chosen"][0]["content"]) for p in read] == [("Hi", "Hello!")] * 2


# ----------------------------------------------------------------------------- Cascade 2
def test_cascade_2_rl_rows_go_to_the_domain_their_agent_names_with_nemo_gym_fields_verbatim(tmp_path):
    released = sample_rows("nemotron_cascade_2_rl.jsonl")
    rows, summary, _ = convert(tmp_path, "nemotron_cascade_2_rl.jsonl", "nemotron-cascade-2-rl")
    assert [r.get("domain", "swe instance") for r in rows] == [
        "ifeval",
        "mcqa",
        "workplace",
        "structured_output",
        "math",
        "swe instance",
    ]
    assert sorted(summary["dropped"].values()) == [1, 1, 1] and all(
        r.startswith("no reference: ") for r in summary["dropped"]
    )
    assert "no reference: mcqa row without its reference (expected_answer)" in summary["dropped"]
    ifeval, mcqa, workplace, structured, math, swe = rows
    assert ifeval["kwargs"] == [{}, {"end_phrase": "the end."}]  # null, JSON text, padded
    for name in ("options", "expected_answer", "grading_mode", "template_metadata"):
        assert mcqa[name] == released[1][name]
    assert workplace["ground_truth"] == released[3]["ground_truth"]
    assert json.loads(workplace["ground_truth"][0]["arguments"]) == {
        "email_id": "00000042",
        "body": "Thanks, see you Friday.",
    }
    assert [t["function"]["name"] for t in workplace["tools"]] == ["email_search_emails", "email_reply_email"]
    assert (workplace["category"], workplace["environment_name"]) == ("workbench_email", "workbench")
    assert workplace["prompt"][0]["role"] == "system" and len(workplace["prompt"]) == 2
    assert structured["schema_str"] == released[4]["schema_str"] and '"required": false' in structured["schema_str"]
    assert (structured["schema_type"], structured["problem_type"], structured["schema_repr"]) == (
        "json",
        "extraction",
        "json_schema",
    )
    assert math["answer"] == "1024" and swe["instance_id"] == "example__calc-1"


def test_nemo_gym_shares_the_routing_and_reports_rows_without_a_reference_as_malformed(tmp_path):
    ours, _, _ = convert(tmp_path, "nemotron_cascade_2_rl.jsonl", "nemotron-cascade-2-rl")
    output = convert(tmp_path / "strict", "nemotron_cascade_2_rl.jsonl", "nemo-gym", expect=2)
    assert "nemotron_cascade_2_rl.jsonl:3: mcqa row without its reference (expected_answer)" in output
    gym, summary, _ = convert(tmp_path / "lenient", "nemotron_cascade_2_rl.jsonl", "nemo-gym", "--skip-malformed")
    assert gym == ours and summary["kept"] == 6


def test_cascade_2_workplace_rows_show_their_tools_to_the_model(tmp_path):
    """Whatever scores them (a stage's domain wins over the rows'), the rows' tools are written into
    the prompt's system message, after the row's own system text."""
    _, _, output = convert(tmp_path, "nemotron_cascade_2_rl.jsonl", "nemotron-cascade-2-rl")
    source = DataSource(path=str(output), limit=3)
    loaded, _ = load_sources([source], rl_normaliser("cascade_rl.rewards.math:score"))
    system = loaded[2]["prompt"][0]["content"]
    assert system.startswith("Today's date is Monday, 2023-11-27.") and "<tools>" in system
    assert '"email_reply_email"' in system and loaded[2]["reference"]["ground_truth"][0]["name"] == "email_reply_email"


def test_cascade_2_sft_rows_keep_reasoning_tools_and_the_loss_mask(tmp_path):
    rows, summary, output = convert(tmp_path, "nemotron_cascade_2_sft.jsonl", "nemotron-cascade-2-sft")
    assert summary["dropped"] == {"loss mask leaves an assistant turn untrained before a trained one": 1}
    math, chat, agent = rows
    assert (
        math["messages"][2]["content"]
        == "<think>12*13 = 120 + 36 = 156.</think>12 * 13 = 156, so the answer is $\\boxed{156}$."
    )
    assert (math["messages"][1]["mode"], chat["messages"][0]["mode"]) == ("think", "no_think")
    assert (math["source"], math["category"], agent["source"]) == ("math", "math", "tool")
    # the last reply is masked: cut, so every turn the project trains is one the mask trains
    assert [m["role"] for m in agent["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    assert agent["messages"][-1]["content"].endswith("There are two files: a.txt and b.txt.")
    assert agent["messages"][2]["tool_calls"][0]["function"]["name"] == "bash"
    assert agent["tools"][0]["function"]["name"] == "bash"
    loaded, report = load_sources([DataSource(path=str(output))], normalise_sft)
    assert len(loaded) == 3 and not report.skipped


# ----------------------------------------------------------------------------- the paper recipes on the releases
def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def released_layout(root: Path) -> Path:
    """The sample rows in the layout `hf download ... --local-dir $CASCADE_DATA/<dataset>` gives
    (docs/recipes.md), plus the Code RL prompts (not released) and the recipe's benchmarks."""
    import shutil

    sft = sample_rows("nemotron_cascade_sft.jsonl")
    by = {c: [r for r in sft if r["category"] == c] for c in ("general", "math", "code", "science")}
    stage1, stage2 = root / "Nemotron-Cascade-SFT-Stage-1", root / "Nemotron-Cascade-SFT-Stage-2"
    for name, rows in (("general.jsonl", by["general"]), ("math/math_1.jsonl", by["math"])):
        write_jsonl(stage1 / name, rows)
    write_jsonl(stage1 / "code" / "code_1.jsonl", by["code"])
    write_jsonl(stage1 / "science.jsonl", by["science"])
    write_jsonl(stage2 / "general" / "general_1.jsonl", by["general"])
    write_jsonl(stage2 / "instruction-following.jsonl", by["general"][:2])
    write_jsonl(stage2 / "math" / "math_1.jsonl", by["math"])
    write_jsonl(stage2 / "code" / "code_1.jsonl", by["code"])
    write_jsonl(stage2 / "science.jsonl", by["science"])
    write_jsonl(stage2 / "tool_calling.jsonl", sample_rows("nemotron_cascade_sft_tool_calling.jsonl"))
    swe = sample_rows("nemotron_cascade_sft_swe.jsonl")
    write_jsonl(stage2 / "swe_repair.jsonl", swe[:1])
    write_jsonl(stage2 / "swe_localization.jsonl", swe[1:])
    write_jsonl(
        root / "Nemotron-Cascade-RM-Training" / "data" / "train.jsonl", sample_rows("nemotron_cascade_rm.jsonl")
    )
    rlhf = sample_rows("nemotron_cascade_rl_rlhf.jsonl")
    write_jsonl(root / "Nemotron-Cascade-RL-RLHF" / "train.jsonl", rlhf)
    (root / "Nemotron-Cascade-RL-Instruction-Following").mkdir()
    shutil.copy(
        SAMPLES / "nemotron_cascade_rl_if.parquet",
        root / "Nemotron-Cascade-RL-Instruction-Following" / "ifrl_final_release.parquet",
    )
    (root / "Nemotron-Cascade-RL-Math").mkdir()
    shutil.copy(SAMPLES / "nemotron_cascade_rl_math.json", root / "Nemotron-Cascade-RL-Math" / "math.json")
    write_jsonl(root / "Nemotron-Cascade-RL-SWE" / "train.jsonl", sample_rows("nemotron_cascade_rl_swe.jsonl"))
    # the SWE RL sets per input-context limit `cascade swe build-data` writes (rows of the swe domain)
    swe_rows = [nemotron_cascade_rl_swe(row) for row in sample_rows("nemotron_cascade_rl_swe.jsonl")]
    swe_rows = [row for row in swe_rows if isinstance(row, dict)]
    for limit, count in ((16384, 2), (24576, 1), (32768, 2)):
        write_jsonl(root / "rl" / "swe" / f"context-{limit}.jsonl", swe_rows[:count])
    write_jsonl(
        root / "rl" / "code.jsonl",
        [
            {"question": f"Print {n}.", "domain": "code", "tests": {"inputs": [""], "outputs": [f"{n}\n"]}}
            for n in (1, 2)
        ],
    )
    write_jsonl(
        root / "eval" / "ifeval.jsonl",
        [{"prompt": "Say hi in lowercase.", "instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{}]}],
    )
    # AIME 2024 holds one of RL-Math's problems: decontamination must catch it
    aime = "Suppose $x$ is a real number with $x + 1/x = 3$. Compute $x^2 + 1/x^2$ exactly."
    write_jsonl(root / "eval" / "aime24.jsonl", [{"prompt": aime, "answer": "7"}])
    write_jsonl(root / "eval" / "aime25.jsonl", [{"prompt": "What is 6 times 7?", "answer": "42"}])
    write_jsonl(
        root / "eval" / "livecodebench-v6.jsonl",
        [{"prompt": "Print 3.", "tests": {"inputs": [""], "outputs": ["3\n"]}}],
    )
    return root


#: (raw rows each stage reads, rows it keeps once converted) on the layout above
RECIPE_ROWS = {
    "nemotron-cascade-8b": {
        "sft": ("7 + 17", [6, 16]),
        "rm": ("3", 2),
        "rlhf": ("3", 3),
        "ifrl": ("5 -> 5", [4, 1]),  # the IFEval taxonomy, then IFBench-train's
        "math": ("6", 3),
        "code": ("2", 2),
        "swe": ("2 -> 1", [2, 1]),  # context-16384.jsonl, then context-24576.jsonl
    },
    "nemotron-cascade-14b-thinking": {
        "sft": ("7 + 17", [4, 13]),
        "rm": ("3", 2),
        "rlhf": ("3", 3),
        "ifrl": ("5 -> 5", [4, 1]),
        "math": ("6", 3),
        "code": ("2", 2),
        "swe": ("2 -> 2", [2, 2]),  # context-16384.jsonl, then context-32768.jsonl
    },
}


def stage_rows(stage, variables) -> int | list[int]:
    from cascade_rl.recipe import GRPOStage, RewardModelStage, SFTStage

    if isinstance(stage, SFTStage):
        return [len(load_sources(sub.data, normalise_sft, variables=variables)[0]) for sub in stage.substages]
    if isinstance(stage, RewardModelStage):
        return len(load_sources(stage.data, normalise_preference, variables=variables)[0])
    assert isinstance(stage, GRPOStage)
    if all(step.data is None for step in stage.curriculum):
        return len(load_sources(stage.data, rl_normaliser(stage.domain), variables=variables)[0])
    return [
        len(load_sources(stage.substage_data(i), rl_normaliser(stage.domain), variables=variables)[0])
        for i in range(len(stage.curriculum))
    ]


@pytest.mark.parametrize("name", sorted(RECIPE_ROWS))
def test_the_paper_recipes_read_the_releases_as_downloaded(tmp_path, monkeypatch, name):
    from cascade_rl.recipe import load_recipe
    from cascade_rl.train.stages import runner_for

    data = released_layout(tmp_path / "data")
    monkeypatch.setenv("CASCADE_DATA", str(data))
    recipe_path = Path(__file__).resolve().parents[2] / "recipes" / f"{name}.yaml"
    models = tmp_path / "models"  # the dry run checks the models the recipe names are there (issue 42)
    for model in re.findall(r"\$\{CASCADE_MODELS:-[^}]*\}/([\w.-]+)", recipe_path.read_text()):
        (models / model).mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("CASCADE_MODELS", str(models))
    result = CliRunner().invoke(app, ["run", str(recipe_path), "--dry-run"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "missing" not in result.output
    recipe = load_recipe(recipe_path)
    variables = {"run": str(tmp_path / "run"), "world": str(tmp_path / "run" / "world")}
    read = {stage.name: runner_for(stage).describe(stage, variables).rows for stage in recipe.stages}
    kept = {stage.name: stage_rows(stage, variables) for stage in recipe.stages}
    assert {stage: (read[stage], kept[stage]) for stage in read} == RECIPE_ROWS[name]
    for stage, (rows, _) in RECIPE_ROWS[name].items():  # the plan's table: # | kind | stage | rows | ...
        assert re.search(rf"│ {re.escape(stage)}\s+│ {re.escape(rows)}\s+│", result.output), (stage, rows)


def test_decontamination_and_stage_disjointness_run_on_the_releases(tmp_path, monkeypatch):
    from cascade_rl.data.loading import screening
    from cascade_rl.recipe import load_recipe
    from cascade_rl.train.decontaminate import benchmark_screen

    data = released_layout(tmp_path / "data")
    monkeypatch.setenv("CASCADE_DATA", str(data))
    recipe = load_recipe(Path(__file__).resolve().parents[2] / "recipes" / "nemotron-cascade-8b.yaml")
    math = next(stage for stage in recipe.stages if stage.name == "math")
    with screening(benchmark_screen(recipe.eval)):
        rows, report = load_sources(math.data, rl_normaliser("math"))
    assert [row["reference"]["answer"] for row in rows] == ["1", "24"]
    assert (
        report.skipped["shares a 9-gram with aime24"] == 1
        and report.examples["shares a 9-gram with aime24"] == "math.json:3"
    )

    # an RLHF prompt that is also an SFT prompt: check-disjoint reads the released folders as they are
    rlhf = data / "Nemotron-Cascade-RL-RLHF" / "train.jsonl"
    shared = {
        "prompt": [{"role": "user", "content": "Write two sentences about why owls hunt at night."}],
        "category": "general",
    }
    rlhf.write_text(rlhf.read_text() + json.dumps(shared) + "\n")
    command = [
        "data",
        "check-disjoint",
        "--sft",
        str(data / "Nemotron-Cascade-SFT-Stage-1"),
        "--rlhf",
        str(rlhf.parent),
    ]
    command += [
        "--rl",
        str(data / "Nemotron-Cascade-RL-Math" / "math.json"),
        "--rl",
        str(data / "Nemotron-Cascade-RL-Instruction-Following"),
    ]
    monkeypatch.setattr(cli_common.stdout, "width", 250)  # fixed when the console was made
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 1, result.output
    assert "train.jsonl:4" in result.output and "general.jsonl:1" in result.output
    assert "sft: 6 distinct prompts" in result.output and "rl: 11 distinct prompts" in result.output


def test_released_rows_with_an_instruction_the_verifier_lacks_are_dropped_not_stopped(tmp_path):
    """A benchmark row whose instruction has no checker is malformed (tests/data/test_convert.py);
    a released training set with one is converted with that row counted and dropped."""
    prompt = [{"role": "user", "content": "Write a line."}]
    rows = [
        {"prompt": prompt, "instruction_id_list": ["words:made_up"], "kwargs": [{}]},
        {"prompt": prompt, "instruction_id_list": ["change_case:english_lowercase"], "kwargs": [None]},
    ]
    for fmt, data in (
        ("nemotron-cascade-rl-if", rows),
        ("nemotron-cascade-2-rl", [{**row, "responses_create_params": {"input": prompt}} for row in rows]),
    ):
        source = tmp_path / f"{fmt}.jsonl"
        write_jsonl(source, data)
        output = tmp_path / f"{fmt}.out.jsonl"
        result = CliRunner().invoke(app, ["data", "convert", str(source), "-f", fmt, "-o", str(output), "-q"])
        assert result.exit_code == 0, result.output
        summary = json.loads(output.with_name(output.name + ".summary.json").read_text())["summary"]
        assert summary["kept"] == 1, fmt
        assert summary["dropped"] == {
            "unknown instruction id 'words:made_up' (no checker in cascade_rl.rewards.ifeval)": 1
        }


def test_if_and_rlhf_prompts_may_be_text_or_message_lists():
    from cascade_rl.data.released import nemotron_cascade_rl_if, nemotron_cascade_rl_rlhf

    turn = [{"role": "user", "content": "List two metals in lowercase."}]
    fields = {"instruction_id_list": ["change_case:english_lowercase"], "kwargs": None}
    for prompt in (turn[0]["content"], turn, json.dumps(turn)):
        assert nemotron_cascade_rl_if({"prompt": prompt, **fields})["prompt"] == turn
        assert nemotron_cascade_rl_rlhf({"prompt": prompt})["prompt"] == turn
    with pytest.raises(RowError, match="prompt does not end with a user turn"):
        nemotron_cascade_rl_rlhf({"prompt": [{"role": "system", "content": "Be brief."}]})


def cascade_2_layout(root: Path) -> Path:
    """Nemotron-Cascade 2's releases as `hf download` lays them out (one folder per RL config, one
    file per SFT subset), Cascade 1's RLHF prompts, and what the user builds (docs/recipes.md)."""
    sft = sample_rows("nemotron_cascade_2_sft.jsonl")
    for subset in ("chat", "math", "science", "safety", "instruction_following", "conversational_agent"):
        write_jsonl(root / "Nemotron-Cascade-2-SFT-Data" / f"{subset}.jsonl", sft)
    for subset in ("terminal_agent", "swe"):
        write_jsonl(root / "Nemotron-Cascade-2-SFT-Data" / subset / "part-0.jsonl", sft[:1])
    rl = sample_rows("nemotron_cascade_2_rl.jsonl")
    for config in ("IF-RL", "multi-domain-RL", "MOPD"):
        write_jsonl(root / "Nemotron-Cascade-2-RL-data" / config / "train.jsonl", rl)
    write_jsonl(root / "Nemotron-Cascade-RL-RLHF" / "train.jsonl", sample_rows("nemotron_cascade_rl_rlhf.jsonl"))
    write_jsonl(root / "rl" / "code.jsonl", [{"question": "Print 1.", "tests": {"inputs": [""], "outputs": ["1\n"]}}])
    write_jsonl(root / "rl" / "long-context.jsonl", [{"prompt": "What is 2 + 2?", "answer": "4", "domain": "math"}])
    swe = [
        row
        for row in map(nemotron_cascade_rl_swe, sample_rows("nemotron_cascade_rl_swe.jsonl"))
        if isinstance(row, dict)
    ]
    for limit in (16384, 24576):
        write_jsonl(root / "rl" / "swe" / f"context-{limit}.jsonl", swe[:1])
    write_jsonl(
        root / "eval" / "ifeval.jsonl",
        [{"prompt": "Say hi.", "instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{}]}],
    )
    write_jsonl(root / "eval" / "aime25.jsonl", [{"prompt": "What is 6 times 7?", "answer": "42"}])
    write_jsonl(
        root / "eval" / "livecodebench-v6.jsonl",
        [{"prompt": "Print 3.", "tests": {"inputs": [""], "outputs": ["3\n"]}}],
    )
    return root


def test_the_cascade_2_recipe_reads_its_releases_in_cascade_2s_order(tmp_path, monkeypatch):
    """Issue 45 item 3: recipes/nemotron-cascade-2.yaml dry-runs clean on the released rows, in
    Cascade 2's order, each RL config routed to its stage and each row to its own domain."""
    from cascade_rl.recipe import load_recipe

    monkeypatch.setenv("CASCADE_DATA", str(cascade_2_layout(tmp_path / "data")))
    recipe_path = Path(__file__).resolve().parents[2] / "recipes" / "nemotron-cascade-2.yaml"
    models = tmp_path / "models"
    for model in re.findall(r"\$\{CASCADE_MODELS:-[^}]*\}/([\w.-]+)", recipe_path.read_text()):
        (models / model).mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("CASCADE_MODELS", str(models))
    monkeypatch.setattr(cli_common.stdout, "width", 250)
    result = CliRunner().invoke(app, ["run", str(recipe_path), "--dry-run"])
    assert result.exit_code == 0, result.output
    recipe = load_recipe(recipe_path)
    order = ["sft", "ifrl", "multi_domain", "rlhf_teacher", "mopd", "rlhf", "long_context", "code", "swe"]
    assert [stage.name for stage in recipe.stages] == order
    stages = {stage.name: stage for stage in recipe.stages}
    # MOPD's teachers (SPEC 11): math the SFT checkpoint, chat an RLHF run from SFT (a side branch
    # with RLHF's own settings), the rest the checkpoint after IF-RL + multi-domain RL
    assert stages["rlhf_teacher"].branch_from == "sft"
    own = {"name", "branch_from", "preset"}
    assert stages["rlhf_teacher"].model_dump(exclude=own) == stages["rlhf"].model_dump(exclude=own)
    assert stages["mopd"].teachers == {
        **dict.fromkeys(("ifeval", "mcqa", "workplace", "structured_output"), "multi_domain"),
        "math": "sft",
        "preference": "rlhf_teacher",
    }
    shared = {
        "rollouts_per_prompt": 16,
        "prompts_per_batch": 128,
        "learning_rate": 3e-6,
        "temperature": 1.0,
        "top_p": 1.0,
    }
    for name in ("ifrl", "multi_domain", "rlhf", "long_context", "code", "swe"):
        assert {key: getattr(stages[name], key) for key in shared} == shared, name
        assert stages[name].dynamic_filter.enabled, name
    mopd = stages["mopd"]
    assert (mopd.prompts_per_batch, mopd.rollouts_per_prompt, tuple(mopd.mismatch_band)) == (128, 4, (0.5, 2.0))
    assert stages["rlhf"].domain == "genrm" and stages["ifrl"].curriculum[0].overlong_filter is False
    assert stages["swe"].mask_groups_at_or_below == 0.5  # and no other stage masks low groups
    assert all(stages[name].mask_groups_at_or_below is None for name in order if name not in ("swe", "mopd", "sft"))
    for stage, rows in (("ifrl", "9"), ("multi_domain", "9"), ("rlhf_teacher", "3"), ("mopd", "12"), ("rlhf", "3")):
        assert re.search(rf"│ {re.escape(stage)}\s+│ {re.escape(rows)}\s+│", result.output), (stage, rows)
