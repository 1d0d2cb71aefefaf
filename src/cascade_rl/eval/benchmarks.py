"""Running benchmarks on a model (SPEC section 9): sample k responses per prompt, score them with
the reward registry, and report pass@1 as avg@k (or pass@k / majority@k).

The model is a local checkpoint (sampled with vLLM where it is installed, else the project's own
sampling loop: ``runtime.use_vllm``) or an OpenAI-compatible server
(vLLM, SGLang, ``transformers serve``) with a concurrency limit; see :mod:`.sampling` for the
backends, the token budget, the progress bar and how an interrupted evaluation resumes.

Two kinds of benchmark:

* ``verify`` -- a sample is correct when its reward reaches ``pass_threshold`` (math,
  multiple choice, IFEval strict prompt accuracy, code, SWE exact fix, tool calls; a multi-turn
  domain's sample is an episode judged by its environment, :mod:`.episodes`). The mean
  reward is kept beside the headline number (for SWE: the mean patch similarity), and IFEval /
  IFBench add their prompt- and instruction-level strict and loose accuracies
  (:mod:`.breakdown`).
* ``arena`` -- the win rate against baseline answers, judged pairwise with position swap by an
  LLM judge (ArenaHard) or by the reward model (:mod:`.arena`).

Rows may be limited to a date window (``since`` / ``until`` on ``date_field``), as
LiveCodeBench's releases are: v5 and v6 are the problems published in a window of months.

Every benchmark's rows (and baseline answers) are read before anything is generated, so a
missing file or a malformed benchmark fails at once, naming it. Samples and their scores are
written next to ``eval.json`` for inspection (``eval-samples/<benchmark>.jsonl``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, time, timezone
from pathlib import Path
from typing import Any

from cascade_rl.chat import with_mode
from cascade_rl.data.loading import load_sources, resolve_path, rl_normaliser
from cascade_rl.eval import arena
from cascade_rl.eval.breakdown import breakdown
from cascade_rl.eval.episodes import play, plays_episodes
from cascade_rl.eval.sampling import open_generator, reserve, sample, token_budget
from cascade_rl.llm.base import Generator, Sampling
from cascade_rl.recipe import Benchmark, DataSource, expand
from cascade_rl.rewards.registry import OptionError, check_options, score_samples

log = logging.getLogger(__name__)


@dataclass
class BenchmarkResult:
    name: str
    value: float | None
    metric: str
    k: int
    prompts: int
    extra: dict[str, float] = field(default_factory=dict)


# ---------------------------------------------------------------------------------- rows


def load_benchmark(bench: Benchmark, variables: Mapping[str, str] | None = None) -> list[dict]:
    """The benchmark's rows: read, renamed, converted from their public ``format`` (the
    converters of ``cascade data convert``), normalised into RL rows, kept to the date window,
    then limited. Skipped rows are counted in the log with their reasons and first locations."""
    variables = dict(variables or {})
    source = DataSource(path=bench.data, fields=bench.fields)
    # arena rows need only a prompt: they are judged, not verified by a reward domain
    domain = bench.domain or ("preference" if bench.kind == "arena" else None)
    normalise = _windowed(bench, _converted(bench, rl_normaliser(domain), variables))
    if bench.kind == "arena":
        normalise = _after(arena.question_row, normalise)
    rows, report = load_sources([source], normalise, variables=variables)
    if report.skipped:
        outside_only = all(reason.startswith(f"{bench.date_field} outside") for reason in report.skipped)
        log.log(logging.INFO if outside_only else logging.WARNING, "benchmark %s: %s", bench.name, report.summary())
    return rows[: bench.limit] if bench.limit else rows


def _after(first, then):
    return lambda row: then(first(row))


def _converted(bench: Benchmark, normalise, variables: dict[str, str]):
    """``normalise`` after the benchmark's public ``format`` converter (none without one)."""
    from cascade_rl.data.formats import converted

    return converted(
        bench.format,
        bench.format_options,
        normalise,
        where=f"benchmark {bench.name}",
        resolve=lambda path: resolve_path(path, variables),
    )


def _windowed(bench: Benchmark, normalise):
    if bench.since is None and bench.until is None:
        return normalise

    def normalise_in_window(row: dict) -> dict:
        out = normalise(row)
        when = parse_date(out["reference"].get(bench.date_field), bench.date_field)
        if not in_window(when, bench.since, bench.until):
            raise ValueError(f"{bench.date_field} outside {bench.since or '...'} to {bench.until or '...'}")
        return out

    return normalise_in_window


def parse_date(value: Any, name: str = "date") -> datetime:
    """A row's date: an ISO date or date-time text (``2024-08-03``, ``2024-08-03T12:00:00``,
    ``2024-08-03 12:00:00Z``), a ``date`` / ``datetime`` (Parquet), or Unix seconds.
    ValueError naming the field otherwise (the row is skipped and counted)."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, date):
        return datetime.combine(value, time())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, timezone.utc).replace(tzinfo=None)
    if isinstance(value, str) and value.strip():
        try:
            return datetime.fromisoformat(value.strip().replace("Z", "+00:00")).replace(tzinfo=None)
        except ValueError:
            pass
    raise ValueError(f"no readable {name}")


def in_window(when: datetime, since: date | None, until: date | None) -> bool:
    """``since <= when <= until`` with both bounds at midnight, as LiveCodeBench's
    ``--start_date`` / ``--end_date`` filter (a problem dated the afternoon of ``until`` is out)."""
    if since is not None and when < datetime.combine(since, time()):
        return False
    return until is None or when <= datetime.combine(until, time())


# ---------------------------------------------------------------------------------- scoring


def verify_result(bench: Benchmark, scores: Sequence[Sequence[Any]]) -> BenchmarkResult:
    from cascade_rl import metrics

    correct = [[s.reward >= bench.pass_threshold for s in row] for row in scores]
    rewards = [s.reward for row in scores for s in row]
    if bench.metric == "pass@k":
        value = metrics.pass_at_k(correct, bench.k)
    elif bench.metric == "majority@k":
        answers = [[_answer_key(s.details.get("extracted")) for s in row] for row in scores]
        value = metrics.majority_at_k(answers, correct, bench.k)
    elif bench.metric == "mean_reward":
        value = sum(rewards) / max(len(rewards), 1)
    else:
        value = metrics.avg_at_k(correct, bench.k)
    per_prompt = [sum(row) / len(row) for row in correct if row]
    extra = {
        "mean_reward": sum(rewards) / max(len(rewards), 1),
        "pass@k": 100.0 * metrics.pass_at_k(correct, bench.k),
        "stderr": 100.0 * metrics.standard_error(per_prompt),
        **breakdown(scores),
    }
    return BenchmarkResult(bench.name, 100.0 * value, bench.metric, bench.k, len(scores), extra)


# ---------------------------------------------------------------------------------- running


@dataclass(frozen=True)
class EvalSettings:
    """How an evaluation samples and scores, whatever the benchmarks: ``batch_size`` prompts
    generated together; ``max_concurrency`` requests in flight and ``timeout`` seconds per request
    to a server; ``workers`` parallel scorers; ``seed`` for local sampling; ``dtype`` of a local
    checkpoint's weights (None = float32 on a CPU); ``engine`` sampling a local checkpoint
    (``transformers``: the project's loop; ``vllm``)."""

    batch_size: int = 32
    max_concurrency: int = 64
    timeout: float = 3600.0
    workers: int = 4
    seed: int = 0
    dtype: str | None = None
    engine: str = "transformers"


@dataclass
class _Plan:
    """One benchmark ready to run: its rows, prompts and (arena) baseline answers."""

    bench: Benchmark
    rows: list[dict]
    prompts: list[list[dict]]
    baselines: list[str] | None = None
    judge: str | Generator | None = None
    episodes: bool = False  # multi-turn rows: each sample is an episode (eval/episodes.py)


def evaluate(
    model: str | Path | Generator,
    benchmarks: Sequence[Benchmark],
    out_dir: Path,
    *,
    variables: Mapping[str, str] | None = None,
    reward_model: str | None = None,
    arena_dir: Path | None = None,
    judge: str | Generator | None = None,
    settings: EvalSettings = EvalSettings(),
) -> dict[str, dict]:
    """Evaluate ``model`` (a checkpoint directory, ``http://host/v1#MODEL`` or a generator) on
    ``benchmarks``; write ``out_dir/eval.json`` and the samples; return the results by name.

    ``judge`` overrides every arena benchmark's own judge; an arena benchmark with neither a
    judge nor a ``reward_model`` is skipped."""
    variables = dict(variables or {})
    plans = [_plan(bench, variables, judge, reward_model) for bench in benchmarks]
    plans = [plan for plan in plans if plan is not None]
    generator = open_generator(
        model,
        batch_size=settings.batch_size,
        max_concurrency=settings.max_concurrency,
        timeout=settings.timeout,
        dtype=settings.dtype,
        engine=settings.engine,
    )
    for plan in plans:  # one engine for every benchmark, sized before the first is sampled
        reserve(generator, plan.prompts, plan.bench.max_new_tokens)
    judges: dict[str, Generator] = {}
    samples_dir = out_dir / "eval-samples"
    samples_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    for plan in plans:
        bench = plan.bench
        if not plan.episodes:
            samples = _sample(generator, plan.prompts, bench, samples_dir / f"{bench.name}.progress.jsonl", settings)
        if bench.kind == "arena":
            baselines = plan.baselines or _sampled_baselines(bench, arena_dir or out_dir, generator, plan.prompts,
                                                             settings)  # fmt: skip
            if plan.judge is not None:
                judge_model = _judge(judges, plan.judge, settings)
                outcome = _judged(
                    judge_model, bench, plan.prompts, samples, baselines, samples_dir, settings.batch_size
                )
            else:
                prompts = [row["prompt"] for row in plan.rows]
                outcome = arena.reward_model_outcome(prompts, samples, baselines, str(reward_model))
            result = arena_result(plan, outcome)
            _write_samples(samples_dir / f"{bench.name}.jsonl", plan.rows, samples, details=outcome.per_sample)
        elif plan.episodes:
            played = play(generator, plan.rows, plan.prompts, bench, batch_size=settings.batch_size,
                          progress=samples_dir / f"{bench.name}.progress.jsonl")  # fmt: skip
            scores = [[sample.score for sample in group] for group in played]
            result = verify_result(bench, scores)
            calls = [[{"calls": sample.calls} for sample in group] for group in played]
            _write_samples(samples_dir / f"{bench.name}.jsonl", plan.rows,
                           [[sample.response for sample in group] for group in played], scores, calls)  # fmt: skip
        else:
            options = {(bench.domain or row["domain"]): bench.options for row in plan.rows}
            scores = score_samples(plan.rows, samples, options, workers=settings.workers)
            result = verify_result(bench, scores)
            _write_samples(samples_dir / f"{bench.name}.jsonl", plan.rows, samples, scores=scores)
        results[bench.name] = asdict(result)
        log.info("%s: %s = %.1f", bench.name, result.metric, result.value or 0.0)
    (out_dir / "eval.json").write_text(json.dumps(results, indent=1))
    return results


def arena_result(plan: _Plan, outcome: arena.ArenaOutcome) -> BenchmarkResult:
    """An arena benchmark's result; its label says whether style was controlled."""
    styled = plan.judge is not None and plan.bench.options.get("style_control", True)
    metric = "win rate (style controlled)" if styled else "win rate"
    extra = {"stderr": outcome.stderr, **outcome.extra}
    return BenchmarkResult(plan.bench.name, outcome.value, metric, plan.bench.k, len(plan.rows), extra)


def _plan(bench: Benchmark, variables: dict[str, str], judge: Any, reward_model: str | None) -> _Plan | None:
    """Read a benchmark's rows (and baseline answers) and resolve its judge before any
    generation; None = skipped."""
    if bench.kind == "arena" and judge is None and bench.judge is not None:
        judge = expand(bench.judge, variables)
    if bench.kind == "arena" and judge is None and not reward_model:
        log.info("%s: skipped (an arena benchmark needs a judge or a trained reward model)", bench.name)
        return None
    rows = load_benchmark(bench, variables)
    if not rows:
        raise ValueError(f"benchmark {bench.name}: no usable rows in {bench.data}")
    if bench.kind == "verify" and bench.domain is None:  # options of each row's domain (issue 39)
        for domain in sorted({row["domain"] for row in rows}):
            try:
                check_options(domain, bench.options)
            except OptionError as error:
                raise ValueError(f"benchmark {bench.name}: options.{error.option}: {error.reason}") from None
    prompts = [with_mode(row["prompt"], bench.mode) for row in rows]
    plan = _Plan(bench, rows, prompts, judge=judge, episodes=bench.kind == "verify" and plays_episodes(bench, rows))
    if bench.kind == "arena":
        plan.baselines = _given_baselines(bench, rows, variables)
    return plan


def _sample(generator: Generator, prompts: list, bench: Benchmark, progress: Path, settings: EvalSettings):
    budget = token_budget(generator, prompts, bench.max_new_tokens)
    drawn = Sampling(n=bench.k, temperature=bench.temperature, top_p=bench.top_p, max_tokens=budget)
    return sample(generator, prompts, drawn, batch_size=settings.batch_size, progress=progress,
                  description=bench.name, seed=settings.seed)  # fmt: skip


def _given_baselines(bench: Benchmark, rows: Sequence[dict], variables: Mapping[str, str]) -> list[str] | None:
    """Baseline answers from the benchmark's file or the rows' ``baseline`` field; None when
    neither has them (they are then sampled). A row without one is an error naming it."""
    if bench.baseline:
        by_id = arena.read_baselines(resolve_path(bench.baseline, dict(variables)))
        missing = [arena.row_key(row) for row in rows if arena.row_key(row) not in by_id]
        if missing:
            raise ValueError(
                f"benchmark {bench.name}: {len(missing)} row(s) have no answer in {bench.baseline} "
                f"(first: id {missing[0]!r})"
            )
        return [by_id[arena.row_key(row)] for row in rows]
    given = [row["reference"].get("baseline") for row in rows]
    if all(answer is None for answer in given):
        return None
    if any(not isinstance(answer, str) for answer in given):
        first = next(i for i, answer in enumerate(given) if not isinstance(answer, str))
        raise ValueError(
            f"benchmark {bench.name}: row {first} (id {arena.row_key(rows[first])!r}) has no baseline text"
        )
    return given


def _sampled_baselines(
    bench: Benchmark, arena_dir: Path, generator: Generator, prompts: list, settings: EvalSettings
) -> list[str]:
    """One answer per prompt from the first policy evaluated, cached in ``arena_dir``."""
    path = arena_dir / f"{bench.name}.references.jsonl"
    if path.exists():
        return [json.loads(line)["response"] for line in path.read_text().splitlines()]
    budget = token_budget(generator, prompts, bench.max_new_tokens)
    references = [
        group[0]
        for group in sample(
            generator,
            prompts,
            Sampling(n=1, temperature=bench.temperature, top_p=bench.top_p, max_tokens=budget),
            batch_size=settings.batch_size,
            description=f"{bench.name} baselines",
            seed=settings.seed,
        )
    ]
    arena_dir.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"response": r}) + "\n" for r in references))
    return references


def _judge(cache: dict, spec: Any, settings: EvalSettings) -> Generator:
    """One judge generator per spec for the whole evaluation."""
    key = spec if isinstance(spec, str) else id(spec)
    if key not in cache:
        cache[key] = open_generator(
            spec, batch_size=settings.batch_size, max_concurrency=settings.max_concurrency, timeout=settings.timeout
        )
    return cache[key]


def _judged(
    judge: Generator,
    bench: Benchmark,
    prompts: Sequence[list[dict]],
    samples: Sequence[Sequence[str]],
    baselines: Sequence[str],
    samples_dir: Path,
    batch_size: int,
) -> arena.ArenaOutcome:
    """Two judge games per sample (position swap), sampled like any generation (resumable)."""
    answers = [[arena.answer_text(s) for s in group] for group in samples]
    baselines = [arena.answer_text(b) for b in baselines]
    conversations = [
        conversation
        for prompt, group, baseline in zip(prompts, answers, baselines)
        for answer in group
        for conversation in arena.judge_conversations(arena.question_text(prompt), answer, baseline)
    ]
    drawn = Sampling(
        n=1,
        temperature=float(bench.options.get("judge_temperature", 0.0)),
        top_p=1.0,
        max_tokens=int(bench.options.get("judge_max_tokens", arena.JUDGE_MAX_TOKENS)),
    )
    judged = sample(
        judge,
        conversations,
        drawn,
        batch_size=batch_size,
        progress=samples_dir / f"{bench.name}.judge.progress.jsonl",
        description=f"{bench.name} judge",
    )
    flat = iter(judgement[0] for judgement in judged)
    pairs = [[(next(flat), next(flat)) for _ in group] for group in answers]
    return arena.judged_outcome(
        pairs,
        answers,
        baselines,
        strong_weight=int(bench.options.get("strong_weight", arena.STRONG_WEIGHT)),
        style_control=bool(bench.options.get("style_control", True)),
    )


def _write_samples(
    path: Path,
    rows: Sequence[dict],
    samples: Sequence[Sequence[str]],
    scores: Sequence[Sequence[Any]] | None = None,
    details: Sequence[Sequence[dict]] | None = None,
) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for index, (row, group) in enumerate(zip(rows, samples)):
            for j, response in enumerate(group):
                record = {"prompt_index": index, "id": row.get("id"), "response": response}
                if scores is not None:
                    record["reward"] = scores[index][j].reward
                    record["details"] = _jsonable(scores[index][j].details)
                if details is not None:
                    record.update(details[index][j])
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _answer_key(extracted: Any) -> str | None:
    """A sample's answer for majority voting; samples without one do not vote."""
    return None if extracted is None else str(extracted)
