"""``cascade data``: the paper's data curation steps over JSONL / Parquet files (SPEC sections 3-6,
appendix C.1). Thin: each command parses its options and calls the library; the shared row
machinery (progress bar, resumable output, kept / dropped summary, malformed rows named by file
and line) is :mod:`cascade_rl.data.job`.

    cascade data convert IN... --format FMT -o OUT      public formats -> the project's schemas
    cascade data dedup IN... -o OUT                     exact prompt dedup
    cascade data decontaminate IN... -o OUT --benchmark NAME=PATH ...   9-gram decontamination
    cascade data check-disjoint --sft A --rlhf B --rl C  prompts shared between stages
    cascade data difficulty IN -o OUT --model SPEC      pass-rate filters (math 16 samples, code 8/8 and 0/8)
    cascade data verify IN -o OUT                       drop responses that disagree with the ground truth
    cascade data offtopic IN -o OUT --strong SPEC --weak SPEC   off-topic RM pairs (appendix C.1)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from cascade_rl.data.job import Summary
from cascade_rl.data.rows import DataError

app = typer.Typer(
    help="Data curation for Cascade RL: convert public formats, dedup, decontaminate, check stage "
    "disjointness, difficulty filters, ground-truth checks, off-topic RM pairs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True, soft_wrap=True)

INPUTS = typer.Argument(..., help="Input JSONL / Parquet files (read in order).")
OUTPUT = typer.Option(..., "-o", "--output", help="Output JSONL; OUTPUT.summary.json records progress and counts.")
SKIP = typer.Option(
    False, "--skip-malformed", help="Count malformed rows (with an example file:line) instead of stopping."
)
OVERWRITE = typer.Option(False, "--overwrite", help="Start again instead of resuming an earlier run.")
QUIET = typer.Option(False, "--quiet", "-q", help="No progress bar.")


def _fail(error: Exception) -> None:
    console.print(f"[red]error[/red] {error}", highlight=False)
    raise typer.Exit(2)


def _pairs(values: list[str], what: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        left, sep, right = value.partition("=")
        if not sep or not left or not right:
            raise typer.BadParameter(f"{value!r}: expected {what}")
        pairs[left.strip()] = right.strip()
    return pairs


def print_summary(title: str, output: Path, summary: Summary) -> None:
    """The kept / dropped table of a job, and the command's own tables."""
    table = Table(title=f"{title} -> {output}")
    for column in ("rows", "count", "example"):
        table.add_column(column, justify="right" if column == "count" else "left")
    table.add_row("read", str(summary.read), "")
    table.add_row("kept", str(summary.kept), f"{summary.written} rows written")
    for reason, count in summary.dropped.most_common():
        table.add_row(f"dropped: {reason}", str(count), summary.examples.get(reason, ""))
    Console().print(table)
    for name, rows in summary.extra.items():
        if isinstance(rows, list) and rows and isinstance(rows[0], dict):
            extra = Table(title=name)
            for column in rows[0]:
                extra.add_column(str(column))
            for row in rows:
                extra.add_row(*(str(row[c]) for c in rows[0]))
            Console().print(extra)


def _run(title: str, output: Path, work: Any) -> Summary:
    try:
        summary = work()
    except DataError as error:
        _fail(error)
    print_summary(title, output, summary)
    return summary


@app.command()
def convert(
    inputs: list[Path] = INPUTS,
    output: Path = OUTPUT,
    fmt: str = typer.Option(..., "--format", "-f", help="Input format (see `cascade data formats`)."),
    rename: list[str] = typer.Option(
        [], "--rename", help="Rename a field first: OURS=THEIRS (THEIRS may be a dotted path); repeatable."
    ),
    suffix: str | None = typer.Option(
        None, "--suffix", help="Text appended to the last user turn [default: the format's, e.g. the \\boxed{} ask]."
    ),
    domain: str | None = typer.Option(None, "--domain", help="nemo-gym: force the reward domain of every row."),
    tests: str = typer.Option("all", "--tests", help="livecodebench: all (public + private) or public."),
    answers: Path | None = typer.Option(None, "--answers", help="bfcl: possible-answer file (id, ground_truth)."),
    skip_malformed: bool = SKIP,
    overwrite: bool = OVERWRITE,
    quiet: bool = QUIET,
) -> None:
    """Convert public formats (NeMo Gym RL rows, OpenAI messages, HelpSteer, AIME, IFEval /
    IFBench, LiveCodeBench, TACO / APPS, MMLU / MMLU-Pro / GPQA, BFCL, SWE-bench) to the
    project's schemas (docs/data-formats.md)."""
    from cascade_rl.data.commands import convert_files

    _run(
        f"convert --format {fmt}",
        output,
        lambda: convert_files(
            inputs,
            output,
            fmt,
            rename=_pairs(rename, "OURS=THEIRS"),
            suffix=suffix,
            domain=domain,
            tests=tests,
            answers=answers,
            skip_malformed=skip_malformed,
            overwrite=overwrite,
            progress=not quiet,
        ),
    )


@app.command()
def formats() -> None:
    """List the input formats of `cascade data convert`."""
    from cascade_rl.data.convert import FORMATS

    table = Table(title="cascade data convert --format")
    table.add_column("format")
    table.add_column("writes")
    for name, fmt in FORMATS.items():
        table.add_row(name, fmt.writes + ("" if fmt.name == name else f" (alias of {fmt.name})"))
    Console().print(table)


@app.command()
def dedup(
    inputs: list[Path] = INPUTS,
    output: Path = OUTPUT,
    key: str | None = typer.Option(
        None, "--key", help="Dedup on this field (dotted path) [default: the prompt's turns, roles and modes]."
    ),
    skip_malformed: bool = SKIP,
    overwrite: bool = OVERWRITE,
    quiet: bool = QUIET,
) -> None:
    """Exact dedup of prompts (SPEC 3): the first row of each prompt is kept (whitespace ignored;
    the thinking mode of a turn counts, so parallel think / no_think samples both stay)."""
    from cascade_rl.data.commands import dedup_files

    _run(
        "dedup",
        output,
        lambda: dedup_files(
            inputs, output, key=key, skip_malformed=skip_malformed, overwrite=overwrite, progress=not quiet
        ),
    )


@app.command()
def decontaminate(
    inputs: list[Path] = INPUTS,
    output: Path = OUTPUT,
    benchmark: list[str] = typer.Option(
        ..., "--benchmark", "-b", help="NAME=PATH of a benchmark file (any format convert reads); repeatable."
    ),
    n: int = typer.Option(9, "-n", min=1, help="n-gram length (paper: 9)."),
    text: str = typer.Option(
        "prompt", "--text", help="What of a training row is compared: prompt or all (replies too)."
    ),
    skip_malformed: bool = SKIP,
    overwrite: bool = OVERWRITE,
    quiet: bool = QUIET,
) -> None:
    """Drop every row that shares an n-gram with a benchmark's questions (SPEC 3); the summary
    says how many rows each benchmark removed, with an example shared n-gram."""
    from cascade_rl.data.commands import decontaminate_files

    if text not in ("prompt", "all"):
        raise typer.BadParameter("--text must be prompt or all")
    _run(
        f"decontaminate ({n}-grams)",
        output,
        lambda: decontaminate_files(
            inputs,
            output,
            _pairs(benchmark, "NAME=PATH"),
            n=n,
            all_text=text == "all",
            skip_malformed=skip_malformed,
            overwrite=overwrite,
            progress=not quiet,
        ),
    )


@app.command("check-disjoint")
def check_disjoint(
    sft: list[Path] = typer.Option([], "--sft", help="SFT data files (repeatable)."),
    rlhf: list[Path] = typer.Option([], "--rlhf", help="RLHF / reward-model data files (repeatable)."),
    rl: list[Path] = typer.Option([], "--rl", help="Other RL stage data files (repeatable)."),
    write_dir: Path | None = typer.Option(
        None, "--write-dir", help="Write disjoint copies here: a later stage loses the prompts an earlier one has."
    ),
) -> None:
    """Prompts shared between the SFT, RLHF and RL sets (SPEC 1: SFT and RL prompts strictly
    disjoint; math and code prompts kept out of RLHF). Exit code 1 when any are shared."""
    from cascade_rl.data.commands import check_disjoint as check

    groups = {name: paths for name, paths in (("sft", sft), ("rlhf", rlhf), ("rl", rl)) if paths}
    if len(groups) < 2:
        raise typer.BadParameter("give at least two of --sft, --rlhf, --rl")
    try:
        report = check(groups, write_dir)
    except DataError as error:
        _fail(error)
    table = Table(title="prompts shared between stages")
    for column in ("sets", "shared prompts", "example"):
        table.add_column(column)
    for row in report["pairs"]:
        table.add_row(row["sets"], str(row["shared"]), row["example"])
    Console().print(table)
    for name, count in report["prompts"].items():
        console.print(f"{name}: {count} distinct prompts")
    if write_dir is not None:
        console.print(f"disjoint copies in {write_dir}")
    if any(row["shared"] for row in report["pairs"]):
        raise typer.Exit(1)
