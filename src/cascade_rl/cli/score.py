"""``cascade score IN.jsonl``: score responses with the reward verifiers (SPEC sections 5-6;
:mod:`cascade_rl.scoring`)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from cascade_rl.cli.common import EXIT_PROBLEMS, checked_options, console, fail, parse_options, stdout


def score(
    source: Path = typer.Argument(
        ...,
        exists=True,
        dir_okay=False,
        help="JSONL: domain, prompt?, response (or responses: a prompt's group), reference fields.",
    ),
    output: Path | None = typer.Option(
        None, "-o", "--output", help="Where to write the scored lines [default: IN.scored.jsonl]."
    ),
    workers: int = typer.Option(
        4, "--workers", "-w", min=1, help="Parallel scorers (code runs in a sandbox pool of this size)."
    ),
    option: list[str] = typer.Option(
        [], "--option", help="Scorer option DOMAIN.KEY=VALUE, e.g. math.language_penalty=-1 (repeatable)."
    ),
    wait: float = typer.Option(
        60.0, "--wait", min=0.0, help="Seconds to wait for reward servers named in --option to answer."
    ),
    allow_errors: bool = typer.Option(
        False,
        "--allow-errors",
        help="Exit 0 even when a scorer could not score some lines (reward 0 written) or reached no verdict.",
    ),
) -> None:
    """Score responses with the reward verifiers (math, ifeval, code, swe, tool_call, mcqa,
    structured_output, workplace, preference, if_rm, genrm, ...).

    Writes every line back with `reward` and `details` (a line with `responses`, a prompt's group:
    `rewards` and `details`, one per response; a workplace line may give the model's `calls`, in
    order, instead of a `response`) and prints a summary per domain. Bad lines (not JSON, not an
    object, a field of the wrong type, a missing reference field) are reported with their line
    number, not scored and written with `reward: null`; the exit code is 1 if any. Options are
    checked before any line is scored (exit code 2 naming the option). Lines a scorer could not
    score (`details.error`: an unknown instruction id, a malformed reference) keep reward 0 and are
    summarised by error with their line numbers. Responses without a verdict (a judge or
    reward-model server that failed, a scorer that raised) get reward null and `masked: REASON`,
    are left out of the mean and summarised by reason. The exit code is 1 if either, unless
    --allow-errors. Reward servers named in --option (a reward model, the SWE judge) must answer
    first (exit code 2).
    """
    from cascade_rl.rewards.registry import OptionError
    from cascade_rl.scoring import score_file

    target = output or source.with_suffix(".scored.jsonl")
    options = checked_options(parse_options(option))
    check_servers(options, wait)
    try:
        report = score_file(source, target, workers=workers, options=options)
    except OptionError as error:  # an option a domain of the file cannot score without
        raise fail(f"--option {error}") from None
    stdout.print(domain_table(report, f"scored {report.total} lines -> {target}"))
    for number, problem in report.bad_lines:
        console.print(f"[red]line {number}[/red]: {escape(problem)}", highlight=False)
    if report.errored:
        print_scoring_errors(report.errored, allowed=allow_errors)
    if report.masked:
        print_masked(report.masked)
    if report.bad_lines:
        console.print(f"[red]{len(report.bad_lines)} bad line(s)[/red] written with reward null")
        raise typer.Exit(EXIT_PROBLEMS)
    if (report.errored or report.masked) and not allow_errors:
        raise typer.Exit(EXIT_PROBLEMS)


def check_servers(options: dict[str, dict], wait: float) -> None:
    """The reward servers the options name answer within ``wait`` seconds, or the command fails."""
    from cascade_rl.rewards.registry import REGISTRY, PreflightError, preflight

    try:
        for name, values in options.items():
            if name in REGISTRY:
                preflight(name, values, timeout=wait)
    except PreflightError as error:
        raise fail(error) from None


def domain_table(report, title: str) -> Table:
    table = Table(title=title)
    for column in ("domain", "count", "mean reward", "masked", "errors", "timeouts", "lines/s"):
        table.add_column(column, justify="left" if column == "domain" else "right")
    for name, summary in sorted(report.domains.items()):
        table.add_row(
            name,
            str(summary.count),
            f"{summary.mean_reward:.3f}",
            str(summary.masked),
            str(summary.errors),
            str(summary.timeouts),
            f"{summary.lines_per_second:.1f}",
        )
    return table


def print_scoring_errors(errored: dict[str, list[int]], *, allowed: bool) -> None:
    """The lines a scorer could not score, most frequent error first."""
    total = sum(len(lines) for lines in errored.values())
    outcome = "counted with reward 0 (--allow-errors)" if allowed else "written with reward 0"
    console.print(f"[red]{total} line(s) could not be scored[/red], {outcome}:", highlight=False)
    print_by_reason(errored)


def print_masked(masked: dict[str, list[int]]) -> None:
    """The responses without a verdict, most frequent reason first."""
    total = sum(len(lines) for lines in masked.values())
    console.print(
        f"[red]{total} response(s) without a verdict[/red] (masked: written with reward null, not in the mean):",
        highlight=False,
    )
    print_by_reason(masked)


def print_by_reason(lines_by_reason: dict[str, list[int]], shown: int = 5) -> None:
    for reason, lines in sorted(lines_by_reason.items(), key=lambda item: (-len(item[1]), item[1][0])):
        numbers = list(dict.fromkeys(lines))
        more = f" (+{len(numbers) - shown} more)" if len(numbers) > shown else ""
        where = ", ".join(str(n) for n in numbers[:shown]) + more
        console.print(f"  {len(lines)} x {escape(reason)} -- line(s) {where}", highlight=False)
