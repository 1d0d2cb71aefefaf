"""The whole Agentless-style SWE pipeline over SWE-bench instances (SPEC section 7, issue 5).

Per instance: localise (generation + retrieval + fusion) -> repair (k samples) -> generate
reproduction tests -> validate every candidate (regression, reproduction, gold tests) -> rank
(best@k is the prediction). Output directory:

* ``traces/<instance_id>.json`` -- localisation lists and recall, the repair prompt and every
  candidate (response, status, patch, test results), reproduction tests, the selection,
  timings and errors;
* ``predictions.jsonl`` -- ``instance_id``, ``model_name_or_path``, ``model_patch`` (the best@k
  patch, "" when there is none), the input of ``python -m swebench.harness.run_evaluation``;
* ``predictions/run-<j>.jsonl`` -- the same for run j: each instance's j-th repair sample,
  unselected (the runs whose mean resolution rate is the paper's pass@1 headline);
* ``report.json`` -- recall@{1,3,5,10} per localisation method, candidate status counts,
  the headline (pass@1 averaged over the k runs with its standard error, best@k beside it:
  :func:`cascade_rl.swe.rank.headline`) and the best@k / majority@k / pass@k curves over k.

Instances follow SWE-bench's schema (``instance_id``, ``repo``, ``base_commit``,
``problem_statement``, ``patch``, ``test_patch``, ``FAIL_TO_PASS``, ``PASS_TO_PASS``; the test
lists as lists or JSON-encoded strings), with a local git checkout per ``repo``. A bad
instance (malformed field, no checkout, unknown commit) is reported and skipped; the others
run. Local execution runs tests with the current interpreter. ``stages`` stops the pipeline
early (``localize``, ``repair``) for the ``cascade swe localize`` / ``repair`` commands.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cascade_rl.llm.base import Sampling
from cascade_rl.rewards.swe_edits import PatchApplyError, parse_patch, patched_path
from cascade_rl.swe.localize import RECALL_KS, IndexCache, Localization, localize, recall_at_k, recall_table
from cascade_rl.swe.prompts import reproduction_test_messages
from cascade_rl.swe.rank import RankedCandidate, curves, headline, runs_of, select_best, select_majority
from cascade_rl.swe.repair import RepairResult, approx_tokens, repair
from cascade_rl.swe.repo import Repository, RepositoryError

if TYPE_CHECKING:
    from cascade_rl.llm.base import Generator
    from cascade_rl.sandbox import SandboxPool

STAGES = ("localize", "repair", "evaluate")
REQUIRED_FIELDS = ("instance_id", "repo", "base_commit", "problem_statement")


class InstanceError(ValueError):
    """An instance that cannot be run (the message names the field or the problem)."""


@dataclass
class SweInstance:
    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    patch: str = ""
    test_patch: str = ""
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> SweInstance:
        if not isinstance(row, Mapping):
            raise InstanceError(f"an instance must be a JSON object, got {type(row).__name__}")
        for name in REQUIRED_FIELDS:
            if not isinstance(row.get(name), str) or not row[name].strip():
                raise InstanceError(f"field {name!r} must be a non-empty string")
        for name in ("patch", "test_patch"):
            if not isinstance(row.get(name) or "", str):
                raise InstanceError(f"field {name!r} must be a string")
        instance = cls(
            row["instance_id"],
            row["repo"],
            row["base_commit"],
            row["problem_statement"],
            row.get("patch") or "",
            row.get("test_patch") or "",
            _test_list(row, "FAIL_TO_PASS"),
            _test_list(row, "PASS_TO_PASS"),
        )
        if instance.patch:
            try:
                parse_patch(instance.patch)
            except PatchApplyError as error:
                raise InstanceError(f"field 'patch': {error}") from None
        return instance

    @property
    def gold_files(self) -> list[str]:
        """Files the golden patch changes (empty without a golden patch)."""
        return [patched_path(f) for f in parse_patch(self.patch)] if self.patch else []

    @property
    def gold_tests(self) -> list[str]:
        return self.fail_to_pass + self.pass_to_pass


def _test_list(row: Mapping[str, Any], name: str) -> list[str]:
    value = row.get(name)
    if value is None or value == "":
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise InstanceError(f"field {name!r} is a string but not a JSON list") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InstanceError(f"field {name!r} must be a list of test ids")
    return value


def load_instances(path: Path) -> tuple[list[dict], list[tuple[str, str]]]:
    """Rows of a JSON list or JSONL file, and the lines that are not JSON (where, problem)."""
    text = Path(path).read_text()
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as error:
            return [], [(str(path), f"invalid JSON: {error}")]
        return list(rows), []
    rows, bad = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as error:
            bad.append((f"{path}:{number}", f"invalid JSON: {error}"))
    return rows, bad


@dataclass
class PipelineConfig:
    """Knobs of the pipeline; defaults are small enough for a laptop, the paper's values in
    brackets: localisation rollouts [16], repair samples [8 for data, up to 32 for best@k],
    reproduction tests [10 for data, 40 for evaluation]."""

    localization_rollouts: int = 4
    localization_top_n: int = 5
    retrieve_k: int = 50
    rrf_k: float = 0.0
    embedding_model: str | None = None
    repair_files: int = 4
    context_budget: int | None = 16_000
    repair_samples: int = 8
    reproduction_tests: int = 10
    temperature: float = 0.6
    top_p: float = 0.95
    max_tokens: int = 4096
    workers: int = 2
    test_time_s: float = 300.0
    script_time_s: float = 60.0

    def sampling(self) -> Sampling:
        return Sampling(temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens)


@dataclass
class PipelineReport:
    output_dir: Path
    traces: list[dict] = field(default_factory=list)
    bad_instances: list[tuple[str, str]] = field(default_factory=list)
    summary: dict = field(default_factory=dict)


Progress = Callable[[str, str], None]


def run_pipeline(
    rows: Iterable[Mapping[str, Any]],
    checkouts: Mapping[str, str | Path],
    output_dir: Path,
    *,
    generator: Generator | None = None,
    config: PipelineConfig | None = None,
    stages: str = "evaluate",
    model_name: str = "cascade_rl",
    progress: Progress | None = None,
) -> PipelineReport:
    """Run the pipeline up to ``stages`` on every instance (module docstring) and write the
    traces, predictions and report into ``output_dir``."""
    if stages not in STAGES:
        raise ValueError(f"stages must be one of {STAGES}, got {stages!r}")
    if stages != "localize" and generator is None:
        raise ValueError(f"stages={stages!r} needs a generator (repair samples patches)")
    config = config or PipelineConfig()
    output_dir = Path(output_dir)
    (output_dir / "traces").mkdir(parents=True, exist_ok=True)
    report = PipelineReport(output_dir)
    cache = IndexCache()
    pool = None
    if stages == "evaluate":
        from cascade_rl.sandbox import SandboxPool

        pool = SandboxPool(config.workers)
    try:
        for position, row in enumerate(rows):
            name = str(row.get("instance_id", f"#{position}")) if isinstance(row, Mapping) else f"#{position}"
            try:
                instance = SweInstance.from_dict(row)
                repo = open_checkout(instance, checkouts)
            except (InstanceError, RepositoryError) as error:
                report.bad_instances.append((name, str(error)))
                continue
            if progress:
                progress(instance.instance_id, "start")
            trace = run_instance(
                instance,
                repo,
                generator=generator,
                config=config,
                cache=cache,
                pool=pool,
                stages=stages,
                progress=progress,
            )
            (output_dir / "traces" / f"{_safe(instance.instance_id)}.json").write_text(
                json.dumps(trace, indent=1) + "\n"
            )
            report.traces.append(trace)
    finally:
        if pool is not None:
            pool.close()
    if stages != "localize":
        write_predictions(report.traces, output_dir / "predictions.jsonl", model_name)
        write_run_predictions(report.traces, output_dir / "predictions", model_name)
    report.summary = summarize(report.traces, report.bad_instances)
    (output_dir / "report.json").write_text(json.dumps(report.summary, indent=1) + "\n")
    return report


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.@" else "_" for c in name)


def open_checkout(instance: SweInstance, checkouts: Mapping[str, str | Path]) -> Repository:
    if instance.repo not in checkouts:
        raise InstanceError(f"no local checkout given for repository {instance.repo!r}")
    return Repository.open(checkouts[instance.repo], instance.base_commit)


def run_instance(
    instance: SweInstance,
    repo: Repository,
    *,
    generator: Generator | None = None,
    config: PipelineConfig,
    cache: IndexCache,
    pool: SandboxPool | None = None,
    stages: str = "evaluate",
    progress: Progress | None = None,
) -> dict:
    """Run the pipeline on one instance and return its trace (see the module docstring)."""
    trace: dict[str, Any] = {
        "instance_id": instance.instance_id,
        "repo": instance.repo,
        "base_commit": repo.commit,
        "gold_files": instance.gold_files,
        "errors": [],
        "timings": {},
    }
    started = time.perf_counter()

    def stage(name: str, work: Callable[[], Any]) -> Any:
        if progress:
            progress(instance.instance_id, name)
        start = time.perf_counter()
        try:
            return work()
        except Exception as error:  # noqa: BLE001 - a failing stage is recorded, the run goes on
            trace["errors"].append(f"{name}: {type(error).__name__}: {error}")
            return None
        finally:
            trace["timings"][name] = round(time.perf_counter() - start, 3)

    localization = stage(
        "localize",
        lambda: localize(
            instance.problem_statement,
            repo,
            generator=generator,
            cache=cache,
            embedding_model=config.embedding_model,
            rollouts=config.localization_rollouts,
            top_n=config.localization_top_n,
            retrieve_k=config.retrieve_k,
            rrf_k=config.rrf_k,
            sampling=config.sampling(),
        ),
    )
    trace["localization"] = _localization_trace(localization, instance.gold_files)
    if stages != "localize" and localization is not None:
        repaired = stage("repair", lambda: _repair(instance, repo, localization, generator, config))
        if repaired is not None:
            trace["repair"] = {
                "prompt": repaired.prompt,
                "shown_files": list(repaired.shown),
                "counts": repaired.counts(),
            }
            trace["candidates"] = [c.to_dict() for c in repaired.candidates]
            if stages == "evaluate":
                stage("validate", lambda: _validate(instance, repo, repaired, generator, config, pool, trace))
            trace["selection"] = _selection(trace["candidates"], trace.get("gold_evaluated", False))
    trace["timings"]["total"] = round(time.perf_counter() - started, 3)
    return trace


def _localization_trace(localization: Localization | None, gold: Sequence[str]) -> dict:
    if localization is None:
        return {}
    rankings = localization.rankings()
    recall = (
        {
            method: {k: recall_at_k(ranking, gold, k) for k in RECALL_KS}
            for method, ranking in rankings.items()
            if ranking
        }
        if gold
        else {}
    )
    return {
        **rankings,
        "prompt": localization.prompt,
        "responses": localization.responses,
        "parsed": localization.parsed,
        "recall": recall,
    }


def _repair(
    instance: SweInstance, repo: Repository, localization: Localization, generator: Generator, config: PipelineConfig
) -> RepairResult:
    top = localization.fused[: config.repair_files]
    contents = repo.read(top)
    files = [(path, contents[path]) for path in top if path in contents]
    return repair(
        generator,
        instance.problem_statement,
        files,
        repo.read,
        samples=config.repair_samples,
        budget=config.context_budget,
        count_tokens=approx_tokens,
        sampling=config.sampling(),
    )


def _validate(
    instance: SweInstance,
    repo: Repository,
    repaired: RepairResult,
    generator: Generator,
    config: PipelineConfig,
    pool: SandboxPool | None,
    trace: dict,
) -> None:
    """Reproduction tests, then regression / reproduction / gold tests on every candidate;
    results go into ``trace``."""
    from cascade_rl.rewards.swe_prompts import format_files
    from cascade_rl.sandbox import Limits
    from cascade_rl.swe.validate import Validator

    patches = [c.patch for c in repaired.candidates if c.status == "ok"]
    test_limits = Limits(time_s=config.test_time_s, memory_mb=4096, processes=128)
    script_limits = Limits(time_s=config.script_time_s, memory_mb=4096, processes=128)
    with Validator(repo, pool=pool, test_limits=test_limits, script_limits=script_limits) as validator:
        baseline = validator.baseline_tests()
        shown_patches = "\n".join(dict.fromkeys(patches[:3])) or "(no candidate patch)"
        prompt = reproduction_test_messages(instance.problem_statement, shown_patches, format_files(repaired.shown))
        responses = (
            generator.generate(prompt, config.sampling().times(config.reproduction_tests))
            if config.reproduction_tests
            else []
        )
        tests = validator.check_reproduction_tests(responses)
        kept = [t.code for t in tests if t.kept]
        run, _ = baseline.result()
        regression = sorted(run.passing())
        results = validator.validate(
            patches, regression, kept, test_patch=instance.test_patch, gold_tests=instance.gold_tests or None
        )
    trace["regression_tests"] = regression
    trace["gold_evaluated"] = bool(instance.gold_tests)
    trace["reproduction_prompt"] = prompt
    trace["reproduction_tests"] = [asdict(t) for t in tests]
    for candidate in trace["candidates"]:
        if candidate["patch"] in results:
            candidate["validation"] = results[candidate["patch"]].to_dict()


def _selection(candidates: Sequence[dict], gold: bool) -> dict:
    ranked = ranked_candidates(candidates, gold)
    best = select_best(ranked, len(ranked)) if ranked else None
    majority = select_majority(ranked, len(ranked)) if ranked else None
    return {
        "best": best.index if best else None,
        "majority": majority.index if majority else None,
        "patch": best.patch if best else "",
        "resolved": best.resolved if best else (False if gold else None),
    }


def ranked_candidates(candidates: Sequence[dict], gold: bool = False) -> list[RankedCandidate]:
    """Trace candidates as :class:`RankedCandidate`. With ``gold`` (the instance's gold tests
    were run), a candidate without a patch counts as not resolving the instance."""
    ranked = []
    for candidate in candidates:
        validation = candidate.get("validation") or {}
        patch = candidate["patch"] if candidate["status"] == "ok" else ""
        resolved = validation.get("resolved")
        if resolved is None and gold:
            resolved = False
        ranked.append(
            RankedCandidate(
                candidate["index"],
                patch,
                regression_ok=validation.get("regression_ok", True),
                pass_rate=validation.get("pass_rate", 0.0),
                resolved=resolved,
            )
        )
    return ranked


def _prediction(instance_id: str, model_name: str, patch: str) -> str:
    return json.dumps({"instance_id": instance_id, "model_name_or_path": model_name, "model_patch": patch}) + "\n"


def write_predictions(traces: Sequence[dict], path: Path, model_name: str) -> None:
    """SWE-bench predictions: one line per instance with its best@k patch."""
    with open(path, "w") as handle:
        for trace in traces:
            patch = (trace.get("selection") or {}).get("patch") or ""
            handle.write(_prediction(trace["instance_id"], model_name, patch))


def write_run_predictions(traces: Sequence[dict], directory: Path, model_name: str) -> None:
    """SWE-bench predictions of each run j (``run-<j>.jsonl``, j from 1): every instance's j-th
    sample as it was generated ("" when it has no patch), for the harness's pass@1 per run."""
    runs = max((len(trace.get("candidates", [])) for trace in traces), default=0)
    directory.mkdir(parents=True, exist_ok=True)
    for j in range(runs):
        with open(directory / f"run-{j + 1}.jsonl", "w") as handle:
            for trace in traces:
                candidates = {c["index"]: c for c in trace.get("candidates", [])}
                sample = candidates.get(j) or {}
                patch = (sample.get("patch") or "") if sample.get("status") == "ok" else ""
                handle.write(_prediction(trace["instance_id"], model_name, patch))


def harness_headline(
    runs: Sequence[Mapping[str, Any]], best: Mapping[str, Any] | None = None, instance_ids: Sequence[str] = ()
) -> dict:
    """The headline (:func:`cascade_rl.swe.rank.headline`) from the official SWE-bench harness's
    reports (``resolved_ids``) of the runs' predictions and, optionally, of the best@k ones.
    The instances are ``instance_ids``, else every report's ``submitted_ids`` together: an
    instance a run did not submit or resolve counts as unresolved in that run."""
    reports = [*runs, *([best] if best is not None else [])]
    for number, report in enumerate(reports, 1):
        if not isinstance(report, Mapping) or not isinstance(report.get("resolved_ids"), list):
            raise ValueError(f"report {number} is not a SWE-bench harness report: no resolved_ids list")
    ids = list(dict.fromkeys(instance_ids)) or sorted({i for r in reports for i in r.get("submitted_ids") or []})
    if not ids:
        raise ValueError("the reports list no submitted_ids: name the evaluated instances")
    resolved = [set(report["resolved_ids"]) for report in runs]
    table = [[instance in done for instance in ids] for done in resolved]
    return headline(table, [i in set(best["resolved_ids"]) for i in ids] if best is not None else None)


def summarize(traces: Sequence[dict], bad: Sequence[tuple[str, str]]) -> dict:
    """Recall tables, candidate counts, resolution rates and curves over all traces."""
    summary: dict[str, Any] = {
        "instances": len(traces),
        "bad_instances": [list(b) for b in bad],
        "errors": {t["instance_id"]: t["errors"] for t in traces if t["errors"]},
    }
    with_gold = [t for t in traces if t.get("gold_files") and t.get("localization")]
    summary["recall"] = {
        method: recall_table([(t["localization"][method], t["gold_files"]) for t in with_gold])
        for method in ("generation", "retrieval", "fusion")
        if any(t["localization"].get(method) for t in with_gold)
    }
    candidates = [c for t in traces for c in t.get("candidates", [])]
    if candidates:
        statuses: dict[str, int] = {}
        for candidate in candidates:
            statuses[candidate["status"]] = statuses.get(candidate["status"], 0) + 1
        summary["candidates"] = statuses
        per_instance = [
            ranked_candidates(t["candidates"], t.get("gold_evaluated", False)) for t in traces if t.get("candidates")
        ]
        summary["curves"] = curves(per_instance)
        resolved = [
            t["selection"]["resolved"] for t in traces if t.get("selection") and t["selection"]["resolved"] is not None
        ]
        if resolved:
            summary["resolved"] = sum(resolved) / len(resolved)
        summary.update(_headline(traces))
    return summary


def _headline(traces: Sequence[dict]) -> dict:
    """``{"headline": ...}`` over the instances whose samples all have gold results, or nothing."""
    gold = [t for t in traces if t.get("candidates") and t.get("gold_evaluated")]
    runs = runs_of([ranked_candidates(t["candidates"], True) for t in gold])
    if not runs:
        return {}
    return {"headline": headline(runs, [bool((t.get("selection") or {}).get("resolved")) for t in gold])}
