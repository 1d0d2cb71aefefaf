"""Reading a run directory (the files ``cascade run`` writes; see :mod:`cascade_rl.eval.report`
for the layout): each finished stage's ``stage.json``, ``eval.json``, ``metrics.jsonl`` and
evaluation samples, gathered into :class:`StageRecord` rows and one :class:`RunSummary`, and the
settings the run's ``recipe.json`` holds (targets, pass thresholds). The report, the recovery of
distillation stages and the comparison of runs all read runs through this module.
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
DEFAULT_FORGETTING_LIMIT = 5.0
BASELINE_LABEL = "base model"
_STAGE_DIR = re.compile(r"^\d+-")  # <NN-stage>


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
    #: a side branch's starting stage (its ``stage.json``): compared with that stage, and no
    #: later stage descends from it
    branch_from: str | None = None

    def merge_evaluation(self, other: StageRecord) -> None:
        """Take an evaluation stage's results as this stage's (it evaluated this checkpoint)."""
        self.eval.update(other.eval)
        self.eval_labels.update(other.eval_labels)
        self.eval_stderr.update(other.eval_stderr)
        self.prompt_scores.update(other.prompt_scores)
        self.response_length.update(other.response_length)
        self.sample_rates.update(other.sample_rates)


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


def read_json(path: Path) -> Any:
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
    info = read_json(path)
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
    raw = read_json(path)
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
    spec = (read_json(path).get("eval") or {}) if path.exists() else {}
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
                branch_from=info.get("branch_from"),
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


def recipe_targets(run_dir: Path) -> tuple[dict[str, str], float | dict[str, float], float]:
    """(targets, min gain, forgetting limit) of the recipe the run was made with, read from
    ``run_dir/recipe.json``; no targets when the run has no recipe.json."""
    path = Path(run_dir) / "recipe.json"
    spec = (read_json(path).get("eval") or {}) if path.exists() else {}
    targets = spec.get("targets") or {}
    if not isinstance(targets, dict) or not all(isinstance(v, str) for v in targets.values()):
        raise ValueError(f"{path}: eval.targets must map stage names to benchmark names, got {targets!r}")
    gain = spec.get("target_gain", DEFAULT_MIN_GAIN)
    return (
        dict(targets),
        {str(k): float(v) for k, v in gain.items()} if isinstance(gain, dict) else float(gain),
        float(spec.get("forgetting_limit", DEFAULT_FORGETTING_LIMIT)),
    )


#: steps averaged at each end of an RL stage for its entropy and length trend
TREND_STEPS = 3


def trend(metrics: Sequence[Mapping[str, Any]], key: str, steps: int = TREND_STEPS) -> tuple[float, float] | None:
    """(mean of the first ``steps`` logged values, mean of the last ``steps``) of a metric."""
    values = [float(row[key]) for row in metrics if isinstance(row.get(key), (int, float))]
    if not values:
        return None
    return sum(values[:steps]) / len(values[:steps]), sum(values[-steps:]) / len(values[-steps:])


def masked_rollouts(metrics: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Rollouts without a verdict (a failed verifier: left out of training) over a stage's logged
    steps, per reward domain and reason: the sums of metrics.jsonl's ``masked/<domain>/<reason>``."""
    counts: dict[str, dict[str, int]] = {}
    for row in metrics:
        for key, value in row.items():
            if key.startswith("masked/") and key.count("/") >= 2 and isinstance(value, (int, float)):
                domain, reason = key.removeprefix("masked/").rsplit("/", 1)
                counts.setdefault(domain, {})
                counts[domain][reason] = counts[domain].get(reason, 0) + int(value)
    return counts
