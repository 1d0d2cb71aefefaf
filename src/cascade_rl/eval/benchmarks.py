"""Running benchmarks on a checkpoint (SPEC section 9): sample k responses per prompt, score
them with the reward registry, and report pass@1 as avg@k (or pass@k / majority@k).

Two kinds of benchmark:

* ``verify`` — a sample is correct when its reward reaches ``pass_threshold`` (math, IFEval
  strict prompt accuracy, code, SWE exact fix, tool calls). The mean reward is kept beside the
  headline number (for SWE: the mean patch similarity).
* ``arena`` — an ArenaHard-like win rate: the reward model compares each sample with a
  reference answer to the same prompt (ties count half). The references are sampled once,
  from the first policy evaluated with a reward model available (the SFT model in a full
  cascade), and cached, so every later stage is compared with the same answers.

Samples and their scores are written next to ``eval.json`` for inspection.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cascade_rl.chat import decode_response, last_user_text, stop_token_ids, with_mode
from cascade_rl.data.loading import load_sources, rl_normaliser
from cascade_rl.recipe import Benchmark, DataSource
from cascade_rl.rewards.registry import get_domain, score_batch

log = logging.getLogger(__name__)


@dataclass
class BenchmarkResult:
    name: str
    value: float | None
    metric: str
    k: int
    prompts: int
    extra: dict[str, float] = field(default_factory=dict)


def load_benchmark(bench: Benchmark, variables: Mapping[str, str] | None = None) -> list[dict]:
    rows, report = load_sources(
        [DataSource(path=bench.data, limit=bench.limit)], rl_normaliser(bench.domain), variables=dict(variables or {})
    )
    if report.skipped:
        log.warning("benchmark %s: %s", bench.name, report.summary())
    return rows


def sample_responses(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Sequence[dict]],
    *,
    k: int,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    batch_size: int = 32,
    seed: int = 0,
) -> list[list[str]]:
    """``k`` sampled responses per chat prompt with transformers' ``generate`` (greedy when
    ``temperature`` is 0), decoded with their thinking tags intact."""
    import torch

    torch.manual_seed(seed)
    tokenizer.padding_side = "left"
    stops = stop_token_ids(tokenizer)
    limit = getattr(model.config, "max_position_embeddings", None)
    outputs: list[list[str]] = []
    per_batch = max(1, batch_size // k) if k <= batch_size else 1
    for start in range(0, len(prompts), per_batch):
        texts = [
            tokenizer.apply_chat_template(list(p), tokenize=False, add_generation_prompt=True)
            for p in prompts[start : start + per_batch]
        ]
        batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
        budget = max_new_tokens if limit is None else max(1, min(max_new_tokens, limit - batch["input_ids"].shape[1]))
        sampling = (
            dict(do_sample=True, temperature=temperature, top_p=top_p) if temperature > 0 else dict(do_sample=False)
        )
        with torch.inference_mode():
            generated = model.generate(
                **batch,
                max_new_tokens=budget,
                num_return_sequences=k,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=sorted(stops),
                **sampling,
            )
        new_tokens = generated[:, batch["input_ids"].shape[1] :]
        decoded = [decode_response(tokenizer, ids, stops) for ids in new_tokens.tolist()]
        outputs.extend(decoded[i : i + k] for i in range(0, len(decoded), k))
    return outputs


def _requests(rows: Sequence[dict], samples: Sequence[Sequence[str]]) -> list[tuple[str, dict]]:
    out = []
    for index, (row, responses) in enumerate(zip(rows, samples)):
        for response in responses:
            out.append(
                (
                    row["domain"],
                    {
                        **row["reference"],
                        "response": response,
                        "prompt": last_user_text(row["prompt"]),
                        "messages": row["prompt"],
                        "group": str(index),
                    },
                )
            )
    return out


def score_samples(
    rows: Sequence[dict], samples: Sequence[Sequence[str]], options: Mapping[str, Any], workers: int = 4
) -> list[list[Any]]:
    """Scores per prompt and sample, each domain scored as one batch through the registry."""
    requests = _requests(rows, samples)
    by_domain: dict[str, list[int]] = {}
    for index, (domain, _) in enumerate(requests):
        by_domain.setdefault(domain, []).append(index)
    flat: list[Any] = [None] * len(requests)
    for domain, members in by_domain.items():
        scores = score_batch(
            get_domain(domain), [requests[i][1] for i in members], options.get(domain), workers=workers
        )
        for i, score in zip(members, scores):
            flat[i] = score
    out, cursor = [], 0
    for responses in samples:
        out.append(flat[cursor : cursor + len(responses)])
        cursor += len(responses)
    return out


def verify_result(bench: Benchmark, scores: Sequence[Sequence[Any]]) -> BenchmarkResult:
    from cascade_rl.eval import metrics

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
    }
    return BenchmarkResult(bench.name, 100.0 * value, bench.metric, bench.k, len(scores), extra)


def arena_result(
    bench: Benchmark,
    rows: Sequence[dict],
    samples: Sequence[Sequence[str]],
    references: Sequence[str],
    reward_model: str,
) -> BenchmarkResult:
    from cascade_rl.eval.metrics import standard_error
    from cascade_rl.rewards.preference import rm_scores

    sample_requests = [{"messages": row["prompt"], "response": s} for row, group in zip(rows, samples) for s in group]
    reference_requests = [{"messages": row["prompt"], "response": ref} for row, ref in zip(rows, references)]
    sample_scores = rm_scores(sample_requests, reward_model)
    reference_scores = rm_scores(reference_requests, reward_model)
    wins, per_prompt, cursor = [], [], 0
    for index, group in enumerate(samples):
        group_wins = [
            1.0 if value > reference_scores[index] else 0.5 if value == reference_scores[index] else 0.0
            for value in sample_scores[cursor : cursor + len(group)]
        ]
        wins += group_wins
        per_prompt += [sum(group_wins) / len(group_wins)] if group_wins else []
        cursor += len(group)
    return BenchmarkResult(
        bench.name,
        100.0 * sum(wins) / max(len(wins), 1),
        "win rate",
        bench.k,
        len(rows),
        {
            "mean_rm_score": sum(sample_scores) / max(len(sample_scores), 1),
            "stderr": 100.0 * standard_error(per_prompt),
        },
    )


def evaluate(
    model_dir: Path,
    benchmarks: Sequence[Benchmark],
    out_dir: Path,
    *,
    variables: Mapping[str, str] | None = None,
    reward_model: str | None = None,
    arena_dir: Path | None = None,
    batch_size: int = 32,
    workers: int = 4,
    seed: int = 0,
) -> dict[str, dict]:
    """Evaluate ``model_dir`` on ``benchmarks``; write ``out_dir/eval.json`` (+ samples)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(
        model_dir, local_files_only=True, dtype=torch.bfloat16 if torch.cuda.is_available() else torch.float32
    )
    model.to("cuda" if torch.cuda.is_available() else "cpu").eval()
    samples_dir = out_dir / "eval-samples"
    samples_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    for bench in benchmarks:
        rows = load_benchmark(bench, variables)
        prompts = [with_mode(row["prompt"], bench.mode) for row in rows]
        if bench.kind == "arena" and not reward_model:
            log.info("%s: skipped (an arena benchmark needs a trained reward model)", bench.name)
            continue
        generate = dict(
            temperature=bench.temperature,
            top_p=bench.top_p,
            max_new_tokens=bench.max_new_tokens,
            batch_size=batch_size,
            seed=seed,
        )
        samples = sample_responses(model, tokenizer, prompts, k=bench.k, **generate)
        if bench.kind == "arena":
            references = _arena_references(bench, arena_dir or out_dir, model, tokenizer, prompts, generate)
            result = arena_result(bench, rows, samples, references, str(reward_model))
            scores = None
        else:
            options = {(bench.domain or row["domain"]): bench.options for row in rows}
            scores = score_samples(rows, samples, options, workers=workers)
            result = verify_result(bench, scores)
        _write_samples(samples_dir / f"{bench.name}.jsonl", rows, samples, scores)
        results[bench.name] = asdict(result)
        log.info("%s: %s = %.1f", bench.name, result.metric, result.value or 0.0)
    (out_dir / "eval.json").write_text(json.dumps(results, indent=1))
    return results


def _arena_references(
    bench: Benchmark, arena_dir: Path, model: Any, tokenizer: Any, prompts: list, generate: dict
) -> list[str]:
    path = arena_dir / f"{bench.name}.references.jsonl"
    if path.exists():
        return [json.loads(line)["response"] for line in path.read_text().splitlines()]
    references = [group[0] for group in sample_responses(model, tokenizer, prompts, k=1, **generate)]
    arena_dir.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"response": r}) + "\n" for r in references))
    return references


def _write_samples(
    path: Path, rows: Sequence[dict], samples: Sequence[Sequence[str]], scores: Sequence[Sequence[Any]] | None
) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for index, (row, group) in enumerate(zip(rows, samples)):
            for j, response in enumerate(group):
                record = {"prompt_index": index, "id": row.get("id"), "response": response}
                if scores is not None:
                    record["reward"] = scores[index][j].reward
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def _answer_key(extracted: Any) -> str | None:
    """A sample's answer for majority voting; samples without one do not vote."""
    return None if extracted is None else str(extracted)
