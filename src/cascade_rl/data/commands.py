"""The row-level data commands as library functions (SPEC section 3 data hygiene; section 1 stage
disjointness): conversion, exact dedup, n-gram decontamination against named benchmarks, the
topic of each prompt (math / code / other, for RLHF prompt hygiene), and the check that SFT,
RLHF and RL prompt sets share no prompt and that RLHF holds no math or code prompt. Each runs through
:func:`cascade_rl.data.job.run_job` (progress, resumable output, summary, malformed rows named
by file and line); the commands are :mod:`cascade_rl.cli.data`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from cascade_rl.data.convert import MBPP_SPLITS
from cascade_rl.data.formats import FORMATS, converted, format_options, load_answers
from cascade_rl.data.hygiene import DEFAULT_DEDUP_LEVEL, NgramIndex, check_dedup_level, dedup_text
from cascade_rl.data.job import Drop, Keep, Summary, run_job
from cascade_rl.data.rows import (
    DataError,
    Row,
    RowError,
    check_input,
    data_files,
    iter_rows,
    normal_text,
    pluck,
    prompt_key,
    prompt_messages,
    prompt_text,
    rename_fields,
    row_text,
)
from cascade_rl.data.topics import TOPICS, classify


def convert_files(
    inputs: Sequence[Path],
    output: Path,
    fmt: str,
    *,
    rename: Mapping[str, str] | None = None,
    suffix: str | None = None,
    domain: str | None = None,
    tests: str = "all",
    answers: Path | None = None,
    split: str | None = None,
    options: Mapping[str, Any] | None = None,
    **job: Any,
) -> Summary:
    """Convert ``inputs`` from format ``fmt`` (:data:`cascade_rl.data.formats.FORMATS`);
    ``options`` are the converter's own (``format_options`` of a recipe), checked against it."""
    if fmt not in FORMATS:
        raise DataError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    if tests not in ("all", "public"):
        raise DataError(f"--tests must be 'all' or 'public', got {tests!r}")
    spec = FORMATS[fmt]
    extra: dict[str, Any] = {"suffix": spec.suffix if suffix is None else suffix}
    if domain is not None or spec.name == "nemo-gym":
        extra["domain"] = domain
    if spec.name == "livecodebench":
        extra["tests"] = tests
    if spec.name == "bfcl" and answers is not None:
        extra["answers"] = load_answers(check_input(answers))
    if split is not None:
        if spec.name != "mbpp":
            raise DataError(f"--split is an option of mbpp, not of {spec.name}")
        if split != "all" and split not in MBPP_SPLITS:
            raise DataError(f"--split must be all or one of {', '.join(MBPP_SPLITS)}, got {split!r}")
        extra["split"] = split
    try:
        extra = format_options(spec, {**extra, **(options or {})}, f"format {spec.name}")
    except ValueError as error:
        raise DataError(str(error)) from None
    renames = dict(rename or {})

    def process(rows: Sequence[Row]) -> list:
        outcomes: list = []
        for row in rows:
            try:
                result = spec.convert(rename_fields(dict(row.data), renames), **extra)
            except RowError as error:
                outcomes.append(error)
                continue
            outcomes.append(result if isinstance(result, Drop) else Keep([result]))
        return outcomes

    settings = {"format": spec.name, "rename": renames, **{k: v for k, v in extra.items() if k != "answers"}}
    if answers is not None:
        settings["answers"] = str(answers)
    return run_job("convert", inputs, output, process, options=settings, **job)


def dedup_files(
    inputs: Sequence[Path],
    output: Path,
    *,
    key: str | None = None,
    level: str = DEFAULT_DEDUP_LEVEL,
    **job: Any,
) -> Summary:
    """Keep the first row of each prompt (the turns of
    :func:`cascade_rl.data.rows.prompt_key`, or the value of the field ``key``), texts compared
    at ``level`` (:data:`cascade_rl.data.hygiene.DEDUP_LEVELS`; default whitespace and case)."""
    try:
        check_dedup_level(level)
    except ValueError as error:
        raise DataError(str(error)) from None
    seen: set[str] = set()

    def key_of(data: Mapping[str, Any]) -> str:
        if key is None:
            turns, modes = json.loads(prompt_key(data))
            if not turns and not modes:
                raise RowError("no prompt found (prompt, messages, context, question, ...); pass --key")
            if level == "exact":  # prompt_key collapses white space; exact compares the raw turns
                turns = [[m["role"], m["content"]] for m in prompt_messages(data)]
            else:
                turns = [[role, dedup_text(text, level)] for role, text in turns]
            return json.dumps([turns, modes], ensure_ascii=False)
        value = pluck(data, key)
        if value is None:
            raise RowError(f"missing field {key!r}")
        return dedup_text(value if isinstance(value, str) else json.dumps(value, sort_keys=True), level)

    def process(rows: Sequence[Row]) -> list:
        outcomes: list = []
        for row in rows:
            try:
                value = key_of(row.data)
            except RowError as error:
                outcomes.append(error)
                continue
            if value in seen:
                outcomes.append(Drop("duplicate prompt"))
            else:
                seen.add(value)
                outcomes.append(Keep([row.data]))
        return outcomes

    def warm(data: dict) -> None:
        seen.add(key_of(data))

    return run_job(
        "dedup",
        inputs,
        output,
        process,
        options={"key": key, "level": level},
        warm=warm,
        extra=lambda: {"level": level},
        **job,
    )


#: a benchmark named on the command line: its file, and the public format (with converter
#: options) it is read through, or None for rows already in a layout ``prompt_text`` reads
BenchmarkFile = tuple[Path, str | None, Mapping[str, Any]]

#: the template share of ``cascade data decontaminate`` (docs/data-formats.md, decontamination)
DEFAULT_TEMPLATE_SHARE = 0.5
#: a decontamination that drops more than this share of its rows warns, naming the n-grams
DEFAULT_WARN_SHARE = 0.1


def benchmark_index(
    benchmarks: Mapping[str, Path | BenchmarkFile], n: int = 9, template: float | None = None
) -> NgramIndex:
    """The n-gram index of named benchmark files: the question text of each row, in any layout
    :func:`cascade_rl.data.rows.prompt_text` reads or converted from its public format first;
    ``template``: see :meth:`NgramIndex.add`. A row with no question is an error naming the
    benchmark and the format option."""
    if not benchmarks:
        raise DataError("name at least one benchmark: --benchmark NAME=PATH")
    index = NgramIndex(n)
    for name, given in benchmarks.items():
        path, fmt, options = given if isinstance(given, tuple) else (Path(given), None, {})
        index.add(name, _questions(name, Path(path), fmt, options), template=template)
    return index


def _questions(name: str, path: Path, fmt: str | None, options: Mapping[str, Any]) -> list[str]:
    """The question of every row of one benchmark file (a row its converter drops is left out)."""
    convert = converted(fmt, options, lambda row: row, where=f"benchmark {name}") if fmt else None
    texts = []
    for row in iter_rows(check_input(path)):
        data = row.data
        if convert is not None:
            try:
                data = convert(dict(data))
            except ValueError:
                continue  # outside the split, or not a row of this format: not a question of the benchmark
        text = prompt_text(data)
        if not text.strip():
            hint = "" if fmt else f"; name its public format: --benchmark {name}=FILE:FORMAT (cascade data formats)"
            raise DataError(f"{row.where}: benchmark {name}: no question text found{hint}")
        texts.append(text)
    if not texts:
        raise DataError(f"benchmark {name}: no question in {path}" + (f" as format {fmt}" if fmt else ""))
    return texts


def decontaminate_files(
    inputs: Sequence[Path],
    output: Path,
    benchmarks: Mapping[str, Path | BenchmarkFile],
    *,
    n: int = 9,
    all_text: bool = False,
    field: str | None = None,
    template: float | None = DEFAULT_TEMPLATE_SHARE,
    **job: Any,
) -> Summary:
    """Drop the rows that share an n-gram with any benchmark (SPEC 3), the benchmarks' templates
    aside (``template``: :meth:`NgramIndex.add`; None: the paper's literal rule). ``extra`` of the
    summary has one line per benchmark: its n-grams, its template, the rows it removed, the
    n-grams that removed most. ``field`` compares that field of each row instead of its prompt
    (e.g. the ``base_text`` of ``cascade data constrain`` rows)."""
    index = benchmark_index(benchmarks, n, template)
    removed = {name: Counter() for name in benchmarks}
    text_of = row_text if all_text else prompt_text
    if field is not None:
        text_of = partial(_field_text, field=field)

    def process(rows: Sequence[Row]) -> list:
        texts: list[str] = []
        errors: dict[int, RowError] = {}
        for number, row in enumerate(rows):
            try:
                texts.append(_checked_text(text_of(row.data), field))
            except RowError as error:
                errors[number] = error
                texts.append("")
        found = index.matches(texts)
        outcomes: list = []
        for number, (row, hits) in enumerate(zip(rows, found)):
            if number in errors:
                outcomes.append(errors[number])
                continue
            for name, gram in hits.items():
                removed[name][gram] += 1
            outcomes.append(Drop(f"shares a {n}-gram with {', '.join(sorted(hits))}") if hits else Keep([row.data]))
        return outcomes

    def extra() -> dict:
        rows = [
            {
                "benchmark": name,
                "n-grams": index.grams_per_benchmark[name],
                **({"template": _template_text(index.templates.get(name, []))} if template is not None else {}),
                "rows removed": sum(removed[name].values()),
                "by n-gram": "; ".join(f"“{gram}” {count}" for gram, count in removed[name].most_common(3)),
            }
            for name in benchmarks
        ]
        return {"per benchmark": rows}

    options = {"benchmarks": {k: _benchmark_option(v) for k, v in benchmarks.items()}, "n": n, "all_text": all_text}
    options["template"] = template
    if field is not None:
        options["field"] = field
    summary = run_job("decontaminate", inputs, output, process, options=options, extra=extra, batch_size=2048, **job)
    return summary


def _checked_text(text: str, field: str | None) -> str:
    """A training row's text to compare; none (a raw public file, read as it is) is an error: a
    row that cannot be compared must not pass as clean."""
    if not text.strip():
        where = f"field {field!r}" if field else "prompt"
        raise RowError(f"no {where} text found (convert a public format first: cascade data convert -f FORMAT)")
    return text


def _template_text(phrases: list[tuple[str, int]], shown: int = 2) -> str:
    text = "; ".join(f"“{phrase}” ({count} rows)" for phrase, count in phrases[:shown])
    return text + (f" (+{len(phrases) - shown} more)" if len(phrases) > shown else "") if phrases else "none"


def _benchmark_option(given: Path | BenchmarkFile) -> str:
    if not isinstance(given, tuple):
        return str(given)
    path, fmt, options = given
    return f"{path}:{fmt}" + "".join(f",{key}={value}" for key, value in options.items()) if fmt else str(path)


def dropped_too_much(summary: Summary, warn_share: float = DEFAULT_WARN_SHARE) -> str | None:
    """A warning when a decontamination dropped more than ``warn_share`` of what it read, naming
    the n-grams that dropped most (a template or a benchmark's house phrasing, not a copy)."""
    dropped = summary.read - summary.kept
    if not summary.read or dropped <= warn_share * summary.read:
        return None
    grams = "; ".join(
        f"{row['benchmark']}: {row['by n-gram']}" for row in summary.extra.get("per benchmark", []) if row["by n-gram"]
    )
    return (
        f"decontamination dropped {dropped} of {summary.read} rows ({dropped / summary.read:.0%}), mostly by "
        f"{grams}. If these are instructions the benchmark's rows share rather than its questions, lower "
        "--template (a share of its rows) to count them as its template"
    )


def _field_text(data: Mapping[str, Any], field: str) -> str:
    """The text of one field (dotted path): a string, or the user / system text of messages."""
    value = pluck(data, field)
    if isinstance(value, list):
        value = prompt_text({"prompt": value})
    if not isinstance(value, str):
        raise RowError(f"missing text field {field!r}")
    return value


def classify_files(
    inputs: Sequence[Path],
    output: Path,
    *,
    drop: Sequence[str] = (),
    text_field: str | None = None,
    explain: bool = False,
    **job: Any,
) -> Summary:
    """Label each row's ``topic`` (:func:`cascade_rl.data.topics.classify` of its prompt text, or
    of the field ``text_field``); rows whose topic is in ``drop`` are left out and counted.
    ``explain`` adds ``topic_evidence`` (the rules that matched). The summary's ``extra`` counts
    the rows kept of each topic (the dropped ones are its ``dropped`` reasons, ``topic math``)."""
    unknown = sorted(set(drop) - set(TOPICS))
    if unknown:
        raise DataError(f"--drop: unknown topic {unknown[0]!r}; topics: {', '.join(TOPICS)}")
    kept = {topic: 0 for topic in TOPICS if topic not in drop}
    text_of = prompt_text if text_field is None else partial(_field_text, field=text_field)

    def process(rows: Sequence[Row]) -> list:
        outcomes: list = []
        for row in rows:
            try:
                text = text_of(row.data)
            except RowError as error:
                outcomes.append(error)
                continue
            if not text.strip():
                outcomes.append(RowError("no prompt text found (prompt, messages, question, ...); pass --text-field"))
                continue
            verdict = classify(text)
            if verdict.topic in drop:
                outcomes.append(Drop(f"topic {verdict.topic}"))
                continue
            kept[verdict.topic] += 1
            labelled = {**row.data, "topic": verdict.topic}
            if explain:
                labelled["topic_evidence"] = list(verdict.evidence)
            outcomes.append(Keep([labelled]))
        return outcomes

    def warm(data: dict) -> None:  # a resumed job counts the rows it kept before
        kept[data["topic"]] += 1

    def extra() -> dict:
        return {"topics kept": [{"topic": topic, "rows": count} for topic, count in kept.items()]}

    options = {"drop": sorted(drop), "text_field": text_field, "explain": explain}
    return run_job("classify", inputs, output, process, options=options, warm=warm, extra=extra, **job)


STAGE_ORDER = ("sft", "rlhf", "rl")
#: topics kept out of RLHF prompts (SPEC sections 1 and 6)
RLHF_EXCLUDED = ("math", "code")


def _named_files(path: Path | str) -> list[Path]:
    files = data_files(path)
    if not files or not files[0].exists():
        raise DataError(f"{path}: no such file, directory or matching data files")
    return files


def check_disjoint(groups: Mapping[str, Sequence[Path]], write_dir: Path | None = None) -> dict:
    """Prompts (case-folded, whitespace-collapsed user text) shared by each pair of stage sets,
    and the math and code prompts of the RLHF set (:func:`cascade_rl.data.topics.classify`);
    with ``write_dir``, copies where each later stage (sft -> rlhf -> rl) drops the prompts of
    the earlier ones and the RLHF copy drops its math and code prompts. A path may name a
    directory of data files or a glob pattern (a released dataset as downloaded:
    :func:`cascade_rl.data.rows.data_files`)."""
    groups = {name: [file for path in paths for file in _named_files(path)] for name, paths in groups.items()}
    prompts: dict[str, dict[str, str]] = {}
    for name, paths in groups.items():
        seen: dict[str, str] = {}
        for path in paths:
            for row in iter_rows(check_input(Path(path))):
                text = normal_text(prompt_text(row.data))
                if not text:
                    raise DataError(f"{row.where}: no prompt found")
                seen.setdefault(text, row.where)
        prompts[name] = seen
    names = [name for name in STAGE_ORDER if name in prompts]
    pairs = []
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            shared = prompts[first].keys() & prompts[second].keys()
            example = next(iter(sorted(shared)), "")
            where = f"{prompts[first][example]} = {prompts[second][example]}" if example else ""
            pairs.append({"sets": f"{first} & {second}", "shared": len(shared), "example": where})
    off_topic = _rlhf_off_topic(groups.get("rlhf", ()))
    if write_dir is not None:
        _write_disjoint(groups, names, prompts, Path(write_dir), {where for where, _ in off_topic})
    topics = [
        {
            "topic": topic,
            "prompts": sum(t == topic for _, t in off_topic),
            "example": next((w for w, t in off_topic if t == topic), ""),
        }
        for topic in RLHF_EXCLUDED
    ]
    return {
        "pairs": pairs,
        "prompts": {name: len(prompts[name]) for name in names},
        "rlhf_topics": topics if "rlhf" in groups else [],
    }


def _rlhf_off_topic(paths: Sequence[Path]) -> list[tuple[str, str]]:
    """(where, topic) of every RLHF row whose prompt is math or code."""
    found = []
    for path in paths:
        for row in iter_rows(check_input(Path(path))):
            topic = classify(prompt_text(row.data)).topic
            if topic in RLHF_EXCLUDED:
                found.append((row.where, topic))
    return found


def _write_disjoint(
    groups: Mapping[str, Sequence[Path]],
    names: list[str],
    prompts: dict[str, dict[str, str]],
    write_dir: Path,
    off_topic: set[str],
) -> None:
    write_dir.mkdir(parents=True, exist_ok=True)
    earlier: set[str] = set()
    for name in names:
        for path in groups[name]:
            kept = [
                row.data
                for row in iter_rows(Path(path))
                if normal_text(prompt_text(row.data)) not in earlier and row.where not in off_topic
            ]
            target = write_dir / f"{name}-{Path(path).stem}.jsonl"
            target.write_text("".join(json.dumps(data, ensure_ascii=False) + "\n" for data in kept))
        earlier |= prompts[name].keys()
