"""`evaluate` on benchmark files: local generate and a real `transformers serve` give the same
numbers, the server sees at most the concurrency limit, an interrupted run resumes, IFEval's four
accuracies, LiveCodeBench date windows, ArenaHard-style judged win rates with position swap, and
bad inputs named before anything is generated."""

import json
import logging
import re
from pathlib import Path

import pytest
from eval_assets import ANSWER_C
from llm_helpers import ProxyServer

from cascade_rl.eval.benchmarks import EvalSettings, evaluate, in_window, load_benchmark, parse_date
from cascade_rl.llm.base import GenerationError, Sampling
from cascade_rl.recipe import Benchmark

DATA = Path(__file__).resolve().parent / "data"


class Scripted:
    """A generator answering from ``reply(messages, sample_index)``; records every call."""

    def __init__(self, reply, fail_on: str | None = None):
        self.reply, self.fail_on, self.calls = reply, fail_on, []

    def generate(self, messages, sampling=Sampling()):
        n, text = sampling.n, messages[-1]["content"]
        if self.fail_on and self.fail_on in text:
            raise GenerationError(f"server went away at {self.fail_on!r}")
        self.calls.append(text)
        return [self.reply(messages, i) for i in range(n)]

    async def agenerate(self, messages, sampling=Sampling()):
        return self.generate(messages, sampling)


def bench(name, data, **fields):
    return Benchmark(name=name, data=str(DATA / data), max_new_tokens=64, **fields)


def samples_of(out_dir, name):
    return [json.loads(line) for line in (out_dir / "eval-samples" / f"{name}.jsonl").read_text().splitlines()]


# ------------------------------------------------------------------ backends


def test_served_and_local_evaluation_agree_within_the_concurrency_limit(answer_c_model, transformers_server, tmp_path):
    mmlu = bench("mmlu", "mmlu.jsonl", k=2)  # gold C, B, B, C: a model that always answers C scores 50
    local = evaluate(answer_c_model, [mmlu], tmp_path / "local")
    with ProxyServer(transformers_server, delay=0.2) as proxy:
        served = evaluate(
            f"{proxy.base_url}#{answer_c_model}", [mmlu], tmp_path / "served", settings=EvalSettings(max_concurrency=2)
        )
        assert proxy.max_in_flight == 2  # 8 samples requested at once, never more than 2 in flight
        assert len(proxy.bodies) >= 8 and all(body["max_tokens"] == 64 for body in proxy.bodies)
    assert local["mmlu"]["value"] == served["mmlu"]["value"] == 50.0
    assert local["mmlu"]["extra"]["stderr"] == pytest.approx(100 * (1 / 3) ** 0.5 / 2)  # per prompt 1, 0, 0, 1
    for out in ("local", "served"):
        records = samples_of(tmp_path / out, "mmlu")
        assert [r["response"] for r in records] == [ANSWER_C] * 8
        assert [r["details"]["extracted"] for r in records] == ["C"] * 8
        assert [r["reward"] for r in records] == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0]


def test_an_interrupted_evaluation_resumes_with_only_the_missing_prompts(tmp_path):
    mmlu = bench("mmlu", "mmlu.jsonl", k=2)
    failing = Scripted(lambda messages, i: "Answer: C", fail_on="7 * 8")  # the third prompt
    with pytest.raises(GenerationError, match="server went away"):
        evaluate(failing, [mmlu], tmp_path, settings=EvalSettings(batch_size=2))  # one prompt per call
    assert len(failing.calls) == 2 and not (tmp_path / "eval.json").exists()
    resumed = Scripted(lambda messages, i: "Answer: C")
    result = evaluate(resumed, [mmlu], tmp_path, settings=EvalSettings(batch_size=2))
    assert len(resumed.calls) == 2 and "7 * 8" in resumed.calls[0]  # prompts 3 and 4 only
    assert result["mmlu"]["value"] == 50.0 and len(samples_of(tmp_path, "mmlu")) == 8
    other_settings = Scripted(lambda messages, i: "Answer: C")
    evaluate(other_settings, [bench("mmlu", "mmlu.jsonl", k=1)], tmp_path, settings=EvalSettings(batch_size=2))
    assert len(other_settings.calls) == 4  # k changed: nothing reused


# ------------------------------------------------------------------ scorers through the engine

IF_ANSWERS = {
    "haiku": "the autumn leaves drift down to the quiet ground and the wind carries them away",  # followed
    "cat": "Sure, here it is:\nThe cat sleeps soundly.",  # a comma: strict fails; loose drops the first line
    "title": "<<Ode>>\nA short ode.\nIs there anything else I can help with?\n**",  # ends with ** (strict)
}


def if_reply(messages, i):
    return next(answer for key, answer in IF_ANSWERS.items() if key in messages[-1]["content"].lower())


def test_ifeval_reports_prompt_and_instruction_level_strict_and_loose(tmp_path):
    result = evaluate(Scripted(if_reply), [bench("ifeval", "ifeval.jsonl", k=1, mode="no_think")], tmp_path)
    extra = result["ifeval"]["extra"]
    # strict: [T], [F, T], [T, F]; loose: every instruction followed
    assert result["ifeval"]["value"] == pytest.approx(100 / 3)
    assert extra["prompt_strict"] == pytest.approx(100 / 3) and extra["prompt_loose"] == 100.0
    assert extra["instruction_strict"] == pytest.approx(60.0) and extra["instruction_loose"] == 100.0
    assert extra["unscored"] == 0.0


def test_multiple_choice_and_tool_calls_with_several_acceptable_values(tmp_path):
    def reply(messages, i):
        text = messages[-1]["content"]
        if "weather" in text:
            return '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris, France"}}\n</tool_call>'
        if "joke" in text:
            return "Why did the chicken cross the road?"
        return "<think>Paris</think>The answer is \\boxed{C}." if "France" in text else "<think>?</think>Answer: A"

    result = evaluate(Scripted(reply), [bench("bfcl", "bfcl.jsonl", k=1), bench("mmlu", "mmlu.jsonl", k=1)], tmp_path)
    assert result["bfcl"]["value"] == 100.0
    assert result["mmlu"]["value"] == 25.0


# ------------------------------------------------------------------ date windows


def test_livecodebench_windows_keep_the_problems_of_their_months(tmp_path):
    program = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"  # solves the sum problems only
    generator = Scripted(lambda messages, i: program)
    v5 = bench("lcb-v5", "livecodebench.jsonl", k=1, since="2024-08-01", until="2025-02-01")
    v6 = bench("lcb-v6", "livecodebench.jsonl", k=1, since="2024-08-01", until="2025-05-01")
    result = evaluate(generator, [v5, v6], tmp_path)
    # v5: the Sept sum and Jan product problems; Feb 1 at noon is after the window's midnight
    assert [r["id"] for r in samples_of(tmp_path, "lcb-v5")] == ["lcb-2024-09", "lcb-2025-01"]
    assert result["lcb-v5"]["value"] == 50.0
    assert [r["id"] for r in samples_of(tmp_path, "lcb-v6")] == [
        "lcb-2024-09",
        "lcb-2025-01",
        "lcb-2025-02-01",
        "lcb-2025-04",
    ]
    assert result["lcb-v6"]["value"] == 50.0


def test_rows_without_a_readable_date_are_counted_and_skipped(tmp_path, caplog):
    rows = (DATA / "livecodebench.jsonl").read_text().splitlines()
    broken = [json.loads(rows[1]) | {"contest_date": "sometime"}, {k: v for k, v in json.loads(rows[2]).items()}]
    del broken[1]["contest_date"]
    path = tmp_path / "lcb.jsonl"
    path.write_text("\n".join(rows + [json.dumps(row) for row in broken]) + "\n")
    window = Benchmark(name="lcb", data=str(path), since="2024-08-01", until="2025-02-01")
    with caplog.at_level(logging.INFO):
        kept = load_benchmark(window)
    assert [row["id"] for row in kept] == ["lcb-2024-09", "lcb-2025-01"]
    assert "2 of 8 rows kept" in caplog.text
    assert "2 no readable contest_date" in caplog.text and "lcb.jsonl:7" in caplog.text
    assert "4 contest_date outside 2024-08-01 to 2025-02-01" in caplog.text


@pytest.mark.parametrize(
    "value, when",
    [
        ("2024-08-03", "2024-08-03 00:00:00"),
        ("2024-08-03T12:00:00", "2024-08-03 12:00:00"),
        ("2024-08-03 12:00:00Z", "2024-08-03 12:00:00"),
        (1722643200, "2024-08-03 00:00:00"),
    ],
)
def test_dates_are_read_in_common_forms(value, when):
    assert str(parse_date(value)) == when


def test_window_bounds_are_midnights():
    from datetime import date

    start, end = date(2024, 8, 1), date(2025, 2, 1)
    assert in_window(parse_date("2024-08-01"), start, end) and in_window(parse_date("2025-02-01"), start, end)
    assert not in_window(parse_date("2025-02-01T00:00:01"), start, end)
    assert not in_window(parse_date("2024-07-31T23:59:59"), start, end)
    assert in_window(parse_date("1999-01-01"), None, None)


# ------------------------------------------------------------------ arena

_ANSWER = re.compile(r"<\|The Start of Assistant (A|B)'s Answer\|>\n(.*?)\n<\|The End of", re.S)


def content_judge(unparsed_for: str | None = None):
    """Prefers an answer that says 'good' (strongly when it is B), else a tie."""

    def reply(messages, i):
        answers = dict(_ANSWER.findall(messages[-1]["content"]))
        if unparsed_for and unparsed_for in answers["A"]:
            return "I cannot decide."
        good = {side for side, text in answers.items() if "good" in text}
        verdict = "B>>A" if good == {"B"} else "A>B" if good == {"A"} else "A=B"
        return f"<think>compare</think>My final verdict is: [[{verdict}]]"

    return reply


def policy(messages, i):
    return "<think>hmm</think>A good answer." if "recursion" in messages[-1]["content"] else "Meh."


def arena_bench(**fields):
    fields.setdefault("baseline", str(DATA / "arenahard_baseline.jsonl"))
    return bench("arena-hard", "arenahard.jsonl", kind="arena", k=1, **fields)


RAW = {"options": {"style_control": False}}


def test_judged_win_rate_with_position_swap_and_strong_verdicts(tmp_path):
    judge = Scripted(content_judge())
    result = evaluate(Scripted(policy), [arena_bench(**RAW)], tmp_path, judge=judge)["arena-hard"]
    # q1: as B "[[B>>A]]" (win, weight 3), as A "[[A>B]]" (win, 1); q2: two ties -> (3 + 1 + 0.5 + 0.5) / 6
    assert result["metric"] == "win rate" and result["value"] == pytest.approx(500 / 6)
    assert result["extra"]["unparsed_games"] == 0 and result["extra"]["inconsistent_pairs"] == 0.0
    assert result["extra"]["stderr"] == pytest.approx(25.0)  # per prompt 100 and 50
    assert len(judge.calls) == 4  # two games per answer
    first = judge.calls[0]
    # the judge sees the answer without its thinking, the baseline from the ArenaHard file, the question
    assert "Explain recursion to a child." in first and "<think>" not in first
    assert "Recursion is when something is defined in terms of itself." in first
    records = samples_of(tmp_path, "arena-hard")
    assert records[0]["verdict_answer_as_b"] == "B>>A" and records[0]["verdict_answer_as_a"] == "A>B"


def test_judgements_without_a_verdict_are_no_games(tmp_path):
    judge = Scripted(content_judge(unparsed_for="Meh."))  # q2's game with the answer as A has no label
    result = evaluate(Scripted(policy), [arena_bench(**RAW)], tmp_path, judge=judge)["arena-hard"]
    assert result["extra"]["unparsed_games"] == 1 and result["extra"]["games"] == 3
    assert result["value"] == pytest.approx(100 * 4.5 / 5)


def test_a_served_judge_that_prefers_the_first_position_gives_fifty_percent(
    first_position_judge, transformers_server, tmp_path
):
    judge = f"{transformers_server}#{first_position_judge}"
    result = evaluate(Scripted(policy), [arena_bench(judge=judge)], tmp_path)["arena-hard"]
    assert result["value"] == pytest.approx(50.0)  # wins as A, loses as B: position swap cancels the bias
    assert result["metric"] == "win rate (style controlled)" and result["extra"]["raw_win_rate"] == 50.0
    assert result["extra"]["inconsistent_pairs"] == 100.0 and result["extra"]["games"] == 4


def test_style_control_takes_out_wins_bought_with_length(tmp_path):
    """A judge that prefers the clearly longer answer (else the one shown first), and a model
    whose answers are longer on most prompts: 60% raw wins, about even once length is a
    covariate (the model is no better than the baseline, only longer)."""
    lengths = [100, 90, 80, 70, 45, 42, 38, 36, 20, 25]  # words; the baseline has 40
    path = tmp_path / "arena.jsonl"
    rows = [{"id": f"q{i}", "prompt": f"question {i}", "baseline": " ".join(["w"] * 40)} for i in range(len(lengths))]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))

    def answer(messages, i):
        return " ".join(["w"] * lengths[int(messages[-1]["content"].split()[-1])])

    def clearly_longer_wins(messages, i):
        a, b = (len(text.split()) for _, text in sorted(_ANSWER.findall(messages[-1]["content"])))
        return "[[B>A]]" if abs(a - b) / (a + b) > 0.2 and b > a else "[[A>B]]"

    spec = Benchmark(name="a", data=str(path), kind="arena", k=1)
    result = evaluate(Scripted(answer), [spec], tmp_path / "out", judge=Scripted(clearly_longer_wins))["a"]
    assert result["extra"]["raw_win_rate"] == pytest.approx(60.0)
    assert result["value"] == pytest.approx(50.0, abs=3.0)


def test_baselines_from_rows_and_missing_ones_named_before_generation(tmp_path):
    rows = [json.loads(line) for line in (DATA / "arenahard.jsonl").read_text().splitlines()]
    path = tmp_path / "arena.jsonl"
    path.write_text("".join(json.dumps(row | {"baseline": "A good baseline."}) + "\n" for row in rows))
    given = Benchmark(name="a", data=str(path), kind="arena", k=1, **RAW)
    result = evaluate(Scripted(policy), [given], tmp_path / "out", judge=Scripted(content_judge()))["a"]
    # q1: both answers say 'good': two ties; q2: the good baseline wins as A (1) and as B (>>, 3)
    assert result["value"] == pytest.approx(100 * (0.5 + 0.5) / (1 + 1 + 1 + 3))
    path.write_text(json.dumps(rows[0]) + "\n" + json.dumps(rows[1] | {"baseline": "x"}) + "\n")
    generator = Scripted(policy)
    with pytest.raises(ValueError, match=r"benchmark a: row 0 \(id 'q1'\) has no baseline text"):
        evaluate(generator, [given], tmp_path / "out2", judge=Scripted(content_judge()))
    partial = tmp_path / "baseline.jsonl"
    partial.write_text(json.dumps({"question_id": "q1", "response": "x"}) + "\n")
    with pytest.raises(ValueError, match=r"1 row\(s\) have no answer in .*baseline.jsonl \(first: id 'q2'\)"):
        evaluate(generator, [arena_bench(baseline=str(partial))], tmp_path / "out3", judge=Scripted(content_judge()))
    assert generator.calls == []


def test_every_benchmark_file_is_read_before_generation(tmp_path):
    generator = Scripted(lambda messages, i: "Answer: C")
    missing = Benchmark(name="gone", data=str(tmp_path / "nowhere.jsonl"))
    with pytest.raises(FileNotFoundError, match="nowhere.jsonl"):
        evaluate(generator, [bench("mmlu", "mmlu.jsonl", k=1), missing], tmp_path)
    assert generator.calls == []
