"""The run report: what each cascade stage did to every benchmark (SPEC sections 6 and 9-10).

``build_report(run_dir)`` reads the layout the engine writes::

    run_dir/<NN-stage>/stage.json     {"index", "name", "kind", "wall_s", "status"}
    run_dir/<NN-stage>/metrics.jsonl  one JSON object per training step (missing keys tolerated)
    run_dir/<NN-stage>/eval.json      {"<benchmark>": percent} or {"<benchmark>": {"value", "k", "metric"}}

and writes ``report.md``, ``report.json`` and PNG plots under ``plots/``:

(a) one table whose rows are "after stage X" and whose columns are the evaluated benchmarks
    (like the paper's tables 2 and 4-8);
(b) a stage x benchmark matrix of changes against the previous evaluation (forgetting), each
    RL stage's own benchmark highlighted;
(c) reward and response length per step for every ``grpo`` stage;
(d) a target check: per RL stage its own benchmark's start value (the checkpoint it started
    from), end value and gain, and whether that benchmark later fell by more than the
    forgetting limit (SPEC section 1: cascaded RL resists forgetting). Which stage owns which
    benchmark, the gain and the limit come from the recipe (``eval.targets``,
    ``eval.target_gain``, ``eval.forgetting_limit``), read from the ``recipe.json`` the engine
    writes into the run directory; a run whose recipe names no targets has no target check;
(e) response length on every benchmark after each stage, and the entropy and length of the
    rollouts during each RL stage (the paper: RLHF shortens responses, IF-RL lowers entropy);
(f) for benchmarks whose samples say whether an edit applied (SWE), the share that did beside
    the exact fixes.

**Noise.** Each value comes with its standard error over prompts (``eval.json``
``extra.stderr``). Every stage is evaluated on the same prompts, so a change between two
evaluations has a *paired* standard error: that of the per-prompt differences, read from the
samples the evaluation wrote (``eval-samples/<benchmark>.jsonl``: a sample is correct when its
reward reaches the benchmark's ``pass_threshold``; an arena sample wins against the baseline's
reward-model score). A fall counts as **forgetting** only when it exceeds both the forgetting
limit and twice its paired standard error (a fall whose error is unknown: the limit alone).

Conventions: only stages with ``status == "done"`` are reported (others are listed as
unfinished). An ``eval``-kind stage evaluates the checkpoint before it, so its numbers are
merged into the preceding training stage's row; one before any training stage is the
"base model" row (``baseline`` in report.json). ``total_wall_s`` sums every finished stage's
``wall_s``, evaluation stages included. Values are in percent; changes are in points.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TRAINING_KINDS = ("sft", "reward_model", "grpo", "distill")
STAGE_KINDS = TRAINING_KINDS + ("eval",)
DEFAULT_MIN_GAIN = 10.0
#: differences of percentages carry float error (32.33 - 22.33 = 9.9999...): a change compared
#: with a target or a limit within this much of it is equal to it
ROUNDING = 1e-9
DEFAULT_FORGETTING_LIMIT = 5.0
BASELINE_LABEL = "base model"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_STAGE_DIR = re.compile(r"^\d+-")  # <NN-stage>
_NUMBER_TEXT = re.compile(r"^(\*\*)?[+-]?\d+(\.\d+)?( ± \d+(\.\d+)?)?(\*\*)?( ⚠)?$")


@dataclass
class StageRecord:
    """One finished stage as read from its directory."""

    directory: Path
    index: int
    name: str
    kind: str
    wall_s: float
    eval: dict[str, float] = field(default_factory=dict)
    eval_labels: dict[str, str] = field(default_factory=dict)
    eval_stderr: dict[str, float] = field(default_factory=dict)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    bad_metric_lines: int = 0
    #: per benchmark, each prompt's score (mean over its samples, in [0, 1]) for paired errors
    prompt_scores: dict[str, list[float]] = field(default_factory=dict)
    #: per benchmark, the mean response length of its samples (RunSummary.length_unit)
    response_length: dict[str, float] = field(default_factory=dict)
    #: per benchmark, the percentage of samples with each boolean detail of SAMPLE_RATES set
    sample_rates: dict[str, dict[str, float]] = field(default_factory=dict)

    def merge_evaluation(self, other: StageRecord) -> None:
        """Take an evaluation stage's results as this stage's (it evaluated this checkpoint)."""
        self.eval.update(other.eval)
        self.eval_labels.update(other.eval_labels)
        self.eval_stderr.update(other.eval_stderr)
        self.prompt_scores.update(other.prompt_scores)
        self.response_length.update(other.response_length)
        self.sample_rates.update(other.sample_rates)


@dataclass
class TargetCheck:
    """The own-domain gain of one RL stage and whether its benchmark was later forgotten."""

    stage: str
    benchmark: str
    start: float | None
    end: float | None
    min_gain: float
    worst_later_value: float | None = None
    worst_later_stage: str | None = None
    forgetting_limit: float = DEFAULT_FORGETTING_LIMIT
    finished: bool = True  # False: the run has no finished stage of this name
    fall_stderr: float | None = None  # paired standard error of the later fall
    gain_stderr: float | None = None  # paired standard error of the stage's own change

    @property
    def delta(self) -> float | None:
        return None if self.start is None or self.end is None else self.end - self.start

    @property
    def gain_met(self) -> bool:
        return self.delta is not None and self.delta >= self.min_gain - ROUNDING

    @property
    def later_fall(self) -> float | None:
        if self.end is None or self.worst_later_value is None:
            return None
        return max(0.0, self.end - self.worst_later_value)

    @property
    def forgetting_met(self) -> bool:
        return not is_forgetting(self.later_fall, self.fall_stderr, self.forgetting_limit)

    @property
    def fall_text(self) -> str | None:
        if self.later_fall is None:
            return None
        return f"{self.later_fall:.1f}" + (f" ± {self.fall_stderr:.1f}" if self.fall_stderr is not None else "")

    def problems(self) -> list[str]:
        """Plain sentences for every part of the target that is not met."""
        found = []
        if not self.finished:
            found.append(
                f"`{self.stage}`: no finished stage of that name in this run, so {self.benchmark} is unchecked"
            )
        elif self.end is None:
            found.append(f"`{self.stage}`: {self.benchmark} was not evaluated after the stage")
        elif self.start is None:
            found.append(
                f"`{self.stage}`: no {self.benchmark} value for the checkpoint it started from, so its gain is unknown"
            )
        elif not self.gain_met:
            found.append(
                f"`{self.stage}`: {self.benchmark} changed by {self.delta:+.1f} points "
                f"({self.start:.1f} -> {self.end:.1f}); target +{self.min_gain:.1f}, "
                f"short by {self.min_gain - self.delta:.1f}"
            )
        if not self.forgetting_met:
            noise = f"; more than twice its standard error ({2 * self.fall_stderr:.1f})" if self.fall_stderr else ""
            found.append(
                f"{self.benchmark} fell {self.fall_text} points after `{self.stage}` "
                f"(lowest after `{self.worst_later_stage}`); limit {self.forgetting_limit:.1f}, "
                f"over by {self.later_fall - self.forgetting_limit:.1f}{noise}"
            )
        return found

    def within_noise(self) -> bool:
        """A fall over the limit that is not forgetting because it is within twice its error."""
        fall = self.later_fall
        return fall is not None and fall > self.forgetting_limit and self.forgetting_met

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "benchmark": self.benchmark,
            "start": self.start,
            "end": self.end,
            "delta": self.delta,
            "min_gain": self.min_gain,
            "gain_met": self.gain_met,
            "later_fall": self.later_fall,
            "worst_later_stage": self.worst_later_stage,
            "delta_stderr": self.gain_stderr,
            "later_fall_stderr": self.fall_stderr,
            "forgetting_limit": self.forgetting_limit,
            "forgetting_met": self.forgetting_met,
            "finished": self.finished,
            "met": not self.problems(),
            "problems": self.problems(),
        }


def is_forgetting(fall: float | None, stderr: float | None, limit: float) -> bool:
    """A fall (points, positive = lower) is forgetting when it exceeds the limit and, where its
    paired standard error is known, twice that error."""
    if fall is None or fall <= limit + ROUNDING:
        return False
    return stderr is None or fall > 2.0 * stderr


@dataclass
class RunSummary:
    """Everything the report shows, derived from the stage directories."""

    run_dir: Path
    rows: list[StageRecord]
    baseline: dict[str, float]
    benchmarks: list[str]
    labels: dict[str, str]
    total_wall_s: float
    unfinished: list[str]
    baseline_record: StageRecord | None = None  # the base model's evaluation, when there is one
    length_unit: str = "tokens"


# ---------------------------------------------------------------- reading the run directory


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from error


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def read_stage_info(path: Path) -> dict[str, Any]:
    """stage.json, validated: index, name, kind, wall_s, status."""
    info = _read_json(path)
    if not isinstance(info, dict):
        raise ValueError(f"{path}: expected a JSON object")
    missing = [key for key in ("index", "name", "kind") if key not in info]
    if missing:
        raise ValueError(f"{path}: missing field(s) {missing}")
    if info["kind"] not in STAGE_KINDS:
        raise ValueError(f"{path}: kind {info['kind']!r} is not one of {list(STAGE_KINDS)}")
    info["wall_s"] = _number(info.get("wall_s", 0.0), f"{path} wall_s")
    info["index"] = int(_number(info["index"], f"{path} index"))
    return info


def read_eval(path: Path) -> tuple[dict[str, float], dict[str, str], dict[str, float]]:
    """eval.json as (benchmark -> percent, benchmark -> metric label such as 'avg@4',
    benchmark -> standard error over prompts where recorded in ``extra.stderr``)."""
    if not path.exists():
        return {}, {}, {}
    raw = _read_json(path)
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected an object mapping benchmark -> value")
    values: dict[str, float] = {}
    labels: dict[str, str] = {}
    stderr: dict[str, float] = {}
    for benchmark, entry in raw.items():
        if isinstance(entry, dict):
            if "value" not in entry:
                raise ValueError(f"{path}: benchmark {benchmark!r} has no 'value'")
            values[benchmark] = _number(entry["value"], f"{path} {benchmark!r}")
            label = entry.get("metric") or (f"avg@{entry['k']}" if entry.get("k") else None)
            if label:
                labels[benchmark] = str(label)
            extra = entry.get("extra")
            if isinstance(extra, dict) and isinstance(extra.get("stderr"), (int, float)):
                stderr[benchmark] = float(extra["stderr"])
        else:
            values[benchmark] = _number(entry, f"{path} {benchmark!r}")
    return values, labels, stderr


def read_metrics(path: Path) -> tuple[list[dict[str, Any]], int]:
    """metrics.jsonl rows and the number of unreadable lines (e.g. a line cut by a kill)."""
    if not path.exists():
        return [], 0
    rows, bad = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad += 1
    return rows, bad


#: Boolean sample details whose share the report shows beside the benchmark (the SWE reward's:
#: the answer's edit applies; it is the exact fix).
SAMPLE_RATES = ("applied", "identical")


@dataclass(frozen=True)
class SampleRule:
    """How a benchmark's samples are scored per prompt: correct when the reward reaches
    ``threshold``; ``paired`` is False for metrics whose value is not a mean of per-prompt
    sample means (pass@k, majority@k), which then get no paired errors."""

    threshold: float = 1.0
    paired: bool = True


def recipe_sample_rules(run_dir: Path) -> dict[str, SampleRule]:
    """Per benchmark of the run's recipe.json, its pass threshold and whether its value is an
    average over samples (avg@k, win rate)."""
    path = Path(run_dir) / "recipe.json"
    spec = (_read_json(path).get("eval") or {}) if path.exists() else {}
    rules = {}
    for bench in spec.get("benchmarks") or []:
        if isinstance(bench, dict) and "name" in bench:
            metric = bench.get("metric", "avg@k")
            rules[str(bench["name"])] = SampleRule(
                float(bench.get("pass_threshold", 1.0)), metric in ("avg@k",) or bench.get("kind") == "arena"
            )
    return rules


def length_counter(run_dir: Path) -> tuple[Any, str]:
    """(text -> length, unit): tokens of the run's tokenizer (the toy world's, or the first
    stage checkpoint's ``tokenizer.json``), else whitespace-separated words."""
    candidates = [Path(run_dir) / "world" / "tokenizer" / "tokenizer.json"]
    candidates += sorted(Path(run_dir).glob("[0-9]*-*/model/tokenizer.json"))
    for path in candidates:
        if path.is_file():
            return _token_counter(path), "tokens"
    return (lambda text: len(text.split())), "words"


def _token_counter(path: Path) -> Any:
    from tokenizers import Tokenizer

    encode = Tokenizer.from_file(str(path)).encode
    return lambda text: len(encode(text, add_special_tokens=False).ids)


def _sample_score(record: Mapping[str, Any], threshold: float) -> float | None:
    """A sample's score in [0, 1]: an arena win against the baseline's reward-model score, or
    a verified reward reaching the threshold; None when the record has neither."""
    score, baseline = record.get("rm_score"), record.get("baseline_rm_score")
    if isinstance(score, (int, float)) and isinstance(baseline, (int, float)):
        return 1.0 if score > baseline else 0.5 if score == baseline else 0.0
    reward = record.get("reward")
    if isinstance(reward, (int, float)) and not isinstance(reward, bool):
        return 1.0 if reward >= threshold else 0.0
    return None


@dataclass
class SampleSummary:
    """What one benchmark's sample file says beyond its value."""

    prompt_scores: list[float] | None
    response_length: float | None
    rates: dict[str, float]


def read_samples(path: Path, rule: SampleRule, length: Any) -> SampleSummary:
    """Per-prompt scores (in prompt order), mean response length and detail rates of one
    ``eval-samples/<benchmark>.jsonl``; unreadable lines are skipped."""
    rows, _ = read_metrics(path)
    by_prompt: dict[int, list[float | None]] = {}
    lengths, flags = [], {name: [] for name in SAMPLE_RATES}
    for row in rows:
        index = row.get("prompt_index")
        if not isinstance(index, int):
            continue
        by_prompt.setdefault(index, []).append(_sample_score(row, rule.threshold))
        if isinstance(row.get("response"), str):
            lengths.append(length(row["response"]))
        details = row.get("details") if isinstance(row.get("details"), dict) else {}
        for name in SAMPLE_RATES:
            if isinstance(details.get(name), bool):
                flags[name].append(details[name])
    scores = [by_prompt[i] for i in sorted(by_prompt)]
    complete = rule.paired and bool(scores) and all(s is not None for group in scores for s in group)
    return SampleSummary(
        [sum(group) / len(group) for group in scores] if complete else None,  # type: ignore[arg-type]
        sum(lengths) / len(lengths) if lengths else None,
        {name: 100.0 * sum(values) / len(values) for name, values in flags.items() if values},
    )


def _read_stage_samples(record: StageRecord, rules: Mapping[str, SampleRule], length: Any) -> None:
    for benchmark in record.eval:
        path = record.directory / "eval-samples" / f"{benchmark}.jsonl"
        if not path.is_file():
            continue
        summary = read_samples(path, rules.get(benchmark, SampleRule()), length)
        if summary.prompt_scores is not None:
            record.prompt_scores[benchmark] = summary.prompt_scores
        if summary.response_length is not None:
            record.response_length[benchmark] = summary.response_length
        if summary.rates:
            record.sample_rates[benchmark] = summary.rates


#: Where ``cascade run`` builds the tiny base model: not a stage.
BASE_DIR = "00-base"


def load_stages(run_dir: Path, *, samples: bool = False) -> tuple[list[StageRecord], list[str]]:
    """Finished stages in index order, and the directory names of unfinished ones; with
    ``samples``, each stage's evaluation samples are read too (per-prompt scores, lengths)."""
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory {run_dir} does not exist")
    rules = recipe_sample_rules(run_dir) if samples else {}
    length = length_counter(run_dir)[0] if samples else None
    stages, unfinished = [], []
    for directory in sorted(path for path in run_dir.iterdir() if path.is_dir()):
        info_path = directory / "stage.json"
        if not info_path.exists():
            if _STAGE_DIR.match(directory.name) and directory.name != BASE_DIR:
                unfinished.append(directory.name)
            continue
        info = read_stage_info(info_path)
        if info.get("status", "done") != "done":
            unfinished.append(directory.name)
            continue
        values, labels, stderr = read_eval(directory / "eval.json")
        metrics, bad = read_metrics(directory / "metrics.jsonl")
        stages.append(
            StageRecord(
                directory=directory,
                index=info["index"],
                name=str(info["name"]),
                kind=info["kind"],
                wall_s=info["wall_s"],
                eval=values,
                eval_labels=labels,
                eval_stderr=stderr,
                metrics=metrics,
                bad_metric_lines=bad,
            )
        )
        if samples:
            _read_stage_samples(stages[-1], rules, length)
    stages.sort(key=lambda stage: stage.index)
    return stages, unfinished


def summarize_run(run_dir: Path, *, samples: bool = True) -> RunSummary:
    """Merge evaluation stages into the rows they evaluate and collect benchmark order."""
    stages, unfinished = load_stages(run_dir, samples=samples)
    rows: list[StageRecord] = []
    baseline: StageRecord | None = None
    labels: dict[str, str] = {}
    benchmarks: list[str] = []
    for stage in stages:
        labels.update(stage.eval_labels)
        benchmarks += [name for name in stage.eval if name not in benchmarks]
        if stage.kind != "eval":
            rows.append(stage)
        elif rows:
            rows[-1].merge_evaluation(stage)
        elif baseline is None:
            baseline = stage
        else:
            baseline.merge_evaluation(stage)
    return RunSummary(
        run_dir=run_dir,
        rows=rows,
        baseline=dict(baseline.eval) if baseline else {},
        benchmarks=benchmarks,
        labels=labels,
        total_wall_s=sum(stage.wall_s for stage in stages),
        unfinished=unfinished,
        baseline_record=baseline,
        length_unit=length_counter(run_dir)[1] if samples else "tokens",
    )


# ---------------------------------------------------------------- derived numbers


def evaluations(summary: RunSummary) -> list[StageRecord]:
    """The evaluated checkpoints in order (the base model first when it was evaluated); the
    base model's record is labelled BASELINE_LABEL."""
    ordered = []
    if summary.baseline_record is not None or summary.baseline:
        base = summary.baseline_record or StageRecord(summary.run_dir, 0, BASELINE_LABEL, "eval", 0.0)
        ordered.append(_relabelled(base, BASELINE_LABEL, summary.baseline))
    return ordered + list(summary.rows)


def _relabelled(record: StageRecord, name: str, values: Mapping[str, float]) -> StageRecord:
    from dataclasses import replace

    return replace(record, name=name, eval=dict(values))


def paired_stderr(before: Sequence[float] | None, after: Sequence[float] | None) -> float | None:
    """Standard error (points) of the change from ``before`` to ``after``, paired over the
    prompts both were measured on; None when either is unknown or they differ in prompts."""
    if not before or not after or len(before) != len(after):
        return None
    from cascade_rl.eval.metrics import standard_error

    return 100.0 * standard_error([b - a for a, b in zip(before, after)])


@dataclass(frozen=True)
class Change:
    """A benchmark's change from one evaluation to a later one, with its paired error."""

    delta: float
    stderr: float | None

    def text(self, bold: bool = False) -> str:
        text = f"{self.delta:+.1f}" + (f" ± {self.stderr:.1f}" if self.stderr is not None else "")
        return f"**{text}**" if bold else text


def change(before: StageRecord, after: StageRecord, benchmark: str) -> Change | None:
    if benchmark not in before.eval or benchmark not in after.eval:
        return None
    return Change(
        after.eval[benchmark] - before.eval[benchmark],
        paired_stderr(before.prompt_scores.get(benchmark), after.prompt_scores.get(benchmark)),
    )


def stage_changes(summary: RunSummary) -> tuple[list[str], list[list[Change | None]]]:
    """Per evaluated stage, each benchmark's change against its latest earlier evaluation."""
    latest: dict[str, StageRecord] = {}
    base = evaluations(summary)[0] if summary.baseline else None
    if base is not None:
        latest = {benchmark: base for benchmark in base.eval}
    names, rows = [], []
    for row in summary.rows:
        if not row.eval:
            continue
        names.append(row.name)
        rows.append([change(latest[b], row, b) if b in latest else None for b in summary.benchmarks])
        latest.update({benchmark: row for benchmark in row.eval})
    return names, rows


def forgetting_matrix(summary: RunSummary) -> tuple[list[str], list[list[float | None]]]:
    """Per evaluated stage, each benchmark's change against its latest earlier value (None
    where either value is missing)."""
    names, rows = stage_changes(summary)
    return names, [[None if c is None else c.delta for c in row] for row in rows]


def gain_for(min_gain: float | Mapping[str, float], stage: str) -> float:
    """The points ``stage`` must add: one number for all stages, or per stage (default 10)."""
    return float(min_gain.get(stage, DEFAULT_MIN_GAIN)) if isinstance(min_gain, Mapping) else float(min_gain)


def check_targets(
    summary: RunSummary,
    targets: Mapping[str, str],
    min_gain: float | Mapping[str, float],
    forgetting_limit: float,
) -> list[TargetCheck]:
    """One check per stage named in ``targets`` (stage name -> own benchmark), in run order;
    targets naming no finished stage come last, marked unfinished. ``min_gain``: points, for
    every stage or per stage name."""
    ordered = evaluations(summary)
    checks = []
    first_stage = 1 if summary.baseline else 0
    for position, record in enumerate(ordered):
        if position < first_stage or record.name not in targets:
            continue
        benchmark = targets[record.name]
        earlier_records = [r for r in ordered[:position] if benchmark in r.eval]
        earlier = [r.eval[benchmark] for r in earlier_records]
        gain = change(earlier_records[-1], record, benchmark) if earlier_records else None
        later = [r for r in ordered[position + 1 :] if benchmark in r.eval]
        worst = min(later, key=lambda r: r.eval[benchmark]) if later else None
        fall = change(worst, record, benchmark) if worst is not None else None  # end minus the worst value
        checks.append(
            TargetCheck(
                stage=record.name,
                benchmark=benchmark,
                start=earlier[-1] if earlier else None,
                end=record.eval.get(benchmark),
                min_gain=gain_for(min_gain, record.name),
                worst_later_stage=worst.name if worst else None,
                worst_later_value=worst.eval[benchmark] if worst else None,
                forgetting_limit=forgetting_limit,
                fall_stderr=fall.stderr if fall else None,
                gain_stderr=gain.stderr if gain else None,
            )
        )
    checked = {check.stage for check in checks}
    for stage, benchmark in targets.items():
        if stage not in checked:
            checks.append(TargetCheck(stage, benchmark, None, None, gain_for(min_gain, stage), finished=False))
    return checks


def recipe_targets(run_dir: Path) -> tuple[dict[str, str], float | dict[str, float], float]:
    """(targets, min gain, forgetting limit) of the recipe the run was made with, read from
    ``run_dir/recipe.json``; no targets when the run has no recipe.json."""
    path = Path(run_dir) / "recipe.json"
    spec = (_read_json(path).get("eval") or {}) if path.exists() else {}
    targets = spec.get("targets") or {}
    if not isinstance(targets, dict) or not all(isinstance(v, str) for v in targets.values()):
        raise ValueError(f"{path}: eval.targets must map stage names to benchmark names, got {targets!r}")
    gain = spec.get("target_gain", DEFAULT_MIN_GAIN)
    return (
        dict(targets),
        {str(k): float(v) for k, v in gain.items()} if isinstance(gain, dict) else float(gain),
        float(spec.get("forgetting_limit", DEFAULT_FORGETTING_LIMIT)),
    )


# ---------------------------------------------------------------- formatting


def format_cell(value: Any) -> str:
    """Markdown cell text: None -> '—', floats with one decimal, pipes escaped."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _looks_numeric(cell: Any) -> bool:
    if isinstance(cell, bool):
        return False
    return isinstance(cell, (int, float)) or bool(_NUMBER_TEXT.match(str(cell)))


def format_table(rows: Sequence[Sequence[Any]], columns: Sequence[str]) -> str:
    """A GitHub-markdown table; numeric columns are right-aligned."""
    if any(len(row) != len(columns) for row in rows):
        raise ValueError(f"every row needs {len(columns)} cells ({list(columns)})")

    def numeric(index: int) -> bool:
        cells = [row[index] for row in rows if row[index] is not None]
        return bool(cells) and all(_looks_numeric(cell) for cell in cells)

    aligns = ["---:" if numeric(i) else "---" for i in range(len(columns))]
    lines = ["| " + " | ".join(format_cell(c) for c in columns) + " |", "| " + " | ".join(aligns) + " |"]
    lines += ["| " + " | ".join(format_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def format_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def _signed(value: float | None, bold: bool = False, digits: int = 1) -> str | None:
    if value is None:
        return None
    text = f"{value:+.{digits}f}"
    return f"**{text}**" if bold else text


def _column_title(benchmark: str, labels: Mapping[str, str]) -> str:
    return f"{benchmark} ({labels[benchmark]})" if benchmark in labels else benchmark


# ---------------------------------------------------------------- plots


def _step_axis(metrics: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[int]]:
    """x positions (cumulative step) and the positions where a new sub-stage starts (its step
    counter restarts or its ``substage`` key changes)."""
    positions, boundaries = [], []
    for position, row in enumerate(metrics, start=1):
        if position > 1:
            previous = metrics[position - 2]
            restarted = (
                isinstance(row.get("step"), (int, float))
                and isinstance(previous.get("step"), (int, float))
                and row["step"] <= previous["step"]
            )
            if restarted or row.get("substage") != previous.get("substage"):
                boundaries.append(position)
        positions.append(position)
    return positions, boundaries


def _series(metrics: Sequence[Mapping[str, Any]], key: str, positions: Sequence[int]) -> tuple[list[int], list[float]]:
    pairs = [
        (x, float(row[key]))
        for x, row in zip(positions, metrics)
        if isinstance(row.get(key), (int, float)) and not isinstance(row.get(key), bool)
    ]
    return [x for x, _ in pairs], [y for _, y in pairs]


def plot_training_curves(stage: StageRecord, path: Path) -> Path:
    """Reward (mean, ±std band, per domain) and response length (mean, think, no_think) per step."""
    metrics = stage.metrics
    positions, boundaries = _step_axis(metrics)
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11, 4), dpi=100)
    reward_axes, length_axes = figure.subplots(1, 2)
    xs, mean = _series(metrics, "reward/mean", positions)
    reward_axes.plot(xs, mean, color="black", linewidth=2, label="reward/mean")
    std_xs, std = _series(metrics, "reward/std", positions)
    if std_xs == xs and xs:
        reward_axes.fill_between(
            xs,
            [m - s for m, s in zip(mean, std)],
            [m + s for m, s in zip(mean, std)],
            color="grey",
            alpha=0.25,
            label="± std",
        )
    domain_keys = sorted(
        {
            key
            for row in metrics
            for key in row
            if key.startswith("reward/") and key.endswith("/mean") and key.count("/") == 2
        }
    )
    for key in domain_keys:
        reward_axes.plot(*_series(metrics, key, positions), linewidth=1, label=key)
    rate_keys = sorted({key for row in metrics for key in row if key.split("/")[-1] in SAMPLE_RATES})
    for key in rate_keys:  # shares in [0, 1], e.g. reward/swe/applied
        reward_axes.plot(*_series(metrics, key, positions), linewidth=1, linestyle=":", label=key)
    for key, style in (
        ("response_length/mean", "-"),
        ("response_length/think", "--"),
        ("response_length/no_think", ":"),
    ):
        length_axes.plot(*_series(metrics, key, positions), linestyle=style, label=key)
    for axes, title in ((reward_axes, "reward per step"), (length_axes, "response length per step (tokens)")):
        for boundary in boundaries:
            axes.axvline(boundary - 0.5, color="grey", linestyle="--", linewidth=0.8)
        axes.set_title(f"{stage.name}: {title}")
        axes.set_xlabel("step" + (" (sub-stages separated)" if boundaries else ""))
        axes.grid(alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


def plot_forgetting(summary: RunSummary, targets: Mapping[str, str], path: Path) -> Path | None:
    """Heat map of the forgetting matrix; own-domain cells outlined."""
    names, deltas = forgetting_matrix(summary)
    if not names or not summary.benchmarks:
        return None
    grid = [[math.nan if d is None else d for d in row] for row in deltas]
    limit = max([abs(d) for row in deltas for d in row if d is not None] + [1.0])
    from matplotlib.figure import Figure

    figure = Figure(figsize=(1.3 * len(summary.benchmarks) + 2.5, 0.55 * len(names) + 1.8), dpi=100)
    axes = figure.subplots()
    image = axes.imshow(grid, cmap="RdYlGn", vmin=-limit, vmax=limit, aspect="auto")
    axes.set_xticks(range(len(summary.benchmarks)), summary.benchmarks, rotation=30, ha="right")
    axes.set_yticks(range(len(names)), [f"after {name}" for name in names])
    for r, row in enumerate(deltas):
        for c, delta in enumerate(row):
            own = targets.get(names[r]) == summary.benchmarks[c]
            axes.text(
                c,
                r,
                "—" if delta is None else f"{delta:+.1f}",
                ha="center",
                va="center",
                fontsize=9,
                fontweight="bold" if own else "normal",
            )
            if own:
                axes.add_patch(_outline(c, r))
    axes.set_title("change vs previous evaluation (points)\noutlined: the stage's own domain", fontsize=10)
    figure.colorbar(image, ax=axes)
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


#: steps averaged at each end of an RL stage for its entropy and length trend
TREND_STEPS = 3


def trend(metrics: Sequence[Mapping[str, Any]], key: str, steps: int = TREND_STEPS) -> tuple[float, float] | None:
    """(mean of the first ``steps`` logged values, mean of the last ``steps``) of a metric."""
    values = [float(row[key]) for row in metrics if isinstance(row.get(key), (int, float))]
    if not values:
        return None
    return sum(values[:steps]) / len(values[:steps]), sum(values[-steps:]) / len(values[-steps:])


def plot_length_entropy(summary: RunSummary, path: Path) -> Path | None:
    """Response length on every benchmark after each stage; entropy and rollout length per
    step through the RL stages (stage boundaries marked)."""
    records = [r for r in evaluations(summary) if r.response_length]
    rl_rows = [r for r in summary.rows if r.kind == "grpo" and r.metrics]
    if not records and not rl_rows:
        return None
    from matplotlib.figure import Figure

    figure = Figure(figsize=(15, 4), dpi=100)
    length_axes, entropy_axes, rollout_axes = figure.subplots(1, 3)
    names = [r.name for r in records]
    for benchmark in summary.benchmarks:
        points = [(i, r.response_length[benchmark]) for i, r in enumerate(records) if benchmark in r.response_length]
        if points:
            length_axes.plot([i for i, _ in points], [v for _, v in points], marker="o", label=benchmark)
    length_axes.set_xticks(range(len(names)), names, rotation=30, ha="right")
    length_axes.set_title(f"benchmark response length after each stage ({summary.length_unit})")
    offset = 0
    for row in rl_rows:
        positions = [offset + p for p in _step_axis(row.metrics)[0]]
        entropy_axes.plot(*_series(row.metrics, "entropy", positions), label=row.name)
        rollout_axes.plot(*_series(row.metrics, "response_length/mean", positions), label=row.name)
        for axes in (entropy_axes, rollout_axes):
            axes.axvline(offset + 0.5, color="grey", linestyle="--", linewidth=0.8)
        offset += len(row.metrics)
    entropy_axes.set_title("rollout entropy per RL step (nats / token)")
    rollout_axes.set_title("rollout length per RL step (tokens)")
    for axes in (entropy_axes, rollout_axes):
        axes.set_xlabel("RL step, stages in order")
    for axes in (length_axes, entropy_axes, rollout_axes):
        axes.grid(alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


def _outline(column: int, row: int):
    from matplotlib.patches import Rectangle

    return Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=2)


# ---------------------------------------------------------------- report


def value_text(record: StageRecord, benchmark: str) -> str | None:
    """``40.2 ± 2.1`` (the value and its standard error over prompts), or the value alone."""
    if benchmark not in record.eval:
        return None
    stderr = record.eval_stderr.get(benchmark)
    return f"{record.eval[benchmark]:.1f}" + (f" ± {stderr:.1f}" if stderr is not None else "")


def _eval_table(summary: RunSummary) -> str:
    columns = ["after stage", "kind", "wall"] + [_column_title(b, summary.labels) for b in summary.benchmarks]
    rows = []
    for record in evaluations(summary):
        wall = None if record.name == BASELINE_LABEL else format_duration(record.wall_s)
        kind = "—" if record.name == BASELINE_LABEL else record.kind
        rows.append([record.name, kind, wall] + [value_text(record, b) for b in summary.benchmarks])
    return format_table(rows, columns)


def _forgetting_table(summary: RunSummary, targets: Mapping[str, str], limit: float) -> str:
    names, changes = stage_changes(summary)
    rows = []
    for name, row in zip(names, changes):
        cells = []
        for benchmark, item in zip(summary.benchmarks, row):
            if item is None:
                cells.append(None)
                continue
            mark = " ⚠" if is_forgetting(-item.delta, item.stderr, limit) else ""
            cells.append(item.text(bold=targets.get(name) == benchmark) + mark)
        rows.append([name] + cells)
    return format_table(rows, ["after stage"] + summary.benchmarks)


def _targets_section(checks: Sequence[TargetCheck]) -> list[str]:
    if not checks:
        return ["No stage of this run has a target benchmark."]
    rows = [
        [
            c.stage,
            c.benchmark,
            c.start,
            c.end,
            None if c.delta is None else Change(c.delta, c.gain_stderr).text(),
            f"+{c.min_gain:.1f}",
            None if c.later_fall is None else f"{c.fall_text} (limit {c.forgetting_limit:.1f})",
            "met" if not c.problems() else "**not met**",
        ]
        for c in checks
    ]
    lines = [
        format_table(
            rows, ["stage", "own benchmark", "start", "end", "change", "target", "largest later fall", "status"]
        ),
        "",
    ]
    problems = [problem for check in checks for problem in check.problems()]
    if problems:
        lines += ["Targets not met:", ""] + [f"- {problem}" for problem in problems]
    else:
        lines.append(
            "All targets met: every RL stage raised its own benchmark by the target, "
            "and no earlier domain was forgotten later."
        )
    noisy = [c for c in checks if c.within_noise()]
    if noisy:
        lines += [""] + [
            f"- {c.benchmark} fell {c.fall_text} points after `{c.stage}` (lowest after `{c.worst_later_stage}`): "
            f"over the limit {c.forgetting_limit:.1f} but within twice its standard error, so not counted as forgetting"
            for c in noisy
        ]
    return lines


def _noise_section(summary: RunSummary) -> list[str]:
    """The sampling noise: the largest standard error over prompts of any value and of any
    stage-to-stage change, per benchmark."""
    largest: dict[str, float] = {}
    for row in summary.rows:
        for benchmark, stderr in row.eval_stderr.items():
            largest[benchmark] = max(largest.get(benchmark, 0.0), stderr)
    if not largest:
        return []
    noise = ", ".join(f"{name} {value:.1f}" for name, value in largest.items())
    paired: dict[str, float] = {}
    for row in stage_changes(summary)[1]:
        for benchmark, item in zip(summary.benchmarks, row):
            if item is not None and item.stderr is not None:
                paired[benchmark] = max(paired.get(benchmark, 0.0), item.stderr)
    lines = [f"Sampling noise: the largest standard error over prompts of any value, in points: {noise}."]
    if paired:
        text = ", ".join(f"{name} {value:.1f}" for name, value in paired.items())
        lines.append(
            f"Of any stage-to-stage change (paired over prompts: every stage is evaluated on the same prompts): {text}."
        )
    else:
        lines.append("Stage-to-stage changes have no paired errors here (no per-sample results were found).")
    return [" ".join(lines), ""]


def _length_entropy_section(summary: RunSummary, plot: str | None) -> list[str]:
    records = [r for r in evaluations(summary) if r.response_length]
    rl_rows = [r for r in summary.rows if r.kind == "grpo" and r.metrics]
    if not records and not rl_rows:
        return []
    lines = [
        "## Response length and entropy",
        "",
        "The paper observes that RLHF shortens responses and that IF-RL lowers the policy's entropy. "
        f"Mean response length of each benchmark's samples after each stage ({summary.length_unit}):",
        "",
    ]
    if records:
        table = [[r.name] + [r.response_length.get(b) for b in summary.benchmarks] for r in records]
        lines += [format_table(table, ["after stage"] + summary.benchmarks), ""]
    if rl_rows:
        lines += [
            f"RL rollouts: entropy (nats per token) and length (tokens), mean of the first and last "
            f"{TREND_STEPS} steps of each stage:",
            "",
        ]
        table = []
        for row in rl_rows:
            entropy, length = trend(row.metrics, "entropy"), trend(row.metrics, "response_length/mean")
            table.append(
                [row.name]
                + ([entropy[0], entropy[1], _signed(entropy[1] - entropy[0], digits=3)] if entropy else [None] * 3)
                + ([length[0], length[1], _signed(length[1] - length[0])] if length else [None] * 3)
            )
        lines += [
            format_table(
                table, ["stage", "entropy first", "entropy last", "change", "length first", "length last", "change"]
            ),
            "",
        ]
    if plot:
        lines += [f"![response length and entropy]({plot})", ""]
    return lines


def _sample_rates_section(summary: RunSummary) -> list[str]:
    """Per benchmark whose samples carry edit flags (SWE): exact fixes beside edits that apply."""
    benchmarks = [b for b in summary.benchmarks if any(b in r.sample_rates for r in summary.rows)]
    lines = []
    for benchmark in benchmarks:
        rows = [
            [r.name, r.eval.get(benchmark)] + [r.sample_rates[benchmark].get(name) for name in SAMPLE_RATES]
            for r in summary.rows
            if benchmark in r.sample_rates
        ]
        lines += [
            f"## {benchmark}: edits that apply",
            "",
            "Percent of samples: the value (exact fixes), edits that parse and apply to the files, and "
            "edits identical to the golden patch.",
            "",
            format_table(rows, ["after stage", benchmark, *SAMPLE_RATES]),
            "",
        ]
    return lines


def _curves_section(summary: RunSummary, plots: Mapping[str, str]) -> list[str]:
    lines = []
    for row in summary.rows:
        if row.directory.name not in plots:
            continue
        lines += [f"### {row.name}", "", f"![{row.name} training curves]({plots[row.directory.name]})", ""]
        last = row.metrics[-1] if row.metrics else {}
        facts = [f"{len(row.metrics)} logged steps"]
        for key in ("reward/mean", "response_length/mean", "truncation_ratio", "zero_variance_groups"):
            if isinstance(last.get(key), (int, float)):
                facts.append(f"last {key} = {last[key]:.3g}")
        if row.bad_metric_lines:
            facts.append(f"{row.bad_metric_lines} unreadable metrics line(s) skipped")
        lines += ["; ".join(facts) + ".", ""]
    return lines


def _markdown(
    summary: RunSummary,
    targets: Mapping[str, str],
    checks: Sequence[TargetCheck],
    plots: Mapping[str, str],
    forgetting_plot: str | None,
    length_plot: str | None = None,
    forgetting_limit: float = DEFAULT_FORGETTING_LIMIT,
) -> str:
    lines = [
        f"# Cascade RL report: {summary.run_dir.name}",
        "",
        f"{len(summary.rows)} stage(s), total wall time {format_duration(summary.total_wall_s)}. "
        "Benchmark values in percent; changes in points.",
        "",
    ]
    if summary.unfinished:
        lines += [f"Unfinished stage(s), not reported: {', '.join(summary.unfinished)}.", ""]
    lines += [
        "## Evaluation after each stage",
        "",
        _eval_table(summary),
        "",
        "## Change against the previous evaluation (forgetting)",
        "",
        "Each cell: the benchmark's value after the stage minus its latest earlier value, ± the standard "
        "error of that change paired over prompts. **Bold**: the RL stage's own domain. ⚠: forgetting, "
        f"a fall of more than {forgetting_limit:.1f} points and more than twice its standard error.",
        "",
        _forgetting_table(summary, targets, forgetting_limit),
        "",
    ]
    if forgetting_plot:
        lines += [f"![forgetting matrix]({forgetting_plot})", ""]
    lines += ["## Targets", ""] + _targets_section(checks) + [""] + _noise_section(summary)
    lines += _sample_rates_section(summary) + _length_entropy_section(summary, length_plot)
    if plots:
        lines += ["## Training curves (RL stages)", ""] + _curves_section(summary, plots)
    return "\n".join(lines).rstrip() + "\n"


def _stage_json(row: StageRecord) -> dict[str, Any]:
    entry: dict[str, Any] = {"stage": row.name, "kind": row.kind, "wall_s": row.wall_s, "eval": dict(row.eval)}
    for key, value in (
        ("stderr", row.eval_stderr),
        ("response_length", row.response_length),
        ("sample_rates", row.sample_rates),
    ):
        if value:
            entry[key] = dict(value)
    for key in ("entropy", "response_length/mean"):
        found = trend(row.metrics, key) if row.kind == "grpo" else None
        if found:
            entry.setdefault("rl_trend", {})[key] = {"first": found[0], "last": found[1]}
    return entry


def _report_json(
    summary: RunSummary,
    checks: Sequence[TargetCheck],
    plots: Mapping[str, str],
    forgetting_plot: str | None,
    length_plot: str | None = None,
) -> dict[str, Any]:
    names, changes = stage_changes(summary)
    report: dict[str, Any] = {
        "total_wall_s": summary.total_wall_s,
        "stages": [_stage_json(row) for row in summary.rows],
        "benchmarks": summary.benchmarks,
        "metrics": summary.labels,
        "length_unit": summary.length_unit,
        "forgetting": {
            "stages": names,
            "benchmarks": summary.benchmarks,
            "deltas": [[None if c is None else c.delta for c in row] for row in changes],
            "stderr": [[None if c is None else c.stderr for c in row] for row in changes],
        },
        "targets": [check.to_json() for check in checks],
        "targets_met": all(not check.problems() for check in checks),
        "plots": [*plots.values(), *(p for p in (forgetting_plot, length_plot) if p)],
    }
    if summary.baseline:
        report["baseline"] = dict(summary.baseline)
    if summary.unfinished:
        report["unfinished"] = summary.unfinished
    return report


def build_report(
    run_dir: Path,
    targets: Mapping[str, str] | None = None,
    *,
    min_gain: float | Mapping[str, float] | None = None,
    forgetting_limit: float | None = None,
) -> Path:
    """Write report.md, report.json and plots/ into ``run_dir``; return the report.md path.

    ``targets`` maps RL stage name -> its own benchmark; a stage meets its target when its
    benchmark rose by at least ``min_gain`` points and never fell more than ``forgetting_limit``
    points below its end value in a later stage. Each left out comes from the run's recipe
    (:func:`recipe_targets`).
    """
    run_dir = Path(run_dir)
    recipe_map, recipe_gain, recipe_limit = recipe_targets(run_dir)
    targets = recipe_map if targets is None else dict(targets)
    min_gain = recipe_gain if min_gain is None else min_gain
    forgetting_limit = recipe_limit if forgetting_limit is None else forgetting_limit
    summary = summarize_run(run_dir)
    plot_dir = run_dir / "plots"
    plot_dir.mkdir(exist_ok=True)
    plots = {
        row.directory.name: str(plot_training_curves(row, plot_dir / f"{row.directory.name}.png").relative_to(run_dir))
        for row in summary.rows
        if row.kind == "grpo" and row.metrics
    }
    heatmap = plot_forgetting(summary, targets, plot_dir / "forgetting.png")
    forgetting_plot = str(heatmap.relative_to(run_dir)) if heatmap else None
    lengths = plot_length_entropy(summary, plot_dir / "length-entropy.png")
    length_plot = str(lengths.relative_to(run_dir)) if lengths else None
    checks = check_targets(summary, targets, min_gain, forgetting_limit)
    report_path = run_dir / "report.md"
    report_path.write_text(
        _markdown(summary, targets, checks, plots, forgetting_plot, length_plot, forgetting_limit), encoding="utf-8"
    )
    (run_dir / "report.json").write_text(
        json.dumps(_report_json(summary, checks, plots, forgetting_plot, length_plot), indent=2) + "\n",
        encoding="utf-8",
    )
    from cascade_rl.eval.recovery import add_recovery

    add_recovery(run_dir, report_path)  # distill stages: what they won back (docs/mopd.md)
    return report_path


def print_summary(report: Mapping[str, Any] | Path, console: Any = None) -> None:
    """Print report.json (a dict or its path) as a rich table plus the target verdicts; used by
    ``cascade run`` at the end of a run."""
    from rich.console import Console
    from rich.table import Table

    if isinstance(report, (str, Path)):
        report = _read_json(Path(report))
    console = console or Console()
    if not console.is_terminal:  # piped or logged: rich would assume 80 columns and cut names
        console.width = max(console.width, 160)
    stages = report.get("stages", [])
    benchmarks = report.get("benchmarks") or list(dict.fromkeys(b for s in stages for b in s.get("eval", {})))
    table = Table(title=f"Cascade RL: {len(stages)} stage(s), {format_duration(report.get('total_wall_s', 0.0))}")
    for column in ["stage", "kind", "wall"] + list(benchmarks):
        table.add_column(column, justify="left" if column in ("stage", "kind") else "right")
    if report.get("baseline"):
        table.add_row(BASELINE_LABEL, "—", "—", *[format_cell(report["baseline"].get(b)) for b in benchmarks])
    for stage in stages:
        table.add_row(
            stage["stage"],
            stage["kind"],
            format_duration(stage.get("wall_s", 0.0)),
            *[format_cell(stage.get("eval", {}).get(b)) for b in benchmarks],
        )
    console.print(table)
    for check in report.get("targets", []):
        if check.get("met"):
            console.print(
                f"[green]target met[/green]: {check['stage']} {check['benchmark']} "
                f"{format_cell(check['start'])} -> {format_cell(check['end'])}"
            )
        for problem in check.get("problems", []):
            console.print(f"[red]target not met[/red]: {problem}")
    from cascade_rl.eval.recovery import print_recovery

    print_recovery(report, console)
