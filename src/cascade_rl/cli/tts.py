"""``cascade tts``: test-time scaling for competitive programming (SPEC section 8; docs/tts.md).

    cascade tts run PROBLEM... --generator SPEC --out DIR   the test-time-scaling loop (resumable)
    cascade tts judge PROBLEM SOLUTION.py                   judge one program, verdict per subtask
    cascade tts list                                        the shipped problems
    cascade tts convert-kattis PACKAGE TARGET               a Kattis package -> problem.yaml

A PROBLEM is a ``problem.yaml``, its directory, a directory of problem directories, or the id
of a shipped problem. Bad input (a problem file) stops the command with one line naming the
file and the field, before any generation or judging.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from cascade_rl.cli.common import (
    EXIT_PROBLEMS,
    GENERATOR_HELP,
    command_group,
    fail,
    open_generator,
    option_groups,
    sampling_options,
    say,
    stdout,
)

app = command_group("Test-time scaling for competitive programming (IOI-style problems with subtasks).")


# ---------------------------------------------------------------------------- option groups
@dataclass
class LoopOptions:
    """The loop's rounds, budgets and submission policy (paper defaults; SPEC section 8)."""

    rounds: int = typer.Option(50, min=1, help="Rounds per problem (paper: 50).", rich_help_panel="Loop")
    candidates: int = typer.Option(
        20, min=1, help="Generations per round and unsolved subtask (paper: 20).", rich_help_panel="Loop"
    )
    max_generations: int = typer.Option(
        1000, min=1, help="Generation budget per problem (paper: 1000).", rich_help_panel="Loop"
    )
    max_submissions: int = typer.Option(
        50, min=1, help="Submission budget per problem (IOI: 50).", rich_help_panel="Loop"
    )
    selection: str = typer.Option(
        "tail10", help="tail10 (paper), first, shortest, or package.module:function.", rich_help_panel="Loop"
    )
    history_incorrect: int = typer.Option(
        5, min=0, help="Incorrect submissions shown per subtask (paper: 5).", rich_help_panel="Loop"
    )
    history_top: int = typer.Option(
        3, min=0, help="Best submissions shown, partial-score problems (paper: 3).", rich_help_panel="Loop"
    )
    resubmit: bool = typer.Option(False, help="Allow submitting a program already submitted.", rich_help_panel="Loop")
    mode: str = typer.Option("think", help="think, no_think, or none (no flag on the prompt).", rich_help_panel="Loop")

    def config(self, sampling: Any):
        from cascade_rl.tts.loop import TTSConfig

        return TTSConfig(
            rounds=self.rounds,
            candidates=self.candidates,
            max_generations=self.max_generations,
            max_submissions=self.max_submissions,
            selection=self.selection,
            history_incorrect=self.history_incorrect,
            history_top=self.history_top,
            resubmit=self.resubmit,
            mode=None if self.mode == "none" else self.mode,
            sampling=sampling,
        )


@dataclass
class SamplingOptions(sampling_options(131072, top_k=False, panel="Sampling")):
    """How candidates are sampled (the shared sampling flags; ``--max-tokens``: the paper's 128K
    thinking budget) and how confident the model was (the tail10 selection)."""

    tail_tokens: int = typer.Option(
        2048, min=1, help="Tail window of the tail10 confidence.", rich_help_panel="Sampling"
    )
    top_logprobs: int = typer.Option(
        20, min=1, help="k of the token confidence (log-probabilities per token).", rich_help_panel="Sampling"
    )

    def candidates(self):
        """The loop's sampling settings: the shared value's distribution, with the confidence."""
        from cascade_rl.tts.sampling import Sampling

        return Sampling(self.temperature, self.top_p, self.max_tokens, True, self.tail_tokens, self.top_logprobs)


@dataclass
class BackendOptions:
    """How the model named by --generator is reached: a server's limits, a local model's batch."""

    concurrency: int = typer.Option(8, min=1, help="Requests in flight to a server.", rich_help_panel="Model")
    timeout: float = typer.Option(3600.0, min=1.0, help="Seconds per server request.", rich_help_panel="Model")
    batch_size: int = typer.Option(8, min=1, help="Sequences per forward pass, local models.", rich_help_panel="Model")
    device: str | None = typer.Option(
        None, help="Device of a local model (default: cuda if present).", rich_help_panel="Model"
    )

    def open(self, spec: str):
        local = {"batch_size": self.batch_size, **({"device": self.device} if self.device else {})}
        return open_generator(spec, server={"max_concurrency": self.concurrency, "timeout": self.timeout}, local=local)


# ---------------------------------------------------------------------------- commands
@app.command("run")
@option_groups(loop=LoopOptions, sample=SamplingOptions, backend=BackendOptions)
def run_command(
    problems: list[str] = typer.Argument(None, help="Problem files, directories or shipped ids."),
    generator: str = typer.Option(..., "--generator", "-g", help=f"The model. {GENERATOR_HELP}"),
    out: Path = typer.Option(Path("runs/tts"), "--out", "-o", help="Run directory (resumed when it exists)."),
    shipped: bool = typer.Option(False, "--shipped", help="Add every problem shipped with cascade_rl."),
    workers: int | None = typer.Option(None, min=1, help="Sandbox workers of the judge (default: CPU count)."),
    *,
    loop: LoopOptions,
    sample: SamplingOptions,
    backend: BackendOptions,
) -> None:
    """Run the test-time-scaling loop of SPEC section 8 on problems with subtasks."""
    from cascade_rl.llm import GenerationError
    from cascade_rl.tts.judge import Judge, JudgeError
    from cascade_rl.tts.loop import run_tts
    from cascade_rl.tts.store import RunDirError

    loaded = _problems(problems or [], shipped)
    try:
        config = loop.config(sample.candidates())
    except ValueError as error:
        raise fail(error) from None
    model = backend.open(generator)
    try:
        with Judge(workers=workers) as judge:
            summaries = run_tts(loaded, model, out, config, judge=judge, progress=_progress)
    except (RunDirError, JudgeError) as error:
        raise fail(error) from None
    except GenerationError as error:
        raise fail(f"generation failed ({error}); run the same command again to resume", EXIT_PROBLEMS) from None
    stdout.print(summary_table(summaries))
    say(f"wrote {out}/summary.json, {out}/trajectory.png and per problem: submissions, trajectory, plot")


def _problems(references: list[str], shipped: bool) -> list:
    from cascade_rl.tts.problem import ProblemError, load_problems, shipped_problems

    references = list(references) + ([str(p) for p in shipped_problems()] if shipped else [])
    if not references:
        raise fail("give problems (files, directories or shipped ids) or --shipped")
    try:
        return load_problems(references)
    except ProblemError as error:
        raise fail(error) from None


def _progress(problem_id: str, event: dict) -> None:
    if event["event"] == "generating":
        wanted = ", ".join(f"{n} for subtask {name}" for name, n in event["candidates"].items())
        say(f"{problem_id} round {event['round']}: generating {wanted}")
    elif not event.get("replayed"):
        say(step_line(problem_id, event))


def step_line(problem_id: str, event: dict) -> str:
    """One line per step of the loop: what was generated, kept and submitted, and the score."""
    step = event["step"]
    submission = step.get("submission")
    dropped = step.get("dropped") or {}
    made = f"{step['generations']} gen, {step.get('kept', 0)} kept"
    drops = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in dropped.items() if v)
    if submission:
        verdicts = " ".join(f"{s['name']}:{s['verdict']}" for s in submission["result"]["subtasks"])
        outcome = f"submission {submission['number']}: {submission['result']['score']:g} pts [{verdicts}]"
    else:
        outcome = step.get("note") or "no submission"
    return (
        f"{problem_id} round {event['round']} subtask {step['subtask_name']}: {made}"
        f"{f' ({drops})' if drops else ''} -> {outcome} | score {event['score']:g}/{event['max_score']:g}, "
        f"generations {event['generations']}, submissions {event['submissions']}"
    )


def summary_table(summaries: list[dict]) -> Table:
    from cascade_rl.tts.report import totals

    table = Table(title="test-time scaling")
    for column in ("problem", "score", "subtasks (best / points)", "rounds", "generations", "submissions", "stopped"):
        table.add_column(column, justify="left" if column in ("problem", "stopped") else "right")
    for s in summaries:
        subtasks = " ".join(f"{t['best']:g}/{t['points']:g}" for t in s["subtasks"])
        table.add_row(
            s["problem"],
            f"{s['score']:g} / {s['max_score']:g}",
            subtasks,
            str(s["rounds"]),
            f"{s['generations']['used']} / {s['generations']['budget']}",
            f"{s['submissions']['used']} / {s['submissions']['budget']}",
            s["stopped"],
        )
    total = totals(summaries)
    score = f"{total['score']:g} / {total['max_score']:g}"
    table.add_row("total", score, "", "", str(total["generations"]), str(total["submissions"]), "")
    return table


@app.command("judge")
def judge_command(
    problem: str = typer.Argument(..., help="A problem file, directory or shipped id."),
    solution: Path = typer.Argument(..., help="The Python program to judge."),
    output: Path | None = typer.Option(None, "--json", help="Also write the full result (every test) as JSON."),
) -> None:
    """Judge one program: compile, run every subtask's tests in the sandbox, IOI score."""
    from cascade_rl.tts.judge import Judge, JudgeError

    (loaded,) = _problems([problem], False)
    if not solution.is_file():
        raise fail(f"{solution}: no such file")
    try:
        with Judge() as judge:
            result = judge.judge(loaded, solution.read_text(encoding="utf-8"))
    except JudgeError as error:
        raise fail(error) from None
    stdout.print(verdict_table(loaded, result))
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(result.to_dict(), indent=2) + "\n")


def verdict_table(problem: Any, result: Any) -> Table:
    """Per subtask its score, verdict, tests run, slowest test and the first failing test."""
    from cascade_rl.tts.judge import VERDICT_NAMES

    table = Table(title=f"{problem.id}: {result.score:g} / {result.max_score:g}")
    for column in ("subtask", "score", "verdict", "tests run", "slowest (s)", "detail"):
        table.add_column(column, justify="left" if column in ("verdict", "detail") else "right")
    for subtask in result.subtasks:
        failing = next((t for t in subtask.tests if t.verdict == subtask.verdict != "AC"), None)
        detail = (
            f"{failing.name}: {failing.message}" if failing and failing.message else (failing.name if failing else "")
        )
        slowest = max((t.seconds for t in subtask.tests), default=0.0)
        table.add_row(
            subtask.name,
            f"{subtask.score:g} / {subtask.points:g}",
            VERDICT_NAMES[subtask.verdict],
            str(len(subtask.tests)),
            f"{slowest:.2f}",
            (result.compile_error or detail).replace("\n", " ")[:120],
        )
    return table


@app.command("list")
def list_command() -> None:
    """The problems shipped with cascade_rl (use their ids as PROBLEM)."""
    from cascade_rl.tts.problem import SHIPPED_DIR, load_problem, shipped_problems

    table = Table(title=f"shipped problems ({SHIPPED_DIR})")
    for column in ("id", "title", "subtasks (points)", "partial score", "limits"):
        table.add_column(column)
    for path in shipped_problems():
        problem = load_problem(path)
        table.add_row(
            problem.id,
            problem.title,
            " + ".join(f"{s.points:g}" for s in problem.subtasks),
            "yes" if problem.partial_score else "no",
            f"{problem.time_limit_s:g} s, {problem.memory_mb} MB",
        )
    stdout.print(table)


@app.command("convert-kattis")
def convert_kattis_command(
    package: Path = typer.Argument(..., help="A Kattis problem package directory."),
    target: Path = typer.Argument(..., help="Directory to write problem.yaml, statement and tests into."),
    problem_id: str | None = typer.Option(None, "--id", help="Problem id (default: the package's directory name)."),
    time_limit: float | None = typer.Option(None, min=0.001, help="Seconds per test, when the package has none."),
    checker: Path | None = typer.Option(None, help="A checker (this project's protocol) for custom validation."),
    partial_score: bool = typer.Option(False, help="The checker awards fractions of a test."),
) -> None:
    """Convert a Kattis problem package (data/secret/GROUP/ test groups) to problem.yaml."""
    from cascade_rl.tts.kattis import convert_kattis
    from cascade_rl.tts.problem import ProblemError

    if not package.is_dir():
        raise fail(f"{package}: no such package directory")
    try:
        problem = convert_kattis(
            package, target, problem_id=problem_id, time_limit=time_limit, checker=checker, partial_score=partial_score
        )
    except ProblemError as error:
        raise fail(error) from None
    tests = sum(len(s.tests) for s in problem.subtasks)
    say(f"wrote {problem.path}: {len(problem.subtasks)} subtask(s), {tests} test(s), {len(problem.samples)} sample(s)")
