"""SWE data building (``cascade swe build-data``; SPEC sections 3, 6 and 7, seed section 4.7).

Input: the traces of a pipeline run (generated samples) and the instances they came from.
Output (``output_dir``):

* ``sft.jsonl`` -- chat rows (``messages``, ``source: "swe"``, ``task``, ``instance_id``):
  - **localisation** responses kept only at recall 1 (every gold file among the files listed);
  - **repair** responses of instances where at least ``sft_min_good`` (4) of the first
    ``samples_per_prompt`` (8) samples exceed ``similarity_threshold`` (0.5) unidiff similarity
    to the golden patch; the samples above the threshold are kept;
  - **test generation** responses kept only if their test parses and ran to completion on the
    unpatched repository (no timeout, no sandbox failure).
* ``rl.jsonl`` -- SWE RL prompts (``prompt``, ``domain: "swe"``, ``files``, ``golden_patch``,
  ``form``, ``tokens``) for the instances that are hard but not hopeless: fewer than
  ``sft_min_good`` samples above the threshold and at least one with similarity > 0. Two
  forms per instance (SPEC section 6):
  - ``ground_truth``: the repair prompt with the gold files only;
  - ``mixed``: the gold files plus distractors from the instance's localisation ranking,
    added one at a time while the prompt stays within ``max_prompt_tokens`` (the limit l),
    at most ``max_files`` files, in shuffled order; dropped when the gold files alone exceed l.
  Prompts over ``max_prompt_tokens`` or under ``min_prompt_tokens`` (8K in the paper) are
  dropped, in both forms.
* ``summary.json`` -- counts per kind and the reason each instance was dropped.

Similarity is the lexical reward of :mod:`cascade_rl.rewards.swe` on the full files at the
base commit (an unparseable sample scores -1, a no-op 0). Token counts use a Hugging Face
tokenizer when one is given, else :func:`cascade_rl.swe.repair.approx_tokens`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cascade_rl.chat import split_thinking
from cascade_rl.rewards.swe import score as swe_score
from cascade_rl.rewards.swe_edits import EditParseError, parse_edits
from cascade_rl.rewards.swe_prompts import format_files, repair_messages
from cascade_rl.swe.pipeline import InstanceError, SweInstance, open_checkout
from cascade_rl.swe.repair import approx_tokens
from cascade_rl.swe.repo import Repository, RepositoryError


@dataclass
class DataConfig:
    similarity_threshold: float = 0.5
    samples_per_prompt: int = 8
    sft_min_good: int = 4
    max_prompt_tokens: int = 24_000
    min_prompt_tokens: int = 8_000
    max_files: int = 5
    seed: int = 0


@dataclass
class DataReport:
    sft: list[dict] = field(default_factory=list)
    rl: list[dict] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)

    def count(self, name: str, amount: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + amount


def build_data(
    traces: Sequence[Mapping[str, Any]],
    rows: Sequence[Mapping[str, Any]],
    checkouts: Mapping[str, str | Path],
    output_dir: Path,
    *,
    config: DataConfig | None = None,
    count_tokens: Callable[[str], int] = approx_tokens,
) -> DataReport:
    """Build SFT and RL data from pipeline ``traces`` (module docstring) and write it."""
    config = config or DataConfig()
    instances = {}
    for row in rows:
        try:
            instance = SweInstance.from_dict(row)
        except InstanceError:
            continue  # reported by the pipeline run already
        instances[instance.instance_id] = instance
    report = DataReport()
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
            report.rl.extend(rl_prompts(trace, instance, repo, config, count_tokens, report))
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
    count_tokens: Callable[[str], int],
    report: DataReport,
) -> list[dict]:
    """The ground-truth and mixed-localisation RL prompts of one instance (module docstring)."""
    gold = repo.read(instance.gold_files)
    if set(gold) != set(instance.gold_files):
        report.dropped[instance.instance_id] = "gold files missing at the base commit"
        return []
    rng = random.Random(f"{config.seed}:{instance.instance_id}")
    rows = []
    ground_truth = _rl_row(instance, list(gold.items()), "ground_truth", count_tokens)
    mixed_files = _mixed_files(trace, instance, repo, gold, config, count_tokens)
    candidates = [ground_truth]
    if mixed_files is not None:
        rng.shuffle(mixed_files)
        candidates.append(_rl_row(instance, mixed_files, "mixed", count_tokens))
    for row in candidates:
        if config.min_prompt_tokens <= row["tokens"] <= config.max_prompt_tokens:
            rows.append(row)
            report.count(f"rl_{row['form']}")
        else:
            report.count(f"rl_{row['form']}_dropped_length")
    return rows


def _mixed_files(
    trace: Mapping,
    instance: SweInstance,
    repo: Repository,
    gold: Mapping[str, str],
    config: DataConfig,
    count_tokens: Callable[[str], int],
) -> list[tuple[str, str]] | None:
    """Gold files plus localised distractors while the prompt fits (None: gold alone is too
    long)."""
    files = list(gold.items())
    if _prompt_tokens(instance, files, count_tokens) > config.max_prompt_tokens:
        return None
    ranking = (trace.get("localization") or {}).get("fusion") or []
    distractors = [path for path in ranking if path not in gold][: config.max_files * 4]
    contents = repo.read(distractors)
    for path in distractors:
        if len(files) >= config.max_files:
            break
        if path not in contents:
            continue
        trial = files + [(path, contents[path])]
        if _prompt_tokens(instance, trial, count_tokens) > config.max_prompt_tokens:
            break
        files = trial
    return files


def _prompt_tokens(instance: SweInstance, files: Sequence[tuple[str, str]], count_tokens: Callable[[str], int]) -> int:
    return count_tokens(repair_messages(instance.problem_statement, format_files(files))[0]["content"])


def _rl_row(
    instance: SweInstance, files: Sequence[tuple[str, str]], form: str, count_tokens: Callable[[str], int]
) -> dict:
    prompt = repair_messages(instance.problem_statement, format_files(files))
    return {
        "prompt": prompt,
        "domain": "swe",
        "files": dict(files),
        "golden_patch": instance.patch,
        "problem_statement": instance.problem_statement,
        "id": f"{instance.instance_id}:{form}",
        "form": form,
        "tokens": count_tokens(prompt[0]["content"]),
    }


def _write(output_dir: Path, report: DataReport) -> None:
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in (("sft.jsonl", report.sft), ("rl.jsonl", report.rl)):
        with open(output_dir / name, "w") as handle:
            for row in rows:
                handle.write(json.dumps(row) + "\n")
    summary = {
        "counts": report.counts,
        "sft_rows": len(report.sft),
        "rl_rows": len(report.rl),
        "dropped": report.dropped,
    }
    (output_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")


def tokenizer_counter(path: str) -> Callable[[str], int]:
    """Exact token counts with a local Hugging Face tokenizer."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])
