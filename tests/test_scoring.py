"""`cascade score`: every line written back in order, bad lines reported and kept, exit code."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "score-example.jsonl"


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "cascade_rl.cli", "score", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_bad_lines_are_reported_by_number_and_the_rest_is_scored(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text(
        "\n".join(
            [
                json.dumps({"domain": "math", "response": "\\boxed{4}", "answer": "4"}),
                "{oops",
                json.dumps({"domain": "astrology", "response": "x"}),
                json.dumps({"domain": "math", "response": "\\boxed{4}"}),
                json.dumps({"domain": "math", "response": "\\boxed{5}", "answer": "4"}),
            ]
        )
        + "\n"
    )
    out = tmp_path / "out.jsonl"
    result = run_cli(str(source), "-o", str(out))
    assert result.returncode == 1
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["reward"] for r in rows] == [1.0, None, None, None, 0.0]
    assert "line 2" in result.stderr and "invalid JSON" in result.stderr
    assert "line 3" in result.stderr and "astrology" in result.stderr
    assert "line 4" in result.stderr and "'answer'" in result.stderr
    assert "math" in result.stdout and "0.500" in result.stdout  # summary: mean reward of the 2 good lines


def test_shipped_example_scores_every_domain(tmp_path):
    out = tmp_path / "scored.jsonl"
    result = run_cli(str(EXAMPLES), "-o", str(out), "--workers", "2")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    by_id = {r["id"]: r["reward"] for r in rows}
    assert {r["domain"] for r in rows} >= {"math", "ifeval", "code", "swe"}
    assert by_id["math-correct-other-form"] == 1.0 and by_id["math-language-mixed"] == -1.0
    assert by_id["code-sum-correct"] == 1.0 and by_id["code-sum-wrong-answer"] == 0.0
    assert by_id["swe-identical-to-golden"] == 1.0 and by_id["swe-search-text-not-found"] == -1.0
    assert by_id["workplace-search-then-delete"] == 1.0 and by_id["workplace-deleted-another-email"] == 0.0
    assert by_id["mcqa-last-box"] == 1.0 and by_id["mcqa-no-box"] == 0.0
    assert by_id["structured-json-valid"] == 1.0 and by_id["structured-json-extra-field"] == 0.0
    for column in ("count", "mean reward", "errors", "timeouts", "lines/s"):
        assert column in result.stdout


def test_scorer_options_reach_the_scorer(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text(
        json.dumps(
            {
                "domain": "math",
                "prompt": "What is 6 times 7?",
                "response": "<think>答案是四十二</think>\\boxed{42}",
                "answer": "42",
            }
        )
        + "\n"
    )
    out = tmp_path / "out.jsonl"
    assert run_cli(str(source), "-o", str(out), "--option", "math.language_penalty=-0.5").returncode == 0
    assert json.loads(out.read_text())["reward"] == -0.5


def test_workers_size_the_code_sandbox_pool(tmp_path, monkeypatch):
    """``cascade score --workers N``: batch scorers (code) get N too, not a pool per CPU."""
    import cascade_rl.rewards.code as code
    from cascade_rl.scoring import score_file

    asked = []
    shared = code.shared_pool
    monkeypatch.setattr(code, "shared_pool", lambda workers=None: asked.append(workers) or shared(workers))
    program = "<think>add</think>\n```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    rows = [{"domain": "code", "response": program, "tests": {"inputs": ["1 2\n"], "outputs": ["3\n"]}}] * 2
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    report = score_file(source, target, workers=3)
    assert asked == [3] and report.domains["code"].reward_sum == 2


def test_lines_a_scorer_cannot_score_are_summarised_and_fail_unless_allowed(tmp_path):
    """An instruction id with no checker (or a tool_call row with a malformed reference) used to
    score 0 silently with exit 0; now a scorer that raises gives no verdict: the line is written
    with reward null and the reason, summarised by reason, and the exit code is 1."""
    source = tmp_path / "in.jsonl"
    rows = [
        {
            "domain": "ifeval",
            "response": "Imagine a calm sea.",
            "instruction_id_list": ["words:start_verb"],
            "kwargs": [{}],
        },
        {"domain": "ifeval", "response": "Hello.", "instruction_id_list": ["words:made_up"], "kwargs": [{}]},
        {"domain": "math", "response": "\\boxed{4}", "answer": "4"},
        {
            "domain": "ifeval",
            "response": "Hi.",
            "instruction_id_list": ["words:made_up", "format:title_case"],
            "kwargs": [{}, {}],
        },
        {"domain": "tool_call", "response": "<tool_call>{}</tool_call>", "expected_calls": "not a list of calls"},
        # verdicts on the response, not scoring failures: unfinished thinking is a plain 0
        {"domain": "multiple_choice", "response": "<think>A or B", "answer": "B"},
    ]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "out.jsonl"
    result = run_cli(str(source), "-o", str(out), "--workers", "1")
    assert result.returncode == 1, result.stderr
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["reward"] for r in scored] == [1.0, None, 1.0, None, None, 0.0]
    assert "unknown instruction id 'words:made_up'" in scored[1]["details"]["error"]
    assert scored[1]["masked"].startswith("scorer raised ValueError") and "masked" not in scored[0]
    assert "3 response(s) without a verdict" in result.stderr
    assert "2 x scorer raised ValueError: unknown instruction id 'words:made_up'" in result.stderr
    assert "line(s) 2, 4" in result.stderr and "line(s) 5" in result.stderr
    assert "line(s) 6" not in result.stderr

    allowed = run_cli(str(source), "-o", str(out), "--workers", "1", "--allow-errors")
    assert allowed.returncode == 0, allowed.stderr
    assert "3 response(s) without a verdict" in allowed.stderr


def test_a_group_of_responses_is_scored_together_and_masked_responses_are_reported(tmp_path):
    """A line with `responses` (a prompt's group) gets `rewards`, one per response; a genrm group
    is judged in pairs by a served judge, and a response the judge could not judge is masked."""
    sys.path.insert(0, str(Path(__file__).parent / "llm"))
    from llm_helpers import free_port, wait_for_http

    port = free_port()
    judge = subprocess.Popen([sys.executable, str(Path(__file__).parent / "rewards" / "genrm_judge.py"), str(port)])
    try:
        wait_for_http(f"http://127.0.0.1:{port}/stats", judge)
        prompt = [{"role": "user", "content": "What is 2 + 2?"}]
        rows = [
            {"domain": "genrm", "prompt": prompt, "responses": ["4 quality=5", "four quality=2", "5 quality=1"]},
            {"domain": "genrm", "prompt": "2 + 2?", "responses": ["quality=4", "quality=2 FAIL", "quality=3", "x"]},
            {"domain": "math", "answer": "4", "responses": ["\\boxed{4}", "\\boxed{5}"]},
            {"domain": "genrm", "prompt": "hi", "responses": "not a list"},
        ]
        source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
        source.write_text("".join(json.dumps(row) + "\n" for row in rows))
        options = ["--option", f"genrm.judge=http://127.0.0.1:{port}/v1#judge", "--option", "genrm.strategy=circular"]
        result = run_cli(str(source), "-o", str(out), *options)
    finally:
        judge.terminate()
        judge.wait(timeout=10)
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert scored[0]["rewards"] == [5.0, 2.0, 1.0] and "masked" not in scored[0]
    assert [d["judge_calls"] for d in scored[0]["details"]] == [3, 3, 3]
    assert scored[1]["rewards"] == [4.0, None, 3.5, 2.75]  # (2,3) a tie, ranking 3: 3.5 and 2.5
    assert scored[1]["masked"][0] is None and "HTTP 500" in scored[1]["masked"][1]
    assert scored[2]["rewards"] == [1.0, 0.0]
    assert scored[3]["reward"] is None and "'responses' must be a non-empty list" in scored[3]["details"]["error"]
    assert result.returncode == 1
    assert "1 response(s) without a verdict" in result.stderr and "line(s) 2" in result.stderr
    table = result.stdout
    assert "genrm" in table and "3.042" in table  # the mean of the six judged responses: 18.25 / 6


def test_multi_turn_rows_are_judged_by_their_calls_and_unreadable_rows_are_named(tmp_path):
    source = tmp_path / "in.jsonl"
    reference = [{"name": "calendar_delete_event", "arguments": '{"event_id": "00000013"}'}]
    lines = [
        {"domain": "workplace", "ground_truth": reference, "calls": [{"name": "calendar_delete_event",
                                                                      "arguments": {"event_id": "00000013"}}]},
        {"domain": "workplace", "ground_truth": reference},
        {"domain": "workplace", "ground_truth": [{"name": "x", "arguments": "{oops"}], "calls": []},
        {"domain": "structured_output", "schema_str": "{oops", "response": "{}"},
        {"domain": "mcqa", "options": [{"A": "x"}], "expected_answer": "B", "response": "\\boxed{B}"},
    ]  # fmt: skip
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out.jsonl"
    result = run_cli(str(source), "-o", str(out))
    assert result.returncode == 1
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["reward"] for r in rows] == [1.0, None, None, None, None]
    errors = [r["details"]["error"] for r in rows[1:]]
    assert errors[0] == "missing field 'response' or 'calls'"
    assert errors[1] == "ground_truth[0].arguments is not a JSON object"
    assert errors[2].startswith("schema_str is not JSON")
    assert errors[3] == "expected_answer 'B' is not one of the options' letters"


def test_code_that_cannot_be_isolated_stops_scoring_with_one_line_unless_opted_in(tmp_path):
    """No bubblewrap on PATH (issue 40): `cascade score` refuses to run the programs, one line,
    exit 2, nothing written; CASCADE_SANDBOX=rlimits is the opt-in."""
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    row = {"domain": "code", "response": "```python\nprint(2)\n```", "tests": {"inputs": ["1"], "outputs": ["2"]}}
    source.write_text(json.dumps(row) + "\n")
    bare = {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": str(tmp_path), "COLUMNS": "200"}
    command = [sys.executable, "-m", "cascade_rl.cli", "score", str(source), "-o", str(target)]
    refused = subprocess.run(command, capture_output=True, text=True, timeout=300, env=bare)
    assert refused.returncode == 2 and not target.exists(), refused.stderr
    assert refused.stderr.startswith("error: bubblewrap (bwrap) is not installed") and "Traceback" not in refused.stderr
    assert "CASCADE_SANDBOX=rlimits" in refused.stderr
    opted = subprocess.run(
        command, capture_output=True, text=True, timeout=300, env={**bare, "CASCADE_SANDBOX": "rlimits"}
    )
    assert opted.returncode == 0, opted.stderr
    assert json.loads(target.read_text())["details"]["isolation"] == "rlimits"


def test_json_that_is_not_an_object_or_has_fields_of_the_wrong_type_is_reported_not_a_crash(tmp_path):
    """Issue 42: `[1,2]` or `42` crashed the command (TypeError) and nothing was written."""
    good = json.dumps({"domain": "math", "response": "\\boxed{4}", "answer": "4"})
    broken = '{"domain": "math", "response": "\\\\boxed{4}", "answer": "4", "oops": }'
    lines = [
        good,
        "[1, 2]",
        "42",
        '"text"',
        "null",
        json.dumps({"domain": "math", "response": 4, "answer": "4"}),
        json.dumps({"domain": ["math"], "response": "x", "answer": "4"}),
        json.dumps({"domain": "math", "response": "x", "prompt": 7, "answer": "4"}),
        broken,
        good,
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    result = run_cli(str(source), "-o", str(out))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["reward"] for r in rows] == [1.0] + [None] * 8 + [1.0]
    assert rows[1] == {"raw": "[1, 2]", "reward": None, "details": {"error": rows[1]["details"]["error"], "line": 2}}
    for number, words in [
        (2, "got an array"),
        (3, "got a number"),
        (4, "got a string"),
        (5, "got null"),
        (6, "'response' must be a string, got a number"),
        (7, "'domain' must be a string, got an array"),
        (8, "'prompt' must be a string or a list of messages, got a number"),
        (9, f"invalid JSON: Expecting value (column {broken.rindex('}') + 1})"),  # where the value is missing
    ]:
        assert f"line {number}: " in result.stderr and words in result.stderr, (number, words, result.stderr)
    assert "8 bad line(s)" in result.stderr


@pytest.mark.parametrize(
    "option, message",
    [
        ("math.language_penalty=abc", "--option math.language_penalty: Input should be a valid number"),
        ("math.languge_penalty=-1", "--option math.languge_penalty: unknown option; math accepts: language_penalty"),
        ("maths.timeout=1", "--option maths.timeout: unknown reward domain 'maths'"),
        ("math=1", "--option 'math=1': expected DOMAIN.KEY=VALUE"),
    ],
)
def test_options_are_checked_before_any_line_is_scored(tmp_path, option, message):
    """Issue 42: an option value that did not parse failed only on the rows that used it, without
    naming the option; now the command refuses it (exit 2) and writes nothing."""
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"domain": "math", "response": "\\boxed{4}", "answer": "4"}) + "\n")
    out = tmp_path / "out.jsonl"
    result = run_cli(str(source), "-o", str(out), "--option", option)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert not out.exists()


def test_an_option_a_domain_of_the_file_needs_is_asked_for_up_front(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"domain": "preference", "prompt": "Hi", "response": "Hello"}) + "\n")
    result = run_cli(str(source), "-o", str(tmp_path / "out.jsonl"))
    assert result.returncode == 2
    assert "--option preference.reward_model: missing" in result.stderr


def test_a_file_saved_with_a_byte_order_mark_is_read(tmp_path):
    """A BOM before the first line made it "invalid JSON (column 1)" though the line was valid."""
    source = tmp_path / "in.jsonl"
    source.write_bytes(
        b"\xef\xbb\xbf" + json.dumps({"domain": "math", "response": "\\boxed{4}", "answer": "4"}).encode()
    )
    out = tmp_path / "out.jsonl"
    assert run_cli(str(source), "-o", str(out)).returncode == 0
    assert json.loads(out.read_text())["reward"] == 1.0
