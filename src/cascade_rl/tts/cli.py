"""Competitive-programming commands (SPEC section 8 and appendix E of SPEC section 9):

    cascade tts run PROBLEM... --generator SPEC --out DIR   the test-time-scaling loop (resumable)
    cascade tts judge PROBLEM SOLUTION.py                   judge one program, verdict per subtask
    cascade tts list                                        the shipped problems
    cascade tts convert-kattis PACKAGE TARGET               a Kattis package -> problem.yaml
    cascade elo CONTESTS SAMPLES.jsonl                      Codeforces Elo per contest and the mean

A PROBLEM is a ``problem.yaml``, its directory, a directory of problem directories, or the id
of a shipped problem. Generators as for :func:`cascade_rl.llm.load_generator`: a local model
directory, ``local:PATH``, or ``http://HOST:PORT/v1#MODEL`` for an OpenAI-compatible server.
Bad input (a problem file, a contest or samples file) stops the command with one line naming
the file and the field, before any generation or judging.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(
    help="Test-time scaling for competitive programming (IOI-style problems with subtasks).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True, soft_wrap=True)


def _fail(error: Exception) -> typer.Exit:
    console.print(f"[red]error:[/red] {error}", markup=True, highlight=False)
    return typer.Exit(2)


def _problems(references: list[str], shipped: bool) -> list:
    from cascade_rl.tts.problem import ProblemError, load_problems, shipped_problems

    references = list(references) + ([str(p) for p in shipped_problems()] if shipped else [])
    if not references:
        raise _fail(ValueError("give problems (files, directories or shipped ids) or --shipped"))
    try:
        return load_problems(references)
    except ProblemError as error:
        raise _fail(error) from None


def _generator(spec: str, concurrency: int, timeout: float, batch_size: int, device: str | None) -> Any:
    from cascade_rl.llm import load_generator

    local: dict[str, Any] = {"batch_size": batch_size, **({"device": device} if device else {})}
    try:
        return load_generator(spec, server={"max_concurrency": concurrency, "timeout": timeout}, local=local)
    except (ValueError, FileNotFoundError, OSError) as error:
        raise _fail(ValueError(f"--generator {spec}: {error}")) from None


def _step_line(problem_id: str, event: dict) -> str:
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


def _summary_table(summaries: list[dict]) -> Table:
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
    table.add_row(
        "total",
        f"{total['score']:g} / {total['max_score']:g}",
        "",
        "",
        str(total["generations"]),
        str(total["submissions"]),
        "",
    )
    return table


@app.command("run")
def run_command(
    problems: list[str] = typer.Argument(None, help="Problem files, directories or shipped ids."),
    generator: str = typer.Option(
        ..., "--generator", "-g", help="Model: a local directory, local:PATH or http://HOST/v1#MODEL."
    ),
    out: Path = typer.Option(Path("runs/tts"), "--out", "-o", help="Run directory (resumed when it exists)."),
    shipped: bool = typer.Option(False, "--shipped", help="Add every problem shipped with cascade_rl."),
    rounds: int = typer.Option(50, min=1, help="Rounds per problem (paper: 50)."),
    candidates: int = typer.Option(20, min=1, help="Generations per round and unsolved subtask (paper: 20)."),
    max_generations: int = typer.Option(1000, min=1, help="Generation budget per problem (paper: 1000)."),
    max_submissions: int = typer.Option(50, min=1, help="Submission budget per problem (IOI: 50)."),
    selection: str = typer.Option("tail10", help="tail10 (paper), first, shortest, or package.module:function."),
    history_incorrect: int = typer.Option(5, min=0, help="Incorrect submissions shown per subtask (paper: 5)."),
    history_top: int = typer.Option(3, min=0, help="Best submissions shown, partial-score problems (paper: 3)."),
    resubmit: bool = typer.Option(False, help="Allow submitting a program already submitted."),
    mode: str = typer.Option("think", help="think, no_think, or none (no flag on the prompt)."),
    temperature: float = typer.Option(0.6, min=0.0),
    top_p: float = typer.Option(0.95, min=0.0, max=1.0),
    max_tokens: int = typer.Option(131072, min=1, help="Tokens per response (paper: 128K thinking budget)."),
    concurrency: int = typer.Option(8, min=1, help="Requests in flight to a server."),
    timeout: float = typer.Option(3600.0, min=1.0, help="Seconds per server request."),
    batch_size: int = typer.Option(8, min=1, help="Sequences per forward pass, local models."),
    device: str | None = typer.Option(None, help="Device of a local model (default: cuda if present)."),
    workers: int | None = typer.Option(None, min=1, help="Sandbox workers of the judge (default: CPU count)."),
    tail_tokens: int = typer.Option(2048, min=1, help="Tail window of the tail10 confidence."),
    top_logprobs: int = typer.Option(20, min=1, help="k of the token confidence (log-probabilities per token)."),
) -> None:
    """Run the test-time-scaling loop of SPEC section 8 on problems with subtasks."""
    from cascade_rl.llm import GenerationError
    from cascade_rl.tts.judge import Judge, JudgeError
    from cascade_rl.tts.loop import TTSConfig, run_tts
    from cascade_rl.tts.sampling import Sampling
    from cascade_rl.tts.store import RunDirError

    loaded = _problems(problems or [], shipped)
    try:
        sampling = Sampling(temperature, top_p, max_tokens, True, tail_tokens, top_logprobs)
        config = TTSConfig(
            rounds=rounds,
            candidates=candidates,
            max_generations=max_generations,
            max_submissions=max_submissions,
            selection=selection,
            history_incorrect=history_incorrect,
            history_top=history_top,
            resubmit=resubmit,
            mode=None if mode == "none" else mode,
            sampling=sampling,
        )
    except ValueError as error:
        raise _fail(error) from None
    model = _generator(generator, concurrency, timeout, batch_size, device)

    def progress(problem_id: str, event: dict) -> None:
        if event["event"] == "generating":
            wanted = ", ".join(f"{n} for subtask {name}" for name, n in event["candidates"].items())
            console.print(f"{problem_id} round {event['round']}: generating {wanted}", markup=False, highlight=False)
        elif not event.get("replayed"):
            console.print(_step_line(problem_id, event), markup=False, highlight=False)

    try:
        with Judge(workers=workers) as judge:
            summaries = run_tts(loaded, model, out, config, judge=judge, progress=progress)
    except (RunDirError, JudgeError) as error:
        raise _fail(error) from None
    except GenerationError as error:
        raise _fail(ValueError(f"generation failed ({error}); run the same command again to resume")) from None
    Console().print(_summary_table(summaries))
    console.print(f"wrote {out}/summary.json, {out}/trajectory.png and per problem: submissions, trajectory, plot")


@app.command("judge")
def judge_command(
    problem: str = typer.Argument(..., help="A problem file, directory or shipped id."),
    solution: Path = typer.Argument(..., help="The Python program to judge."),
    output: Path | None = typer.Option(None, "--json", help="Also write the full result (every test) as JSON."),
) -> None:
    """Judge one program: compile, run every subtask's tests in the sandbox, IOI score."""
    from cascade_rl.tts.judge import VERDICT_NAMES, Judge, JudgeError

    (loaded,) = _problems([problem], False)
    if not solution.is_file():
        raise _fail(FileNotFoundError(f"{solution}: no such file"))
    try:
        with Judge() as judge:
            result = judge.judge(loaded, solution.read_text(encoding="utf-8"))
    except JudgeError as error:
        raise _fail(error) from None
    table = Table(title=f"{loaded.id}: {result.score:g} / {result.max_score:g}")
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
    Console().print(table)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(result.to_dict(), indent=2) + "\n")


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
    Console().print(table)


@app.command("convert-kattis")
def convert_kattis_command(
    package: Path = typer.Argument(..., help="A Kattis problem package directory."),
    target: Path = typer.Argument(..., help="Directory to write problem.yaml, statement and tests into."),
    problem_id: str | None = typer.Option(None, "--id", help="Problem id (default: the package's directory name)."),
    time_limit: float | None = typer.Option(None, min=0.001, help="Seconds per test, when the package has none."),
    checker: Path | None = typer.Option(None, help="A checker (this project's protocol) for custom validation."),
    partial_score: bool = typer.Option(False, help="The checker awards fractions of a test."),
) -> None:
    """Convert a Kattis problem package (data/secret/<group>/ test groups) to problem.yaml."""
    from cascade_rl.tts.kattis import convert_kattis
    from cascade_rl.tts.problem import ProblemError

    if not package.is_dir():
        raise _fail(FileNotFoundError(f"{package}: no such package directory"))
    try:
        problem = convert_kattis(
            package, target, problem_id=problem_id, time_limit=time_limit, checker=checker, partial_score=partial_score
        )
    except ProblemError as error:
        raise _fail(error) from None
    tests = sum(len(s.tests) for s in problem.subtasks)
    console.print(
        f"wrote {problem.path}: {len(problem.subtasks)} subtask(s), {tests} test(s), {len(problem.samples)} sample(s)"
    )


def elo_command(
    contests: Path = typer.Argument(..., help="Contest file (YAML/JSON): problems, standings, style."),
    samples: Path = typer.Argument(..., help="The model's samples (JSONL): problem id and correct, one per sample."),
    rank_equation: str = typer.Option(
        "as_written", help="as_written (appendix E) or codeforces (Codeforces' seed, 1 + the sum)."
    ),
    min_points_fraction: float = typer.Option(
        0.0, min=0.0, max=1.0, help="Floor on a solved problem's points (Codeforces: 0.3; appendix E: none)."
    ),
    output: Path | None = typer.Option(None, "--json", help="Also write the estimate as JSON."),
) -> None:
    """Codeforces Elo from simulated participation (appendix E): rating per contest and the mean."""
    from cascade_rl.eval.elo import ContestFileError, codeforces_elo, load_contests, load_samples

    if rank_equation not in ("as_written", "codeforces"):
        raise _fail(ValueError(f"--rank-equation must be as_written or codeforces, got {rank_equation!r}"))
    try:
        loaded = load_contests(contests)
        results = load_samples(samples, loaded, contests)
    except ContestFileError as error:
        raise _fail(error) from None
    estimate = codeforces_elo(results, rank_equation=rank_equation, min_points_fraction=min_points_fraction)
    departures = [f"rank equation {rank_equation}"] if rank_equation != "as_written" else []
    departures += [f"points floor {min_points_fraction:g}"] if min_points_fraction else []
    table = Table(title=f"Codeforces Elo (appendix E{'; ' + ', '.join(departures) if departures else ''})")
    for column in ("contest", "style", "solved", "result", "samples", "rank m", "humans n", "rating"):
        table.add_column(column, justify="left" if column in ("contest", "style") else "right")
    for result, performance in zip(results, estimate.contests):
        standing = performance.standing
        score = f"{standing.points:g} pts" if performance.style == "regular" else f"{standing.penalty_minutes:g} min"
        table.add_row(
            performance.name,
            performance.style,
            f"{standing.solved}/{len(result.contest.problems)}",
            score,
            "/".join(str(n) for n in sorted(set(result.attempts))),
            f"{performance.rank:g}",
            str(performance.contestants),
            f"{performance.rating:.1f}",
        )
    table.add_row("mean", "", "", "", "", "", "", f"[bold]{estimate.elo:.1f}[/bold]")
    Console().print(table)
    if output is not None:
        record = {
            "elo": estimate.elo,
            "rank_equation": rank_equation,
            "min_points_fraction": min_points_fraction,
            "contests": [
                {
                    "name": p.name,
                    "style": p.style,
                    "solved": p.standing.solved,
                    "points": p.standing.points,
                    "penalty_minutes": p.standing.penalty_minutes,
                    "rank": p.rank,
                    "contestants": p.contestants,
                    "rating": p.rating,
                    "correct": list(r.correct),
                    "samples": list(r.attempts),
                }
                for p, r in zip(estimate.contests, results)
            ],
        }
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(record, indent=2) + "\n")
