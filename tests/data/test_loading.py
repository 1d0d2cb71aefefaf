import json
import os
from pathlib import Path

import pytest

from cascade_rl.data.loading import load_sources, normalise_preference, normalise_sft, rl_normaliser, upsample
from cascade_rl.recipe import DataSource

REAL_DATA = Path(os.environ.get("CASCADE_REAL_DATA") or Path(__file__).resolve().parents[3] / "shared" / "real-data")


def write(path, lines):
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return str(path)


def test_malformed_rows_are_counted_and_skipped_with_reasons(tmp_path):
    path = write(
        tmp_path / "rl.jsonl",
        [
            {"prompt": "1+1?", "domain": "math", "answer": "2"},
            "{not json",
            {"prompt": "x", "domain": "nope"},
            {"prompt": "2+2?", "domain": "math"},
            {"prompt": [{"role": "user", "content": "q"}], "domain": "code", "tests": {"inputs": [], "outputs": []}},
            [1, 2],
        ],
    )
    rows, report = load_sources([DataSource(path=path)], rl_normaliser(None))
    assert [r["domain"] for r in rows] == ["math", "code"]
    assert report.read == 6 and report.kept == 2
    assert report.skipped["invalid JSON"] == 1
    assert report.skipped["unknown reward domain 'nope'"] == 1
    assert report.skipped["domain math needs field 'answer'"] == 1
    assert "rl.jsonl:2" in report.summary()


def test_rows_whose_reference_cannot_be_read_are_skipped_with_the_field_named(tmp_path):
    prompt = [{"role": "user", "content": "Delete my last email from kofi"}]
    path = write(
        tmp_path / "rl.jsonl",
        [
            {
                "prompt": prompt,
                "domain": "workplace",
                "ground_truth": [{"name": "email_delete_email", "arguments": "{}"}],
            },
            {"prompt": prompt, "domain": "workplace", "ground_truth": "not json"},
            {"prompt": prompt, "domain": "structured_output", "schema_str": '{"type": 3}'},
            {"prompt": prompt, "domain": "mcqa", "options": [{"A": "x"}, {"B": "y"}], "expected_answer": "C"},
        ],
    )
    rows, report = load_sources([DataSource(path=path)], rl_normaliser(None))
    assert [r["domain"] for r in rows] == ["workplace"] and report.kept == 1
    reasons = set(report.skipped)
    assert any(reason.startswith("ground_truth is not valid JSON") for reason in reasons)
    assert any(reason.startswith("schema_str is not a valid JSON schema") for reason in reasons)
    assert "expected_answer 'C' is not one of the options' letters" in reasons


def test_field_mapping_and_stage_domain(tmp_path):
    path = write(tmp_path / "m.jsonl", [{"problem": "What is 3?", "expected_answer": "3"}])
    source = DataSource(path=path, fields={"prompt": "problem", "answer": "expected_answer"})
    rows, _ = load_sources([source], rl_normaliser("math"))
    assert rows[0]["prompt"] == [{"role": "user", "content": "What is 3?"}]
    assert rows[0]["reference"]["answer"] == "3"


def test_upsampling_whole_and_fractional_factors():
    rows = [{"i": i} for i in range(10)]
    assert len(upsample(rows, 3.0, 0)) == 30
    assert len(upsample(rows, 1.5, 0)) == 15
    assert upsample(rows, 1.5, 0) == upsample(rows, 1.5, 0)


def test_helpsteer3_rows_become_pairs_and_ties_are_dropped():
    pair = normalise_preference(
        {"context": [{"role": "user", "content": "q"}], "response1": "a", "response2": "b", "overall_preference": 2}
    )
    assert pair["chosen"][0]["content"] == "b" and pair["rejected"][0]["content"] == "a"
    with pytest.raises(ValueError, match="tie"):
        normalise_preference({"context": "q", "response1": "a", "response2": "b", "overall_preference": 0})


def test_sft_rows_keep_modes_and_serialise_tool_arguments():
    row = normalise_sft(
        {
            "messages": [
                {"role": "user", "content": "weather", "mode": "think"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"function": {"name": "w", "arguments": {"c": "P"}}}],
                },
            ],
            "tools": [{"name": "w"}],
        }
    )
    assert row["messages"][0]["mode"] == "think"
    assert row["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"c": "P"}'
    assert json.loads(row["tools"]) == [{"name": "w"}]
    with pytest.raises(ValueError, match="no assistant"):
        normalise_sft({"messages": [{"role": "user", "content": "x"}]})


def test_rl_rows_show_their_tools_in_the_prompt_grpo_renders(tmp_path, tiny_checkpoint):
    """GRPO (train/grpo.py ``build_rl_data``: rl_normaliser, then with_mode) renders each prompt
    with the tokenizer's chat template and one global ``tools`` list (none here): a row's own
    tools reach the model through its system message."""
    from transformers import AutoTokenizer

    from cascade_rl.chat import render, with_mode

    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    expected_calls = [{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    path = write(
        tmp_path / "rl.jsonl",
        [
            {"prompt": "Weather in Oslo?", "domain": "tool_call", "tools": tools, "expected_calls": expected_calls},
            {"prompt": "2+2?", "domain": "math", "answer": "4"},
            {"prompt": "x", "domain": "tool_call", "tools": [["bad"]], "expected_calls": []},
        ],
    )
    rows, report = load_sources([DataSource(path=path)], rl_normaliser(None))
    assert report.skipped == {"tools: tools must be a list of JSON schema objects, got \"[['bad']]\"": 1}
    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint)
    texts = [
        tokenizer.apply_chat_template(
            [with_mode(row["prompt"], "no_think")], tools=None, add_generation_prompt=True, tokenize=False
        )[0]
        for row in rows
    ]
    user = [{"role": "user", "content": "Weather in Oslo?", "mode": "no_think"}]
    assert texts[0] == render(user, tools, add_generation_prompt=True)
    assert "<tools>" in texts[0] and '"get_weather"' in texts[0]
    assert "<tools>" not in texts[1]
    assert rows[0]["reference"]["expected_calls"] == expected_calls


def test_field_mapping_reads_nested_fields_of_nemo_gym_rows(tmp_path):
    """A recipe can read NVIDIA's NeMo Gym rows inline: dotted paths in DataSource.fields."""
    row = {
        "responses_create_params": {"input": [{"role": "user", "content": "Print 2."}]},
        "verifier_metadata": {"unit_tests": {"inputs": ["\n"], "outputs": ["2\n"]}},
    }
    path = write(tmp_path / "gym.jsonl", [row])
    fields = {"prompt": "responses_create_params.input", "tests": "verifier_metadata.unit_tests"}
    rows, report = load_sources([DataSource(path=path, fields=fields)], rl_normaliser("code"))
    assert report.kept == 1, report.summary()
    assert rows[0]["prompt"] == [{"role": "user", "content": "Print 2."}]
    assert rows[0]["reference"]["tests"] == {"inputs": ["\n"], "outputs": ["2\n"]}


def test_a_source_path_may_name_a_directory_a_glob_or_a_json_list(tmp_path):
    """Released datasets are downloaded as folders of shards (math/math_1.jsonl, ...), JSON lists
    (math.json) or Parquet files: a data source reads them as they are."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cascade_rl.data.rows import count_rows, data_files

    shards = tmp_path / "data" / "math"
    shards.mkdir(parents=True)
    write(shards / "math_2.jsonl", [{"prompt": "2+2?", "domain": "math", "answer": "4"}])
    write(shards / "math_1.jsonl", [{"prompt": "1+1?", "domain": "math", "answer": "2"}])
    (shards / ".cache").mkdir()
    write(shards / ".cache" / "stale.jsonl", [{"prompt": "no", "domain": "math", "answer": "0"}])
    (shards / "README.md").write_text("not data\n")
    listed = tmp_path / "data" / "math.json"
    listed.write_text(json.dumps([{"prompt": "3+3?", "domain": "math", "answer": "6"}, "not a row"], indent=1))
    pq.write_table(
        pa.Table.from_pylist([{"prompt": "4+4?", "domain": "math", "answer": "8"}]), tmp_path / "data" / "m.parquet"
    )

    assert data_files(shards) == [
        shards / "math_1.jsonl",
        shards / "math_2.jsonl",
    ]  # sorted, hidden and non-data skipped
    assert [p.name for p in data_files(tmp_path / "data" / "math*")] == ["math_1.jsonl", "math_2.jsonl", "math.json"]
    assert data_files(tmp_path / "data" / "none*") == []
    assert count_rows(listed) == 2
    answers = {}
    for path in (shards, tmp_path / "data" / "math*", tmp_path / "data" / "*.parquet", listed):
        rows, report = load_sources([DataSource(path=str(path))], rl_normaliser(None))
        answers[str(path)] = [r["reference"]["answer"] for r in rows]
        if path == listed:
            assert (
                report.skipped == {"row is not a JSON object": 1}
                and report.examples["row is not a JSON object"] == "math.json:2"
            )
    assert list(answers.values()) == [["2", "4"], ["2", "4", "6"], ["8"], ["6"]]
    with pytest.raises(FileNotFoundError, match="data file not found"):
        load_sources([DataSource(path=str(tmp_path / "data" / "none*"))], rl_normaliser(None))


@pytest.mark.skipif(not (REAL_DATA / "gsm8k").is_dir(), reason="the real public data (shared/real-data) is not here")
def test_drop_topics_leaves_math_and_code_prompts_out_of_a_source_and_counts_them(tmp_path):
    """SPEC 6: RLHF prompts without math and competitive programming. Real GSM8K and MBPP
    training prompts among general ones: the rule of `cascade data classify` drops them as the
    source loads, each counted by topic, before ``limit`` (which counts the rows left)."""
    real = REAL_DATA
    math = [json.loads(line)["question"] for line in (real / "gsm8k" / "train.jsonl").open()][:12]
    code = [r["text"] for r in map(json.loads, (real / "mbpp" / "mbpp.jsonl").open()) if 601 <= r["task_id"] <= 610]
    general = [
        "Write a short poem about autumn leaves, in three stanzas.",
        "What are some good ways to stay focused while working from home?",
        "Explain the difference between a virus and a bacterium to a ten-year-old.",
        "Draft a polite email asking my landlord to fix the heating.",
    ]
    rows = [
        {"prompt": text, "domain": "preference"} for text in [*math[:6], *general[:2], *code, *general[2:], *math[6:]]
    ]
    path = write(tmp_path / "rlhf.jsonl", rows)
    kept, report = load_sources([DataSource(path=path, drop_topics=["math", "code"])], rl_normaliser(None))
    assert [row["prompt"][-1]["content"] for row in kept] == general
    assert dict(report.skipped) == {"topic math": 12, "topic code": 10}
    assert report.read == 26 and report.kept == 4
    limited, _ = load_sources([DataSource(path=path, drop_topics=["math", "code"], limit=3)], rl_normaliser(None))
    assert [row["prompt"][-1]["content"] for row in limited] == general[:3]
    only_math, report = load_sources([DataSource(path=path, drop_topics=["math"])], rl_normaliser(None))
    assert len(only_math) == 14 and dict(report.skipped) == {"topic math": 12}
