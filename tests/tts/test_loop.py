"""The test-time-scaling loop (SPEC section 8) with a scripted generator: rounds, filters,
history, cross-subtask insight, budgets, and resuming from the run directory."""

from __future__ import annotations

import itertools
import json

import pytest
from tts_helpers import ScriptedGenerator, respond, solution, subtask_of, write_problem

from cascade_rl.tts.loop import TTSConfig, run_tts
from cascade_rl.tts.problem import load_problem, load_problems

SAMPLES_ONLY = "n, m = map(int, input().split())\nprint(6 if n == 1 else 7)"  # passes the samples, nothing else


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def config(**options):
    return TTSConfig(**{"selection": "first", "candidates": 2, **options})


def prompts_for(generator, subtask):
    return [p for p in generator.prompts if subtask_of(p) == subtask]


def test_accepted_code_of_subtask_1_reaches_subtask_2_and_solves_it(tmp_path, judge):
    one_row, bands = solution("max-rectangle", "one_row"), solution("max-rectangle", "bands")

    def script(prompt):
        if subtask_of(prompt) == "1":
            return respond(one_row)
        return respond(bands if "### Accepted Code:" in prompt else SAMPLES_ONLY)

    generator = ScriptedGenerator(script)
    (summary,) = run_tts(load_problems(["max-rectangle"]), generator, tmp_path, config(candidates=3), judge=judge)
    assert (summary["score"], summary["rounds"], summary["stopped"]) == (100.0, 2, "solved")
    assert summary["generations"] == {"used": 9, "budget": 1000}  # 3 + 3, then 3 for subtask 2 only
    assert summary["submissions"] == {"used": 3, "budget": 50}
    second = prompts_for(generator, "2")[-1]
    assert "## Different Constraints (for reference only):\nSubtask 1 (40 points): N = 1, 1 <= M <= 20000" in second
    assert one_row.strip() in second
    incorrect = (
        f"### Incorrect Code\n```python\n{SAMPLES_ONLY}\n```\nJudgement Verdict: Wrong Answer on test 1, Score: 0 / 60"
    )
    assert incorrect in second
    out = tmp_path / "max-rectangle"
    submissions = rows(out / "submissions.jsonl")
    assert [(s["round"], s["subtask"], s["verdicts"]) for s in submissions] == [
        (1, "1", {"1": "AC", "2": "WA"}),
        (1, "2", {"1": "WA", "2": "WA"}),
        (2, "2", {"1": "AC", "2": "AC"}),
    ]
    assert all(t["verdict"] == "AC" for s in submissions[2]["subtasks"] for t in s["tests"])
    assert [(t["round"], t["score"], t["submissions"]) for t in rows(out / "trajectory.jsonl")] == [
        (0, 0.0, 0),
        (1, 40.0, 2),
        (2, 100.0, 3),
    ]
    for png in (out / "trajectory.png", tmp_path / "trajectory.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "summary.json").read_text())["total"]["score"] == 100.0


def test_filters_drop_no_code_unfinished_thinking_failing_samples_and_resubmissions(tmp_path, judge):
    problem = load_problem(write_problem(tmp_path / "p" / "a-plus-b"))
    answers = itertools.cycle(
        [
            "I would add the numbers.",  # no code
            "<think>```python\nprint(3)\n```",  # thinking never finished
            respond("print(4)"),  # fails the sample (1 2 -> 3)
            respond("print(3)"),  # passes the sample only
        ]
    )
    generator = ScriptedGenerator(lambda prompt: next(answers))
    run_tts([problem], generator, tmp_path / "out", config(candidates=4, rounds=2, max_submissions=50), judge=judge)
    steps = rows(tmp_path / "out" / "a-plus-b" / "steps.jsonl")
    first, resubmitted = steps[0], steps[1]
    assert first["dropped"] == {"no_code": 1 + 1, "samples": 1, "resubmission": 0} and first["kept"] == 1
    assert first["submission"]["result"]["subtasks"][0]["verdict"] == "WA"
    assert resubmitted["dropped"]["resubmission"] == 1 and resubmitted["submission"] is None
    assert resubmitted["note"] == "no candidate survived the filters"


def test_history_keeps_the_last_five_incorrect_submissions_of_the_subtask(tmp_path, judge):
    problem = load_problem(write_problem(tmp_path / "p" / "a-plus-b", samples=[]))
    counter = itertools.count(1)
    generator = ScriptedGenerator(lambda prompt: respond(f"print(-{next(counter)})"))
    run_tts([problem], generator, tmp_path / "out", config(candidates=1, rounds=7), judge=judge)
    submissions = rows(tmp_path / "out" / "a-plus-b" / "submissions.jsonl")
    own = [s["code"] for s in submissions if s["subtask"] == "1"]
    last_prompt = prompts_for(generator, "1")[-1]
    assert last_prompt.count("### Incorrect Code") == 5
    shown = [code for code in own if f"```python\n{code}\n```" in last_prompt]
    assert shown == own[1:6]  # submissions of rounds 2-6; round 1's dropped out
    assert not any(s["code"] in last_prompt for s in submissions if s["subtask"] == "2")


SCORE_CHECKER = """
import json, sys
request = json.load(sys.stdin)
value = int(request["output"].split()[0])
print(min(1.0, max(0, value) / 10))
"""


def test_partial_score_history_shows_the_three_best_submissions(tmp_path, judge):
    problem = load_problem(
        write_problem(
            tmp_path / "p" / "partial",
            samples=[],
            subtasks=[{"points": 50, "tests": [{"input": "0\n", "output": "10\n"}]}],
            checker_source=SCORE_CHECKER,
            partial_score=True,
        )
    )
    values = iter([3, 7, 1, 5, 2, 9])
    generator = ScriptedGenerator(lambda prompt: respond(f"print({next(values)})"))
    (summary,) = run_tts([problem], generator, tmp_path / "out", config(candidates=1, rounds=6), judge=judge)
    assert summary["score"] == 45.0  # best submission: 9 -> 0.9 x 50
    sixth = generator.prompts[5]
    shown = [v for v in (3, 7, 1, 5, 2) if f"print({v})" in sixth]
    assert shown == [3, 7, 5] and sixth.index("print(7)") < sixth.index("print(5)") < sixth.index("print(3)")
    assert "Judgement Verdict: Partially Correct, Score: 35 / 50" in sixth


def test_a_submission_that_solves_every_subtask_ends_the_problem(tmp_path, judge):
    problem = load_problem(write_problem(tmp_path / "p" / "a-plus-b"))
    generator = ScriptedGenerator(lambda prompt: respond("print(sum(map(int, input().split())))"))
    (summary,) = run_tts([problem], generator, tmp_path / "out", config(), judge=judge)
    steps = rows(tmp_path / "out" / "a-plus-b" / "steps.jsonl")
    assert (summary["score"], summary["submissions"]["used"], summary["stopped"]) == (100.0, 1, "solved")
    assert steps[1]["note"] == "solved by an earlier submission of this round" and steps[1]["submission"] is None


@pytest.mark.parametrize(
    "budgets, generations, submissions, stopped",
    [
        ({"max_generations": 7, "candidates": 3}, 7, 3, "generation budget"),  # 3 + 3, then 1 + 0
        ({"max_submissions": 3, "candidates": 1}, 4, 3, "submission budget"),
    ],
)
def test_budgets_cap_generations_and_submissions(tmp_path, judge, budgets, generations, submissions, stopped):
    problem = load_problem(write_problem(tmp_path / "p" / "a-plus-b", samples=[]))
    counter = itertools.count(1)
    generator = ScriptedGenerator(lambda prompt: respond(f"print(-{next(counter)})"))
    (summary,) = run_tts([problem], generator, tmp_path / "out", config(rounds=50, **budgets), judge=judge)
    assert (len(generator.prompts), summary["generations"]["used"]) == (generations, generations)
    assert (summary["submissions"]["used"], summary["stopped"]) == (submissions, stopped)
    notes = [s["note"] for s in rows(tmp_path / "out" / "a-plus-b" / "steps.jsonl") if s["note"]]
    assert notes == [f"{stopped} spent"]  # round 2, subtask 2


class Interrupted(RuntimeError):
    pass


def test_resume_replays_the_logs_and_makes_only_missing_generations(tmp_path, judge):
    problem = load_problem(write_problem(tmp_path / "p" / "a-plus-b", samples=[]))
    counter = itertools.count(1)

    def flaky(prompt):  # the "model" dies during round 2
        number = next(counter)
        if number == 7:
            raise Interrupted
        return respond(f"print(-{number})")

    out = tmp_path / "out"
    with pytest.raises(Interrupted):
        run_tts([problem], ScriptedGenerator(flaky), out, config(candidates=2, rounds=3), judge=judge)
    log = out / "a-plus-b" / "generations.jsonl"
    made = rows(log)
    assert len(made) == 6  # round 1 (4) and what round 2 had made before the failure
    with open(log, "a") as handle:
        handle.write('{"round": 2, "subtask": 1, "ind')  # a line torn by a kill
    again = ScriptedGenerator(lambda prompt: respond(f"print(-{next(counter)})"))
    (summary,) = run_tts([problem], again, out, config(candidates=2, rounds=3), judge=judge)
    assert len(again.prompts) == 12 - 6  # only the missing generations
    final = rows(log)
    assert final[:6] == made and len(final) == summary["generations"]["used"] == 12
    assert [(s["round"], s["subtask"]) for s in rows(out / "a-plus-b" / "steps.jsonl")] == [
        (r, s) for r in (1, 2, 3) for s in (0, 1)
    ]
    assert summary["submissions"]["used"] == 6
