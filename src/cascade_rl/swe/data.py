"""SWE data building (``cascade swe build-data``; SPEC sections 3, 6 and 7, seed sections 4.7 and 4.7.1).

Input: the traces of a pipeline run (generated samples) and the instances they came from.
Output (``output_dir``):

* ``sft.jsonl`` -- chat rows (``messages``, ``source: "swe"``, ``task``, ``instance_id``):
  - **localisation** responses kept only at recall 1 (every gold file among the files listed);
  - **repair** responses of instances where at least ``sft_min_good`` (4) of the first
    ``samples_per_prompt`` (8) samples exceed ``similarity_threshold`` (0.5) unidiff similarity
    to the golden patch; the samples above the threshold are kept;
  - **test generation** responses kept only if their test parses and ran to completion on the
    unpatched repository (no timeout, no sandbox failure).
* ``context-<l>.jsonl``, one per input-context limit l of ``context_limits`` (the paper's
  curriculum: 16K then 24K) -- the SWE RL set built *for* that limit, so each curriculum
  sub-stage can name its own file. Rows of the ``swe`` reward domain (``prompt``, ``files``,
  ``golden_patch``, ``problem_statement``, ``form``, ``tokens``, ``context_limit``) for the
  instances that are hard but not hopeless: fewer than ``sft_min_good`` samples above the
  threshold and at least one with similarity > 0. Two subsets (seed 4.7.1):
  - ``ground_truth``: the repair prompt with the gold files only;
  - ``mixed``: the gold files, then noise files from the instance's fused localisation
    ranking added one at a time, in rank order, until the next one would take the prompt over
    l or the prompt holds ``max_files`` (5) files. Every gold file is present. When not one
    noise file fits, the instance has no mixed row at that l (it would be a copy of its
    ground-truth row, counting the instance twice).
  An instance whose gold files alone exceed l is dropped at that l (both subsets). The files
  of every prompt are in a random order (seeded by ``seed`` and the instance), fixed before
  the prompt is measured, so the count is the count of the prompt written. Prompts shorter
  than ``min_prompt_tokens`` are dropped from both subsets (paper: 8K tokens for limits of
  16K and 24K; by default half the smallest limit, which is the paper's 8K at 16K and scales
  down with small models' limits).
* ``summary.json`` -- SFT counts, per limit the rows of each subset and why others were
  dropped, and the reason each instance was dropped.

Prompt lengths are counted as the trainer counts them (``train/rl_data.drop_long_prompts``):
the policy's tokenizer renders the prompt with its chat template, in the stage's thinking
mode, with the generation prompt (:func:`prompt_counter`). Without a tokenizer,
:func:`approx_prompt_tokens` estimates (identifiers, numbers and punctuation marks) -- the
command asks for ``--approximate-tokens`` to use it.

Similarity is the lexical reward of :mod:`cascade_rl.rewards.swe` on the full files at the
base commit (an unparseable sample scores -1, a no-op 0).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cascade_rl.chat import split_thinking, token_count, with_mode
from cascade_rl.rewards.swe import score as swe_score
from cascade_rl.rewards.swe_edits import EditParseError, parse_edits
from cascade_rl.rewards.swe_prompts import format_files, repair_messages
from cascade_rl.swe.pipeline import InstanceError, SweInstance, open_checkout
from cascade_rl.swe.repair import approx_tokens
from cascade_rl.swe.repo import Repository, RepositoryError

#: the paper's input-context curriculum (SPEC section 6, SWE RL): 16K, then 24K tokens
PAPER_CONTEXT_LIMITS = (16_384, 24_576)
#: tokens of a prompt, given its chat messages
PromptCounter = Callable[[Sequence[Mapping[str, Any]]], int]


@dataclass
class DataConfig:
    similarity_threshold: float = 0.5
    samples_per_prompt: int = 8
    sft_min_good: int = 4
    context_limits: tuple[int, ...] = PAPER_CONTEXT_LIMITS
    #: None: half the smallest limit (the paper's 8K at 16K)
    min_prompt_tokens: int | None = None
    max_files: int = 5
    seed: int = 0

    def __post_init__(self) -> None:
        self.context_limits = tuple(sorted(set(self.context_limits)))
        if not self.context_limits or any(limit < 1 for limit in self.context_limits):
            raise ValueError(f"context_limits must be positive token counts, got {self.context_limits}")
        if self.min_prompt_tokens is not None and self.min_prompt_tokens >= self.context_limits[0]:
            raise ValueError(
                f"min_prompt_tokens {self.min_prompt_tokens} leaves no room under the smallest context limit "
                f"{self.context_limits[0]}"
            )
        if self.max_files < 1:
            raise ValueError(f"max_files must be >= 1, got {self.max_files}")

    @property
    def min_tokens(self) -> int:
        """The shortest prompt kept (``min_prompt_tokens``, else half the smallest limit)."""
        return self.min_prompt_tokens if self.min_prompt_tokens is not None else self.context_limits[0] // 2


@dataclass
class DataReport:
    sft: list[dict] = field(default_factory=list)
    #: the RL set of each context limit
    rl: dict[int, list[dict]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    #: per context limit: rows kept per subset and rows dropped per reason
    rl_counts: dict[int, Counter] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)

    def count(self, name: str, amount: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + amount

    def count_rl(self, limit: int, name: str) -> None:
        self.rl_counts.setdefault(limit, Counter())[name] += 1


def build_data(
    traces: Sequence[Mapping[str, Any]],
    rows: Sequence[Mapping[str, Any]],
    checkouts: Mapping[str, str | Path],
    output_dir: Path,
    *,
    config: DataConfig | None = None,
    count_tokens: PromptCounter | None = None,
) -> DataReport:
    """Build SFT data and one RL set per context limit from pipeline ``traces`` (module
    docstring) and write them. ``count_tokens``: :func:`prompt_counter` of the policy's
    tokenizer (default: :func:`approx_prompt_tokens`)."""
    config = config or DataConfig()
    count_tokens = count_tokens or approx_prompt_tokens
    instances = {}
    for row in rows:
        try:
            instance = SweInstance.from_dict(row)
        except InstanceError:
            continue  # reported by the pipeline run already
        instances[instance.instance_id] = instance
    report = DataReport(rl={limit: [] for limit in config.context_limits})
    for trace in traces:
        instance = instances.get(trace.get("instance_id"))
        if instance is None or not instance.patch:
            report.dropped[str(trace.get("instance_id"))] = "no instance with a golden patch"
            continue
        try:
            repo = open_checkout(instance, checkouts)
        except (InstanceError, RepositoryError) as error:
            report.dropped[instance.instance_id] = str(error)
            continue
        report.sft.extend(localization_samples(trace, instance, report))
        report.sft.extend(test_generation_samples(trace, instance, report))
        kind, repair_rows = repair_samples(trace, instance, repo, config, report)
        report.sft.extend(repair_rows)
        if kind == "rl":
            for limit, limit_rows in rl_prompts(trace, instance, repo, config, count_tokens, report).items():
                report.rl[limit].extend(limit_rows)
        elif kind != "sft":
            report.dropped[instance.instance_id] = kind
    _write(output_dir, report)
    return report


def _chat_row(prompt: Sequence[Mapping], response: str, task: str, instance_id: str) -> dict:
    messages = [dict(m) for m in prompt] + [{"role": "assistant", "content": response}]
    return {"messages": messages, "source": "swe", "task": task, "instance_id": instance_id}


def localization_samples(trace: Mapping, instance: SweInstance, report: DataReport) -> list[dict]:
    """Localisation responses whose file list holds every gold file."""
    localization = trace.get("localization") or {}
    gold = set(instance.gold_files)
    rows = [
        _chat_row(localization["prompt"], response, "localization", instance.instance_id)
        for response, listed in zip(localization.get("responses", []), localization.get("parsed", []))
        if gold and gold <= set(listed)
    ]
    report.count("localization", len(rows))
    return rows


def test_generation_samples(trace: Mapping, instance: SweInstance, report: DataReport) -> list[dict]:
    """Reproduction-test responses whose test parsed and ran to completion."""
    rows = [
        _chat_row(trace["reproduction_prompt"], test["response"], "test_generation", instance.instance_id)
        for test in trace.get("reproduction_tests", [])
        if test["status"] in ("kept", "not_reproducing")
    ]
    report.count("test_generation", len(rows))
    return rows


def candidate_similarity(response: str, golden_patch: str, files: Mapping[str, str]) -> float:
    """The lexical SWE reward of a repair response against the golden patch."""
    return swe_score(response, files=files, golden_patch=golden_patch).reward


def _scoring_files(trace: Mapping, instance: SweInstance, repo: Repository) -> dict[str, str]:
    """Every file a sample may edit: gold files, files shown in the prompt, files named by
    the samples' edits."""
    paths = set(instance.gold_files) | set((trace.get("repair") or {}).get("shown_files", []))
    for candidate in trace.get("candidates", []):
        try:
            paths |= {edit.path for edit in parse_edits(split_thinking(candidate["response"]).answer)}
        except EditParseError:
            pass
    return repo.read(paths)


def repair_samples(
    trace: Mapping, instance: SweInstance, repo: Repository, config: DataConfig, report: DataReport
) -> tuple[str, list[dict]]:
    """Classify the instance by its first ``samples_per_prompt`` repair samples: ``"sft"``
    (with the rows of the good samples), ``"rl"``, or the reason it is dropped."""
    candidates = trace.get("candidates", [])[: config.samples_per_prompt]
    if not candidates:
        return "no repair samples", []
    files = _scoring_files(trace, instance, repo)
    similarities = [candidate_similarity(c["response"], instance.patch, files) for c in candidates]
    good = [c for c, s in zip(candidates, similarities) if s > config.similarity_threshold]
    if len(good) >= config.sft_min_good:
        rows = [_chat_row(trace["repair"]["prompt"], c["response"], "repair", instance.instance_id) for c in good]
        report.count("repair", len(rows))
        return "sft", rows
    if any(s > 0 for s in similarities):
        return "rl", []
    return "hopeless: no sample with non-zero similarity", []


def rl_prompts(
    trace: Mapping,
    instance: SweInstance,
    repo: Repository,
    config: DataConfig,
    count_tokens: PromptCounter,
    report: DataReport,
) -> dict[int, list[dict]]:
    """The ground-truth and mixed-localisation RL rows of one instance at each context limit
    (module docstring)."""
    gold = repo.read(instance.gold_files)
    if set(gold) != set(instance.gold_files):
        report.dropped[instance.instance_id] = "gold files missing at the base commit"
        return {}
    ranking = (trace.get("localization") or {}).get("fusion") or []
    noise_paths = [path for path in ranking if path not in gold][: config.max_files * 4]
    noise_contents = repo.read(noise_paths)
    noise = [(path, noise_contents[path]) for path in noise_paths if path in noise_contents]
    rng = random.Random(f"{config.seed}:{instance.instance_id}")
    place = {path: rng.random() for path in [*gold, *(path for path, _ in noise)]}
    prompt = _PromptBuilder(instance, place, count_tokens)
    return {
        limit: _rows_at_limit(prompt, list(gold.items()), noise, limit, config, report)
        for limit in config.context_limits
    }


@dataclass
class _PromptBuilder:
    """Repair prompts of one instance, files in their drawn places, measured once each."""

    instance: SweInstance
    place: Mapping[str, float]
    count_tokens: PromptCounter

    def row(self, files: Sequence[tuple[str, str]], form: str, limit: int) -> dict:
        ordered = sorted(files, key=lambda item: self.place[item[0]])
        prompt = repair_messages(self.instance.problem_statement, format_files(ordered))
        return {
            "prompt": prompt,
            "domain": "swe",
            "files": dict(ordered),
            "golden_patch": self.instance.patch,
            "problem_statement": self.instance.problem_statement,
            "id": f"{self.instance.instance_id}:{form}",
            "form": form,
            "tokens": self.count_tokens(prompt),
            "context_limit": limit,
        }


def _rows_at_limit(
    prompt: _PromptBuilder,
    gold: list[tuple[str, str]],
    noise: Sequence[tuple[str, str]],
    limit: int,
    config: DataConfig,
    report: DataReport,
) -> list[dict]:
    """The instance's rows in the set of context limit ``limit``."""
    ground_truth = prompt.row(gold, "ground_truth", limit)
    if ground_truth["tokens"] > limit:
        report.count_rl(limit, "dropped: gold files alone exceed the limit")
        return []
    mixed = ground_truth
    for item in noise:
        if len(mixed["files"]) >= config.max_files:
            break
        trial = prompt.row([*mixed["files"].items(), item], "mixed", limit)
        if trial["tokens"] > limit:
            break
        mixed = trial
    candidates = [ground_truth]
    if mixed is ground_truth:
        report.count_rl(limit, "dropped: mixed, no noise file fits")
    else:
        candidates.append(mixed)
    kept = []
    for row in candidates:
        if row["tokens"] < config.min_tokens:
            report.count_rl(limit, f"dropped: {row['form']}, shorter than {config.min_tokens} tokens")
        else:
            report.count_rl(limit, row["form"])
            kept.append(row)
    return kept


def rl_file(limit: int) -> str:
    """The name of the RL set built for context limit ``limit`` (a curriculum step's data)."""
    return f"context-{limit}.jsonl"


def _write(output_dir: Path, report: DataReport) -> None:
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    files = {"sft.jsonl": report.sft, **{rl_file(limit): rows for limit, rows in report.rl.items()}}
    for name, rows in files.items():
        with open(output_dir / name, "w") as handle:
            for row in rows:
                handle.write(json.dumps(row) + "\n")
    summary = {
        "counts": report.counts,
        "sft_rows": len(report.sft),
        "rl": {
            str(limit): {"file": rl_file(limit), "rows": len(rows), **dict(report.rl_counts.get(limit, {}))}
            for limit, rows in report.rl.items()
        },
        "dropped": report.dropped,
    }
    (output_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")


def approx_prompt_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """A tokenizer-free estimate of a prompt's length (:func:`cascade_rl.swe.repair.approx_tokens`
    of its messages' text)."""
    return sum(approx_tokens(str(message.get("content") or "")) for message in messages)


def prompt_counter(tokenizer: Any, mode: str = "think") -> PromptCounter:
    """Exact prompt lengths as the trainer counts them: the prompt in thinking ``mode`` (the
    SWE stage's), rendered with ``tokenizer``'s chat template and the generation prompt."""
    return lambda messages: token_count(tokenizer, with_mode(messages, mode), add_generation_prompt=True)


def load_tokenizer(path: str | Path, *, cascade_template: bool = True) -> Any:
    """A local Hugging Face tokenizer, with the Cascade chat template when the recipe installs
    it (``model.chat_template: cascade``, the default) or when the tokenizer has none."""
    from transformers import AutoTokenizer

    from cascade_rl.chat import install_chat_template

    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if cascade_template or not tokenizer.chat_template:
        install_chat_template(tokenizer)
    return tokenizer
