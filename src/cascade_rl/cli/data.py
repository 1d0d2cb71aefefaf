"""``cascade data``: the paper's data curation steps over JSONL / Parquet files (SPEC sections 3-6,
appendix C.1; docs/data-formats.md). Each command parses its options and calls the library; the
shared row machinery (progress bar, resumable output, kept / dropped summary, malformed rows named
by file and line) is :mod:`cascade_rl.data.job`.

    cascade data convert IN... --format FMT -o OUT      public formats -> the project's schemas
    cascade data dedup IN... -o OUT [--level L]         prompt dedup (white space and case ignored)
    cascade data decontaminate IN... -o OUT -b NAME=FILE[:FORMAT] ...  9-gram decontamination, templates aside
    cascade data constrain IN... -o OUT [--families ifeval,iftrain]   IF-RL rows from real texts
    cascade data classify IN... -o OUT [--drop math,code]  each prompt's topic: math, code or other
    cascade data check-disjoint --sft A --rlhf B --rl C  prompts shared between stages; math / code in RLHF
    cascade data difficulty IN -o OUT --model SPEC      pass-rate filters (math 16 samples, code 8/8 and 0/8)
    cascade data code-filter IN... -o OUT               Code RL problems whose tests the reward can trust
    cascade data verify IN -o OUT                       drop responses that disagree with the ground truth
    cascade data offtopic IN -o OUT --strong SPEC --weak SPEC   off-topic RM pairs (appendix C.1)
    cascade data export IN... --to verl -o OUT.parquet   RL rows as verl's dataset (docs/integrations.md)
    cascade data workplace -o DIR --train N --eval M    workplace-assistant tasks, evaluation held out
"""

from __future__ import annotations

from collections.abc import Callable
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
    note,
    open_generator,
    option_groups,
    parse_pairs,
    sampling_options,
    say,
    split_format,
    stdout,
)

app = command_group("Data curation: convert, dedup, decontaminate, constrain, difficulty, offtopic, ...")


@dataclass
class Job:
    """The files of a data job and how it runs: resumed unless told, malformed rows stop it
    unless counted (:mod:`cascade_rl.data.job`)."""

    inputs: list[Path] = typer.Argument(..., help="Input JSONL / JSON / Parquet files (read in order).")
    output: Path = typer.Option(
        ..., "-o", "--output", help="Output JSONL; OUTPUT.summary.json records progress and counts."
    )
    skip_malformed: bool = typer.Option(
        False, "--skip-malformed", help="Count malformed rows (with an example file:line) instead of stopping."
    )
    overwrite: bool = typer.Option(False, "--overwrite", help="Start again instead of resuming an earlier run.")
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar.")

    def settings(self) -> dict[str, Any]:
        """The keyword arguments every job function of the library takes."""
        return {"skip_malformed": self.skip_malformed, "overwrite": self.overwrite, "progress": not self.quiet}

    def run(self, title: str, work: Callable[[], Any]) -> Any:
        """Run ``work`` (a job); print its kept / dropped summary, or fail on a data error."""
        from cascade_rl.data.rows import DataError

        try:
            summary = work()
        except DataError as error:
            raise fail(error) from None
        print_summary(title, self.output, summary)
        return summary


def print_summary(title: str, output: Path, summary: Any) -> None:
    """The kept / dropped table of a job, and the command's own tables."""
    table = Table(title=f"{title} -> {output}")
    for column in ("rows", "count", "example"):
        table.add_column(column, justify="right" if column == "count" else "left", overflow="fold")
    table.add_row("read", str(summary.read), "")
    table.add_row("kept", str(summary.kept), f"{summary.written} rows written")
    for reason, count in summary.dropped.most_common():
        table.add_row(f"dropped: {reason}", str(count), summary.examples.get(reason, ""))
    stdout.print(table)
    for name, rows in summary.extra.items():
        if isinstance(rows, list) and rows and isinstance(rows[0], dict):
            extra = Table(title=name)
            for column in rows[0]:
                extra.add_column(str(column), overflow="fold")
            for row in rows:
                extra.add_row(*(str(row[c]) for c in rows[0]))
            stdout.print(extra)


def names(text: str) -> list[str]:
    """``"a, b"`` -> ``["a", "b"]``."""
    return [part.strip() for part in text.split(",") if part.strip()]


@app.command()
@option_groups(job=Job)
def convert(
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
    split: str | None = typer.Option(
        None, "--split", help="mbpp: train, test, validation, prompt or all (MBPP's split by task_id) [default: all]."
    ),
    option: list[str] = typer.Option(
        [],
        "--option",
        help="A converter option KEY=VALUE, as a recipe's format_options (e.g. taxonomy=ifeval, modes=think); "
        "repeatable.",
    ),
    *,
    job: Job,
) -> None:
    """Convert public formats (NeMo Gym RL rows, OpenAI messages, HelpSteer, AIME, IFEval /
    IFBench, GSM8K, LiveCodeBench, TACO / APPS, MBPP, HumanEval, MMLU / MMLU-Pro / GPQA, BFCL,
    SWE-bench) and the paper's released Nemotron-Cascade and Cascade 2 datasets to the project's
    schemas (docs/data-formats.md)."""
    from cascade_rl.data.commands import convert_files

    fields = parse_pairs(rename, "OURS=THEIRS", "--rename")
    extra = {key: _option_value(value) for key, value in parse_pairs(option, "KEY=VALUE", "--option").items()}
    options = {"suffix": suffix, "domain": domain, "tests": tests, "answers": answers, "split": split}
    job.run(
        f"convert --format {fmt}",
        lambda: convert_files(job.inputs, job.output, fmt, rename=fields, **options, options=extra, **job.settings()),
    )


def _option_value(text: str) -> Any:
    """A converter option's value: JSON when it parses as JSON (numbers, lists), else the text."""
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


@app.command()
def export(
    inputs: list[Path] = typer.Argument(..., help="RL rows (JSONL / Parquet: prompt, domain, reference fields)."),
    to: str = typer.Option(..., "--to", help="Target engine's dataset format: verl."),
    output: Path = typer.Option(..., "-o", "--output", help="Output file (verl: .parquet)."),
    split: str = typer.Option("train", "--split", help="The split named in each row's extra_info."),
    skip_malformed: bool = typer.Option(
        False, "--skip-malformed", help="Count malformed rows by reason instead of stopping at the first."
    ),
) -> None:
    """Export RL rows for another engine: --to verl writes verl's parquet rows (data_source, prompt,
    ability, reward_model.ground_truth, extra_info), scored by the reward function
    cascade_rl.integrations.verl:compute_score (docs/integrations.md)."""
    from cascade_rl.data.rows import DataError
    from cascade_rl.integrations.verl import export_verl

    if to != "verl":
        raise fail(f"--to {to!r}: the formats are: verl")
    try:
        written, skipped = export_verl(inputs, output, split=split, skip_malformed=skip_malformed)
    except DataError as error:
        raise fail(error) from None
    table = Table(title=f"export --to verl -> {output}")
    for column in ("rows", "count"):
        table.add_column(column, justify="right" if column == "count" else "left", overflow="fold")
    table.add_row("written", str(written))
    for reason, count in skipped.most_common():
        table.add_row(f"skipped: {reason}", str(count))
    stdout.print(table)


@app.command()
def formats() -> None:
    """List the input formats of `cascade data convert`."""
    from cascade_rl.data.formats import FORMATS

    table = Table(title="cascade data convert --format")
    table.add_column("format")
    table.add_column("writes")
    for name, fmt in FORMATS.items():
        table.add_row(name, fmt.writes + ("" if fmt.name == name else f" (alias of {fmt.name})"))
    stdout.print(table)


@app.command()
@option_groups(job=Job)
def dedup(
    key: str | None = typer.Option(
        None, "--key", help="Dedup on this field (dotted path) [default: the prompt's turns, roles and modes]."
    ),
    level: str = typer.Option(
        "whitespace-case",
        "--level",
        help="What two prompts may differ in and still be one: exact | whitespace | whitespace-case | "
        "whitespace-case-punctuation.",
    ),
    *,
    job: Job,
) -> None:
    """Dedup of prompts (SPEC 3): the first row of each prompt is kept, prompts compared at
    --level (default: white space and case ignored; the thinking mode of a turn counts, so
    parallel think / no_think samples both stay). The summary names the level."""
    from cascade_rl.data.commands import dedup_files
    from cascade_rl.data.hygiene import DEDUP_LEVELS

    if level not in DEDUP_LEVELS:
        raise fail(f"--level must be one of {', '.join(DEDUP_LEVELS)}, got {level!r}")
    job.run(f"dedup ({level})", lambda: dedup_files(job.inputs, job.output, key=key, level=level, **job.settings()))


@app.command()
@option_groups(job=Job)
def decontaminate(
    benchmark: list[str] = typer.Option(
        ...,
        "--benchmark",
        "-b",
        help="NAME=FILE[:FORMAT[,KEY=VALUE...]]: a benchmark's rows, read as they are (a question, prompt or "
        "messages field) or converted from a public format first, with its options (e.g. "
        "mbpp=mbpp.jsonl:mbpp,split=test); repeatable.",
    ),
    n: int = typer.Option(9, "-n", min=1, help="n-gram length (paper: 9)."),
    text: str = typer.Option(
        "prompt",
        "--text",
        help="What of a training row is compared: prompt, all (replies too) or the name of a text field "
        "(e.g. base_text: the request of `constrain` rows, without the constraint templates).",
    ),
    template: float = typer.Option(
        0.5,
        "--template",
        min=0.0,
        max=1.0,
        help="A run of 4 or more words that this share of a benchmark's questions carry is its template (an "
        "instruction its rows share), not matched; 0: every n-gram matches, the paper's literal rule.",
    ),
    warn_above: float = typer.Option(
        0.1,
        "--warn-above",
        min=0.0,
        max=1.0,
        help="Warn, naming the n-grams, when more than this share of the rows is dropped.",
    ),
    *,
    job: Job,
) -> None:
    """Drop every row that shares an n-gram with a benchmark's questions (SPEC 3), the benchmark's
    own template aside; the summary says how many rows each benchmark removed, its template and
    the n-grams that removed most."""
    from cascade_rl.data.commands import decontaminate_files, dropped_too_much

    if not text.strip():
        raise fail("--text must be prompt, all or a field name")
    benchmarks = {
        name: split_format(where, "--benchmark")
        for name, where in parse_pairs(benchmark, "NAME=FILE[:FORMAT]", "--benchmark").items()
    }
    field = None if text in ("prompt", "all") else text
    summary = job.run(
        f"decontaminate ({n}-grams)",
        lambda: decontaminate_files(
            job.inputs,
            job.output,
            benchmarks,
            n=n,
            all_text=text == "all",
            field=field,
            template=template or None,
            **job.settings(),
        ),
    )
    warning = dropped_too_much(summary, warn_above)
    if warning:
        note(warning)


@app.command()
@option_groups(job=Job)
def constrain(
    text_field: str | None = typer.Option(
        None,
        "--text-field",
        help="Field holding the text (dotted path; a string or chat messages) [default: the row's prompt / "
        "question (GSM8K), else `text` (MBPP)].",
    ),
    constraints: str = typer.Option("1-3", "--constraints", help="Constraints per row: N or LOW-HIGH."),
    families: str = typer.Option(
        "ifeval",
        "--families",
        help="Instruction families, comma-separated: ifeval (IFEval's 25), iftrain (IFBench training).",
    ),
    exclude_ids: str = typer.Option(
        "", "--exclude-ids", help="Instruction ids never drawn, comma-separated (a `family:` prefix excludes a family)."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the draws (each row's draw also depends on its file and id)."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Build at most this many rows (the first texts)."),
    where: str | None = typer.Option(
        None,
        "--where",
        help="Only rows with FIELD=LOW..HIGH (numbers, inclusive) or FIELD=VALUE, e.g. task_id=601..974.",
    ),
    id_prefix: str | None = typer.Option(
        None, "--id-prefix", help="Row ids are PREFIX-ID-if [default: the input's folder and name, e.g. gsm8k-train]."
    ),
    *,
    job: Job,
) -> None:
    """IF-RL rows from real texts (SPEC 6): each text followed by verifiable constraints of the
    IFEval / IFBench-training families, described in the verifier's own wording, with kwargs and
    combinations that a response can satisfy (each row is checked against a constructed answer).
    Decontaminate them with `decontaminate --text base_text`."""
    from cascade_rl.data.constrain.files import constrain_files

    draws = {"constraints": constraints, "families": names(families), "exclude_ids": names(exclude_ids)}
    selection = {"seed": seed, "limit": limit, "where": where, "prefix": id_prefix}
    job.run(
        f"constrain ({families}, {constraints} per row, seed {seed})",
        lambda: constrain_files(job.inputs, job.output, text_field=text_field, **draws, **selection, **job.settings()),
    )


@app.command()
@option_groups(job=Job)
def classify(
    drop: str = typer.Option("", "--drop", help="Topics left out, comma-separated, e.g. math,code."),
    text_field: str | None = typer.Option(
        None, "--text-field", help="Field holding the text, a dotted path (default: the row's prompt / question)."
    ),
    explain: bool = typer.Option(False, "--explain", help="Add topic_evidence: the rules that matched."),
    *,
    job: Job,
) -> None:
    """Label each row's `topic`: math, code (competitive programming and programming exercises)
    or other, by a documented rule (data/topics.py; precision and recall on real prompts in
    docs/data-formats.md). `--drop math,code` keeps them out of RLHF prompts (SPEC 1, 6) and
    counts them."""
    from cascade_rl.data.commands import classify_files
    from cascade_rl.data.topics import parse_topics

    try:
        dropped = parse_topics(drop, "--drop") if drop.strip() else []
    except ValueError as error:
        raise fail(error) from None
    title = f"classify (dropping {', '.join(dropped)})" if dropped else "classify"
    job.run(
        title,
        lambda: classify_files(
            job.inputs, job.output, drop=dropped, text_field=text_field, explain=explain, **job.settings()
        ),
    )


@app.command("check-disjoint")
def check_disjoint(
    sft: list[Path] = typer.Option([], "--sft", help="SFT data files, directories or glob patterns (repeatable)."),
    rlhf: list[Path] = typer.Option([], "--rlhf", help="RLHF / reward-model data (files, directories; repeatable)."),
    rl: list[Path] = typer.Option([], "--rl", help="Other RL stage data (files, directories; repeatable)."),
    write_dir: Path | None = typer.Option(
        None, "--write-dir", help="Write disjoint copies here: a later stage loses the prompts an earlier one has."
    ),
) -> None:
    """Prompts shared between the SFT, RLHF and RL sets (SPEC 1: SFT and RL prompts strictly
    disjoint), and math and code prompts in the RLHF set (kept out of RLHF; the topic rule of
    `cascade data classify`). Exit code 1 when any are found; --write-dir writes copies without
    them."""
    from cascade_rl.data.commands import check_disjoint as check
    from cascade_rl.data.rows import DataError

    groups = {name: paths for name, paths in (("sft", sft), ("rlhf", rlhf), ("rl", rl)) if paths}
    if len(groups) < 2 and "rlhf" not in groups:
        raise fail("give at least two of --sft, --rlhf, --rl (or --rlhf alone: its math and code prompts)")
    try:
        report = check(groups, write_dir)
    except DataError as error:
        raise fail(error) from None
    table = Table(title="prompts shared between stages")
    for column in ("sets", "shared prompts", "example"):
        table.add_column(column, overflow="fold")  # a file:line example is never cut
    for row in report["pairs"]:
        table.add_row(row["sets"], str(row["shared"]), row["example"])
    stdout.print(table)
    if report["rlhf_topics"]:
        topics = Table(title="math and code prompts in the RLHF set")
        for column in ("topic", "prompts", "example"):
            topics.add_column(column, overflow="fold")
        for row in report["rlhf_topics"]:
            topics.add_row(row["topic"], str(row["prompts"]), row["example"])
        stdout.print(topics)
    for name, count in report["prompts"].items():
        say(f"{name}: {count} distinct prompts")
    if write_dir is not None:
        say(f"disjoint copies in {write_dir}")
    if any(row["shared"] for row in report["pairs"]) or any(row["prompts"] for row in report["rlhf_topics"]):
        raise typer.Exit(EXIT_PROBLEMS)


def open_model(spec: str, option: str, concurrency: int) -> Any:
    """A model of a data job, servers limited to ``concurrency`` requests (a local model
    generates that many sequences at once, through vLLM when it runs the model here)."""
    from cascade_rl.llm.transport import is_server_spec
    from cascade_rl.llm.vllm_engine import choose_engine

    local: dict[str, Any] = {"batch_size": max(1, concurrency)}
    path = Path(spec.removeprefix("local:")).expanduser()
    if not is_server_spec(spec) and path.is_dir():
        choice = choose_engine("auto", path)
        local["engine"] = choice.engine
        say(f"{option}: sampling with {'vLLM' if choice.vllm else 'llm/decode.py: ' + choice.reason}")
    return open_generator(spec, option=option, server={"max_concurrency": concurrency}, local=local)


#: the sampling flags of the commands that sample (one Sampling value each; their own budgets)
RejectionSampling = sampling_options(512)
DifficultySampling = sampling_options(32768)
OfftopicSampling = sampling_options(4096, top_k=False)


@app.command("rejection-sample")
@option_groups(job=Job, sample=RejectionSampling)
def rejection_sample(
    model: str = typer.Option(..., "--model", "-m", help=f"The model that answers. {GENERATOR_HELP}"),
    k: int = typer.Option(4, "-k", min=1, help="Samples per prompt."),
    keep: int = typer.Option(1, "--keep", min=1, help="Accepted responses kept per prompt (distinct)."),
    pass_threshold: float = typer.Option(1.0, "--pass-threshold", help="Accept a response whose reward reaches this."),
    domain: str | None = typer.Option(None, "--domain", help="Reward domain of every row [default: each row's]."),
    mode: str = typer.Option("no_think", "--mode", help="Thinking mode of the prompts (think / no_think)."),
    concurrency: int = typer.Option(64, "--concurrency", help="Requests in flight per server (local: batch size)."),
    batch_size: int = typer.Option(64, "--batch-size", help="Prompts per batch (progress is saved after each)."),
    workers: int = typer.Option(4, "--workers", help="Parallel scorers (the code sandbox pool size)."),
    *,
    job: Job,
    sample: RejectionSampling,
) -> None:
    """SFT rows from a model's own answers that each RL row's verifier accepts (rejection
    sampling, SPEC 3): k samples per prompt, up to --keep accepted ones kept with the row's
    reference fields; prompts without one are dropped and counted."""
    from cascade_rl.data.difficulty import check_rl_inputs
    from cascade_rl.data.rejection import rejection_sample as sample_and_keep

    def work() -> Any:
        check_rl_inputs(job.inputs, domain, skip_malformed=job.skip_malformed)  # bad rows fail before models load
        return sample_and_keep(
            job.inputs,
            job.output,
            open_model(model, "--model", concurrency),
            k=k,
            keep=keep,
            domain=domain,
            mode=mode,
            pass_threshold=pass_threshold,
            sampling=sample.sampling(),
            workers=workers,
            batch_size=batch_size,
            spec=model,
            **job.settings(),
        )

    job.run("rejection-sample", work)


@app.command()
@option_groups(job=Job, sample=DifficultySampling)
def difficulty(
    model: str = typer.Option(..., "--model", "-m", help=f"The reference / 8B-class model. {GENERATOR_HELP}"),
    preset: str = typer.Option("math", "--preset", help="Paper settings: math (16 samples, drop >= 0.75) or code."),
    k: int | None = typer.Option(None, "-k", min=1, help="Samples per prompt [math 16, code 8]."),
    max_pass_rate: float | None = typer.Option(
        None, "--drop-at-or-above", help="Drop prompts the model solves at least this often [math 0.75, code 1.0]."
    ),
    strong_model: str | None = typer.Option(None, "--strong-model", help=f"Strong model (code). {GENERATOR_HELP}"),
    strong_k: int | None = typer.Option(None, "--strong-k", min=1, help="Strong-model samples per prompt [8]."),
    min_pass_rate: float | None = typer.Option(
        None, "--strong-drop-at-or-below", help="Drop prompts the strong model solves at most this often [code 0]."
    ),
    domain: str | None = typer.Option(None, "--domain", help="Reward domain of every row [default: each row's]."),
    mode: str = typer.Option("think", "--mode", help="Thinking mode of the prompts (think / no_think)."),
    concurrency: int = typer.Option(16, "--concurrency", help="Requests in flight per server (local: batch size)."),
    batch_size: int = typer.Option(32, "--batch-size", help="Prompts per batch (progress is saved after each)."),
    workers: int = typer.Option(4, "--workers", help="Parallel scorers (the code sandbox pool size)."),
    *,
    job: Job,
    sample: DifficultySampling,
) -> None:
    """Pass rates over k samples and the paper's difficulty filters (SPEC 6): math drops the
    problems a reference model solves >= 75% of 16 times; code drops those an 8B-class model
    solves 8/8 or a strong model 0/8. Kept rows get `pass_rate` (and `strong_pass_rate`)."""
    from cascade_rl.data.difficulty import PRESETS, PassRateFilter, check_rl_inputs, filter_difficulty

    if preset not in PRESETS:
        raise fail(f"--preset must be one of {', '.join(PRESETS)}")
    settings = PRESETS[preset]

    def rules() -> list:
        reference = PassRateFilter(
            open_model(model, "--model", concurrency),
            k or settings["k"],
            drop_at_or_above=settings["drop_at_or_above"] if max_pass_rate is None else max_pass_rate,
            spec=model,
        )
        if not strong_model:
            return [reference]
        strong = PassRateFilter(
            open_model(strong_model, "--strong-model", concurrency),
            strong_k or settings["strong_k"],
            drop_at_or_below=settings["strong_drop_at_or_below"] if min_pass_rate is None else min_pass_rate,
            column="strong_pass_rate",
            name="strong model",
            spec=strong_model,
        )
        return [reference, strong]

    def work() -> Any:
        check_rl_inputs(job.inputs, domain, skip_malformed=job.skip_malformed)  # bad rows fail before models load
        sampling = sample.sampling()
        return filter_difficulty(
            job.inputs,
            job.output,
            rules(),
            domain=domain,
            mode=mode,
            sampling=sampling,
            workers=workers,
            batch_size=batch_size,
            **job.settings(),
        )

    job.run(f"difficulty ({preset})", work)


@app.command("code-filter")
@option_groups(job=Job)
def code_filter(
    solutions: int = typer.Option(3, "--solutions", min=0, help="Reference solutions tried per problem."),
    mutants: int = typer.Option(10, "--mutants", min=0, help="Mutants of the passing solution run on the tests."),
    max_survival: float = typer.Option(
        0.2, "--max-survival", min=0.0, max=1.0, help="Drop a problem when more of its mutants than this pass."
    ),
    variants: int = typer.Option(
        8, "--variants", min=0, help="New inputs telling a surviving mutant from an equivalent one (stdin tests)."
    ),
    time_limit: float = typer.Option(6.0, "--time-limit", min=0.1, help="Seconds per test of a reference solution."),
    mutant_time_limit: float = typer.Option(
        2.0, "--mutant-time-limit", min=0.1, help="Seconds per test of a mutant (slower counts as killed)."
    ),
    workers: int = typer.Option(4, "--workers", min=1, help="Sandboxes running programs in parallel."),
    keep_solutions: bool = typer.Option(False, "--keep-solutions", help="Keep the solutions field in the output."),
    seed: int = typer.Option(0, "--seed", help="Seed of the mutation sites."),
    *,
    job: Job,
) -> None:
    """Code RL's data filter (SPEC 6): drop interactive and special-judge problems, problems whose
    reference solutions fail their own tests (run in the sandbox), problems whose tests let
    mutated solutions pass (weak tests), and later copies of a source URL; counts per reason."""
    from cascade_rl.data.code_filter import FilterSettings, code_filter_files

    settings = FilterSettings(
        max_solutions=solutions,
        mutants=mutants,
        max_survival=max_survival,
        variants=variants,
        time_limit=time_limit,
        mutant_time_limit=mutant_time_limit,
        workers=workers,
        keep_solutions=keep_solutions,
        seed=seed,
    )
    job.run("code-filter", lambda: code_filter_files(job.inputs, job.output, settings=settings, **job.settings()))


@app.command()
@option_groups(job=Job)
def verify(
    workers: int = typer.Option(4, "--workers", help="Parallel scorers (the code sandbox pool size)."),
    *,
    job: Job,
) -> None:
    """Drop SFT responses that disagree with their ground truth (SPEC 3): rows with a reward
    `domain` and its reference fields (answer, tests, ...) are scored on their last assistant
    turn; rows without a domain are kept."""
    from cascade_rl.data.difficulty import verify_responses

    job.run("verify", lambda: verify_responses(job.inputs, job.output, workers=workers, **job.settings()))


@app.command()
@option_groups(job=Job, sample=OfftopicSampling)
def offtopic(
    strong: str = typer.Option(..., "--strong", help=f"Answers the rewritten prompt (rejected). {GENERATOR_HELP}"),
    weak: str = typer.Option(..., "--weak", help=f"Answers the original prompt (chosen). {GENERATOR_HELP}"),
    judge: str | None = typer.Option(None, "--judge", help=f"YES/NO judge [default: --strong]. {GENERATOR_HELP}"),
    rewriter: str | None = typer.Option(None, "--rewriter", help="Rewrites prompts [default: --strong]."),
    same_threshold: float = typer.Option(
        0.5, "--same-threshold", help="Drop a rewrite the judge says asks the same thing with P(YES) >= this."
    ),
    mode: str = typer.Option("no_think", "--mode", help="Thinking mode of every request."),
    concurrency: int = typer.Option(16, "--concurrency", help="Requests in flight per server (local: batch size)."),
    batch_size: int = typer.Option(16, "--batch-size", help="Prompts per batch (progress is saved after each)."),
    *,
    job: Job,
    sample: OfftopicSampling,
) -> None:
    """Off-topic reward-model pairs (SPEC 4, appendix C.1): rewrite each prompt into a related
    but different one, keep it if the YES/NO judge says it asks something else, answer it with
    the strong model (rejected) and the original with the weak model (chosen)."""
    from cascade_rl.data.job import prevalidate
    from cascade_rl.data.offtopic import instruction_of, offtopic_pairs

    specs = {"strong": strong, "weak": weak, "judge": judge or strong, "rewriter": rewriter or strong}

    def work() -> Any:
        prevalidate(job.inputs, instruction_of, skip_malformed=job.skip_malformed)  # bad rows fail before models load
        sampling = sample.sampling()
        return offtopic_pairs(
            job.inputs,
            job.output,
            offtopic_models(specs, concurrency),
            same_threshold=same_threshold,
            sampling=sampling,
            mode=mode,
            batch_size=batch_size,
            **job.settings(),
        )

    job.run("offtopic", work)


def offtopic_models(specs: dict[str, str], concurrency: int) -> Any:
    """The four models of ``offtopic``, each opened once however many roles it plays."""
    from cascade_rl.data.offtopic import OfftopicModels
    from cascade_rl.llm import YesNoJudge

    opened: dict[str, Any] = {}
    for role, spec in specs.items():
        if spec not in opened:
            opened[spec] = open_model(spec, f"--{role}", concurrency)
    role = {name: opened[spec] for name, spec in specs.items()}
    judge = YesNoJudge(role["judge"], prefix="")
    return OfftopicModels(role["strong"], role["weak"], judge, role["rewriter"], specs)


@app.command()
def workplace(
    output: Path = typer.Option(
        ..., "-o", "--output", help="Folder for workplace_train.jsonl and workplace_eval.jsonl."
    ),
    train: int = typer.Option(2000, "--train", min=0, help="Training tasks."),
    evaluation: int = typer.Option(200, "--eval", min=0, help="Held-out evaluation tasks (drawn first)."),
    exclude: list[Path] = typer.Option(
        [],
        "--exclude",
        exists=True,
        dir_okay=False,
        help="JSONL of workplace rows to hold out too (NeMo Gym or RL rows); repeatable.",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the draws."),
    form: str = typer.Option(
        "rl",
        "--form",
        help="rl (domain workplace rows), nemo-gym (NVIDIA's published form) or sft (each task's reference "
        "episode with the tools' real results, for an SFT stage; --eval 0 --exclude EVAL.jsonl holds them "
        "apart from a benchmark drawn before).",
    ),
) -> None:
    """Workplace-assistant tasks from its five databases (Nemotron-Cascade 2's multi-domain RL):
    requests with the reference calls that do them; no training task repeats a held-out task's
    request or reference calls (the evaluation set, and the --exclude files)."""
    import json

    from cascade_rl.data.workplace import FORMS, write_tasks

    if form not in FORMS:
        raise fail(f"--form must be one of {', '.join(FORMS)}, got {form!r}")
    rows = []
    for path in exclude:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            try:
                rows.extend([json.loads(line)] if line.strip() else [])
            except json.JSONDecodeError:
                raise fail(f"{path}:{number}: invalid JSON") from None
    report = write_tasks(output, train=train, evaluation=evaluation, seed=seed, exclude=rows, form=form)
    table = Table(title=f"workplace tasks -> {output}")
    table.add_column("file or rejection")
    table.add_column("rows", justify="right")
    for name, count in {**report.written, **report.rejected}.items():
        table.add_row(name, str(count))
    stdout.print(table)
