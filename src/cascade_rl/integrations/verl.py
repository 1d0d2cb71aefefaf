"""The project's reward verifiers for verl (SPEC section 11: the verifiers usable from other
engines): a reward function with verl's signature, and the project's RL rows as verl's dataset.

**The reward function.** In a verl config::

    custom_reward_function:
      path: pkg://cascade_rl.integrations.verl
      name: compute_score            # verl's naive / prime reward managers: one response a call
      # name: compute_score_batch    # reward_model.reward_manager=batch: every response at once
      reward_kwargs: {options: {math: {language_penalty: -1}}}

:func:`compute_score` takes verl's arguments (``data_source``, ``solution_str``,
``ground_truth``, ``extra_info``) and routes on ``data_source``: the project's domain names
(``math``, ``ifeval``, ``code``, ``tool_call``, ... -- every registered domain, new ones
included), or verl's own source names (:data:`VERL_SOURCES`, those of verl's
``default_compute_score``: ``openai/gsm8k`` and the MATH, DAPO, AIME and Numina sets -> math;
``codecontests``, ``apps``, ``codeforces``, ``taco`` -> code, their ``ground_truth`` being the
tests JSON). A source neither knows goes to verl's own ``default_compute_score`` when verl is
installed, else :class:`NotImplementedError`, as verl does.

* ``ground_truth``: for a domain with one reference field, its value (``answer``; a JSON
  string for structured ones, such as code's tests); otherwise a JSON object of the fields
  (``{"instruction_id_list": [...], "kwargs": [...]}``).
* Answer conventions: the math verifier reads the last ``\\boxed{}``; a GSM8K answer given
  verl's way (``#### 72``, verl's GSM8K prompt) or a DAPO / AIME answer (a last line ``Answer:
  72``) is read as that box when the response has none.
* ``extra_info["prompt"]`` (the last user turn, written by ``cascade data export --to verl``)
  reaches scorers that read the prompt (the language check, the IF checks that repeat it).
* The result is ``{"score": reward, "masked": bool}`` for every response (verl logs the keys
  of a dict result). verl has no notion of a sample without a verdict: a masked response
  (a reward-model or judge server that failed, a scorer that raised) scores 0 there, and
  ``masked`` says so.

**The dataset** (:func:`verl_row`, ``cascade data export --to verl``): one parquet row per RL
row, in verl's layout: ``data_source`` and ``ability`` (the domain), ``prompt`` (the chat
messages, a thinking ``mode`` written as the ` /think` / ` /no_think` flag),
``reward_model: {"style": "rule", "ground_truth"}`` (as above) and ``extra_info`` (``split``,
``index``, ``prompt``, ``id``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cascade_rl.chat import last_user_text, split_thinking
from cascade_rl.data.rows import DataError, RowError, iter_rows
from cascade_rl.llm.base import apply_modes
from cascade_rl.rewards.base import Score
from cascade_rl.rewards.registry import REGISTRY, RewardDomain, get_domain, missing_fields, score_batch

#: verl's source names (``verl.utils.reward_score.default_compute_score``) -> the project's domain
VERL_SOURCES = {
    "openai/gsm8k": "math",
    "lighteval/MATH": "math",
    "DigitalLearningGmbH/MATH-lighteval": "math",
    "HuggingFaceH4/MATH-500": "math",
    "math_dapo": "math",
    "math_dapo_reasoning": "math",
    "numina_aops_forum": "math",
    "numina_synthetic_math": "math",
    "numina_amc_aime": "math",
    "numina_synthetic_amc": "math",
    "numina_cn_k12": "math",
    "numina_olympiads": "math",
    "codecontests": "code",
    "apps": "code",
    "codeforces": "code",
    "taco": "code",
}
#: verl's sources whose prompts ask for ``#### N`` (GSM8K) or a last line ``Answer: N`` (DAPO)
GSM8K_SOURCES = ("openai/gsm8k",)
DAPO_SOURCES = ("math_dapo", "math_dapo_reasoning")
#: arguments verl's reward managers may pass that the project's scorers do not need
VERL_ARGUMENTS = ("sandbox_fusion_url", "concurrent_semaphore", "memory_limit_mb")
_GSM8K_ANSWER = re.compile(r"#### (\-?[0-9\.\,]+)")
_DAPO_ANSWER = re.compile(r"Answer\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


def domain_of(data_source: str) -> RewardDomain | None:
    """The project's domain for a verl ``data_source``, or None when neither knows it."""
    if data_source in REGISTRY:
        return REGISTRY[data_source]
    name = VERL_SOURCES.get(data_source) or ("math" if data_source.startswith("aime") else None)
    return REGISTRY[name] if name else None


def reference_fields(domain: RewardDomain, ground_truth: Any) -> dict[str, Any]:
    """The reference fields of ``domain`` from a verl ``ground_truth`` (module docstring)."""
    if len(domain.fields) == 1:
        (name,) = domain.fields
        value = ground_truth
        if name != "answer" and isinstance(value, str) and value.strip()[:1] in ("{", "["):
            value = _json(value, name)
        if isinstance(value, Mapping) and name in value and len(value) == 1:
            value = value[name]
        return {name: value}
    value = _json(ground_truth, "ground_truth") if isinstance(ground_truth, str) else ground_truth
    if not isinstance(value, Mapping):
        raise RowError(f"ground_truth of a {domain.name} row must be a JSON object with {', '.join(domain.fields)}")
    fields = dict(value)
    missing = missing_fields(domain, fields)
    if missing:
        raise RowError(f"ground_truth of a {domain.name} row lacks {', '.join(missing)}")
    return fields


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise RowError(f"{what} is not valid JSON ({error.msg})") from None


def answer_in_verl_form(solution: str, data_source: str) -> str:
    """The response with a GSM8K ``#### N`` or DAPO ``Answer: N`` answer written as the box the
    math verifier reads, when its answer has no box (module docstring)."""
    split = split_thinking(solution)
    if not split.finished or "\\boxed" in split.answer:
        return solution
    pattern = _GSM8K_ANSWER if data_source in GSM8K_SOURCES else None
    if data_source in DAPO_SOURCES or data_source.startswith("aime"):
        pattern = _DAPO_ANSWER
    found = pattern.findall(split.answer) if pattern else []
    if not found:
        return solution
    answer = found[-1].replace(",", "") if pattern is _GSM8K_ANSWER else found[-1]
    return f"{solution}\n\\boxed{{{answer}}}"


def _request(data_source: str, solution: str, ground_truth: Any, extra_info: Mapping | None) -> tuple:
    domain = domain_of(data_source)
    if domain is None:
        return None, None
    extra = extra_info if isinstance(extra_info, Mapping) else {}
    request = {**reference_fields(domain, ground_truth), "response": answer_in_verl_form(solution, data_source)}
    if isinstance(extra.get("prompt"), str):
        request["prompt"] = extra["prompt"]
    if extra.get("index") is not None:
        request["group"] = f"{data_source}:{extra['index']}"
    return domain, request


def _result(score: Score) -> dict[str, Any]:
    masked = score.masked is not None
    return {"score": 0.0 if masked else float(score.reward), "masked": masked}


def _options(options: Mapping[str, Any] | None, unknown: Mapping[str, Any]) -> Mapping[str, Any]:
    extra = [name for name in unknown if name not in VERL_ARGUMENTS]
    if extra:
        raise TypeError(f"cascade_rl compute_score: unknown argument(s) {', '.join(extra)}; options go in `options`")
    return options or {}


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    **kwargs: Any,
) -> dict[str, Any] | float:
    """The project's reward of one verl response (module docstring); ``options`` per domain,
    e.g. ``{"math": {"language_penalty": -1}}`` (verl's ``reward_kwargs``)."""
    options = _options(options, kwargs)
    domain, request = _request(data_source, solution_str, ground_truth, extra_info)
    if domain is None:
        return _verl_default(data_source, solution_str, ground_truth, extra_info, kwargs)
    (score,) = score_batch(domain, [request], options.get(domain.name))
    return _result(score)


def compute_score_batch(
    data_sources: Sequence[str],
    solution_strs: Sequence[str],
    ground_truths: Sequence[Any],
    extra_infos: Sequence[Mapping[str, Any] | None],
    *,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    workers: int = 4,
    **kwargs: Any,
) -> list[dict[str, Any] | float]:
    """:func:`compute_score` for verl's batch reward manager: each domain's responses scored as
    one batch (code in a sandbox pool of ``workers``; a group domain by prompt, the rollouts of
    one ``extra_info["index"]`` together)."""
    options = _options(options, kwargs)
    results: list[Any] = [None] * len(solution_strs)
    by_domain: dict[str, list[tuple[int, dict]]] = {}
    rows = zip(data_sources, solution_strs, ground_truths, extra_infos)
    for index, (source, solution, truth, extra) in enumerate(rows):
        domain, request = _request(str(source), solution, truth, extra)
        if domain is None:
            results[index] = _verl_default(str(source), solution, truth, extra, kwargs)
        else:
            by_domain.setdefault(domain.name, []).append((index, request))
    for name, members in by_domain.items():
        scores = score_batch(get_domain(name), [r for _, r in members], options.get(name), workers=workers)
        for (index, _), score in zip(members, scores):
            results[index] = _result(score)
    return results


def _verl_default(data_source: str, solution: str, ground_truth: Any, extra_info: Any, kwargs: dict) -> Any:
    try:
        from verl.utils.reward_score import default_compute_score
    except ImportError:
        known = sorted({*REGISTRY, *VERL_SOURCES})
        raise NotImplementedError(
            f"no reward for data_source {data_source!r}: not a domain of cascade_rl nor one of verl's sources "
            f"it routes ({', '.join(known)}); verl's own default_compute_score is not installed"
        ) from None
    return default_compute_score(data_source, solution, ground_truth, extra_info, **kwargs)


# ----------------------------------------------------------------------------- the dataset
def ground_truth_of(domain: RewardDomain, row: Mapping[str, Any]) -> str:
    """A row's reference fields as verl's ``ground_truth`` string (module docstring)."""
    if len(domain.fields) == 1:
        value = row[domain.fields[0]]
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return json.dumps({name: row[name] for name in domain.fields}, ensure_ascii=False)


def verl_row(row: Mapping[str, Any], index: int, split: str = "train") -> dict[str, Any]:
    """One RL row (``prompt``, ``domain``, reference fields) as a verl dataset row."""
    name = row.get("domain")
    if not isinstance(name, str) or name not in REGISTRY:
        raise RowError(f"domain {name!r} is not a registered reward domain" if name else "missing field 'domain'")
    domain = REGISTRY[name]
    missing = missing_fields(domain, row)
    if missing:
        raise RowError(f"domain {name!r} needs field(s) {', '.join(repr(m) for m in missing)}")
    prompt = row.get("prompt")
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    if not isinstance(messages, list) or not messages or not all(isinstance(m, Mapping) for m in messages):
        raise RowError("missing field 'prompt' (a string or a list of chat messages)")
    messages = [{"role": m.get("role"), "content": m.get("content")} for m in apply_modes(messages)]
    identifier = row.get("id")
    return {
        "data_source": name,
        "prompt": messages,
        "ability": name,
        "reward_model": {"style": "rule", "ground_truth": ground_truth_of(domain, row)},
        "extra_info": {
            "split": split,
            "index": index,
            "prompt": last_user_text(messages),
            "id": None if identifier is None else str(identifier),
        },
    }


def export_verl(
    inputs: Sequence[Path], output: Path, *, split: str = "train", skip_malformed: bool = False
) -> tuple[int, Counter]:
    """Write the RL rows of ``inputs`` (JSONL / Parquet) as one verl parquet file; returns the
    rows written and the malformed rows skipped by reason. A malformed row stops the export with
    :class:`~cascade_rl.data.rows.DataError` naming its file and line, unless ``skip_malformed``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows, skipped = [], Counter()
    for path in inputs:
        for row in iter_rows(path, skip_malformed=skip_malformed):
            try:
                if row.error:
                    raise RowError(row.error)
                rows.append(verl_row(row.data, len(rows), split))
            except RowError as error:
                if not skip_malformed:
                    raise DataError(f"{row.where}: {error}") from None
                skipped[str(error)] += 1
    if not rows:
        raise DataError(f"no RL rows to export from {', '.join(str(p) for p in inputs)}")
    output.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), output)
    return len(rows), skipped
