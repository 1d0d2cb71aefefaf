"""Supervised fine-tuning in sub-stages on TRL's ``SFTTrainer`` (SPEC section 3).

Each sub-stage (paper: 16K then 32K, one epoch each) trains on its data mix with upsampling
factors, from the previous sub-stage's checkpoint. Samples longer than the sub-stage's
``max_length`` are dropped, not truncated (the paper filters them out). Parallel thinking
and non-thinking samples of one prompt are separate rows and both are kept.

Loss is on assistant tokens only. The Cascade chat template marks them with
``{% generation %}`` (TRL's ``assistant_only_loss``). A model's own template without those
markers (SmolLM2's, most released chat models') cannot say which tokens are the assistant's, so
every assistant turn is found by rendering the conversation up to it (with the generation
prompt) and up to its end: each row goes to TRL pre-tokenized, with ``assistant_masks`` on those
turns (:func:`turn_masked`), so every assistant turn of a multi-turn row is a target in one
sample. A template that rewrites earlier turns as a conversation grows (Qwen3's drops past
thinking) gets one prompt / completion pair per assistant turn instead
(:func:`as_prompt_completions`: TRL's ``completion_only_loss``).

Such a template often drops tools and tool calls too (SmolLM2's shows only each message's
content): the row's tools are then written into its system message and each call into its turn
as ``<tool_call>`` text, as RL prompts and rollouts show them (:func:`cascade_rl.chat.for_template`),
so SFT teaches what RL reads.

A source with ``rejection`` settings holds RL prompts, not SFT rows: before the sub-stage trains,
its input model answers each prompt ``k`` times and the answers the row's verifier accepts become
its SFT rows (:mod:`cascade_rl.data.rejection`, on the main process, through the run's sampling
engine), written once to ``substage-N/rejection-M.jsonl`` and resumed from there.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from cascade_rl.chat import for_template, token_count
from cascade_rl.data.loading import LoadReport, load_sources, normalise_sft
from cascade_rl.recipe import DataSource, SFTStage, SFTSubstage
from cascade_rl.train import distributed
from cascade_rl.train.common import base_args, peft_config, train_supervised, world_size
from cascade_rl.train.context import StageContext
from cascade_rl.train.curriculum import merge_substage_metrics, run_substages

log = logging.getLogger(__name__)


def drop_overlong(rows: list[dict], tokenizer: Any, max_length: int, report: LoadReport) -> list[dict]:
    kept = []
    for row in rows:
        length = token_count(tokenizer, row["messages"], tools=row.get("tools"))
        if length <= max_length:
            kept.append(row)
        else:
            report.skip(f"longer than max_length {max_length}", f"{length} tokens")
    report.kept = len(kept)
    return kept


def marks_assistant_tokens(template: str | None) -> bool:
    """Whether a chat template marks assistant tokens with ``{% generation %}`` (any whitespace control)."""
    import re

    return bool(template and re.search(r"{%-?\s*generation\s*-?%}", template))


def shown_by(row: dict, template: str | None) -> dict:
    """A row as a template without assistant markers shows it: its tools and tool calls written
    into the messages where the template would drop them (:func:`cascade_rl.chat.for_template`)."""
    messages, tools = for_template(row["messages"], row.get("tools"), template)
    rest = {k: v for k, v in row.items() if k not in ("messages", "tools")}
    return {**rest, "messages": messages, **({"tools": tools} if tools else {})}


def turn_masked(rows: list[dict], tokenizer: Any) -> list[dict] | None:
    """Rows as TRL's pre-tokenized form, ``input_ids`` and ``assistant_masks`` (1 on each assistant
    turn's content and end of turn: what ``{% generation %}`` marks), found by rendering every
    turn's prefix; None when the template does not render a conversation as the start of its
    continuation (it rewrites earlier turns, as Qwen3's does with past thinking)."""
    out = []
    for row in rows:
        pieces = _turn_pieces(row, tokenizer)
        if pieces is None:
            return None
        ids, mask = [], []
        for piece, target in pieces:
            piece_ids = tokenizer(piece, add_special_tokens=False)["input_ids"]
            ids, mask = ids + piece_ids, mask + [target] * len(piece_ids)
        rest = {k: v for k, v in row.items() if k not in ("messages", "tools")}
        out.append({**rest, "input_ids": ids, "assistant_masks": mask})
    return out


def _turn_pieces(row: dict, tokenizer: Any) -> list[tuple[str, int]] | None:
    """A row's rendered text cut into (text, 1 if an assistant turn's else 0), or None (above)."""
    tools = json.loads(row["tools"]) if isinstance(row.get("tools"), str) else row.get("tools")
    messages, pieces, done = row["messages"], [], ""
    for turn, message in enumerate(messages):
        if message.get("role") != "assistant" or turn == 0:
            continue
        head = tokenizer.apply_chat_template(messages[:turn], tools=tools, tokenize=False, add_generation_prompt=True)
        full = tokenizer.apply_chat_template(messages[: turn + 1], tools=tools, tokenize=False)
        if not (head.startswith(done) and full.startswith(head)):
            return None
        pieces += [(head[len(done) :], 0), (full[len(head) :], 1)]
        done = full
    return pieces


def as_prompt_completions(row: dict) -> list[dict]:
    """A ``messages`` row as TRL's conversational prompt / completion pairs, one per assistant
    turn, each prompted by every message before it (module docstring)."""
    messages = list(row["messages"])
    if not messages or messages[-1].get("role") != "assistant":
        raise ValueError("an SFT row must end with the assistant's message")
    rest = {k: v for k, v in row.items() if k != "messages"}
    return [
        {**rest, "prompt": messages[:turn], "completion": [message]}
        for turn, message in enumerate(messages)
        if message.get("role") == "assistant" and turn > 0
    ]


def sampled_source(source: DataSource, rows_file: Path, model: Path, context: StageContext) -> DataSource:
    """The SFT source that a rejection-sampled source became (module docstring): its rows file,
    written on the main process the first time."""
    distributed.on_main(
        f"rejection sampling into {rows_file.name}", lambda: _rejection_sample(source, rows_file, model, context)
    )
    return DataSource(path=str(rows_file), upsample=source.upsample)


def _rejection_sample(source: DataSource, rows_file: Path, model: Path, context: StageContext) -> None:
    from cascade_rl.data.rejection import rejection_sample
    from cascade_rl.llm.base import Sampling
    from cascade_rl.llm.local import LocalGenerator
    from cascade_rl.train.machine import local_engine

    settings = source.rejection
    prompts_file = rows_file.with_suffix(".prompts.jsonl")
    if not prompts_file.exists():  # written once: the job's fingerprint includes its inputs
        rows, _ = load_sources([source.model_copy(update={"rejection": None, "upsample": 1.0})], dict,
                               seed=context.seed, variables=dict(context.variables))  # fmt: skip
        rows_file.parent.mkdir(parents=True, exist_ok=True)
        temporary = prompts_file.with_suffix(".tmp")
        temporary.write_text("".join(json.dumps(row) + "\n" for row in rows))
        temporary.replace(prompts_file)
    generator = LocalGenerator(model, engine=local_engine(context.runtime), dtype=context.dtypes.sample, batch_size=256)
    import torch

    torch.manual_seed(context.seed)
    summary = rejection_sample(
        [prompts_file],
        rows_file,
        generator,
        k=settings.k,
        keep=settings.keep,
        mode=settings.mode,
        pass_threshold=settings.pass_threshold,
        sampling=Sampling(
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_tokens=settings.max_tokens,
            top_k=settings.top_k or 0,
        ),  # fmt: skip
        workers=context.runtime.reward_workers,
        spec=str(model),
    )
    log.info("rejection sampling %s: %s", rows_file.name, summary)


def accumulation(batch_size: int, per_device: int) -> int:
    """Gradient-accumulation steps that make ``batch_size`` sequences per optimizer step."""
    return max(1, batch_size // (per_device * world_size()))


def run_sft_stage(stage: SFTStage, context: StageContext) -> Path:
    """Run every sub-stage from ``context.policy``; write ``stage_dir/metrics.jsonl`` and each
    sub-stage's model. Rejection-sampled sources are answered in ``context.dtypes.sample``.
    Returns the last sub-stage's model directory."""

    def run_substage(index: int, sub: SFTSubstage, model: Path, substage_dir: Path) -> dict:
        return _run_substage(stage, sub, index, model, substage_dir, context)

    model = run_substages(stage.substages, context.stage_dir, context.policy, run_substage)
    _merge_metrics(context.stage_dir, len(stage.substages))
    return model


def _run_substage(
    stage: SFTStage, sub: SFTSubstage, index: int, model: Path, substage_dir: Path, context: StageContext
) -> dict:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
    sources = [
        sampled_source(source, substage_dir / f"rejection-{i + 1}.jsonl", model, context)
        if source.rejection
        else source
        for i, source in enumerate(sub.data)
    ]
    rows, report = load_sources(sources, normalise_sft, seed=context.seed + index, variables=dict(context.variables))
    marked = marks_assistant_tokens(tokenizer.chat_template)
    rows = rows if marked else [shown_by(row, tokenizer.chat_template) for row in rows]
    rows = drop_overlong(rows, tokenizer, sub.max_length, report)
    log.info("%s/%s: %s", stage.name, sub.name, report.summary())
    if not rows:
        raise ValueError(f"{stage.name}/{sub.name}: no usable SFT rows ({report.summary()})")
    if not any(row.get("tools") for row in rows):
        rows = [{k: v for k, v in row.items() if k != "tools"} for row in rows]
    tokenized = None if marked else turn_masked(rows, tokenizer)
    if not marked:
        rows = tokenized or [pair for row in rows for pair in as_prompt_completions(row)]
    run_name = f"{stage.name}/{sub.name}"
    args = base_args(
        context.runtime, substage_dir / "trainer", context.seed, run_name=run_name, dtype=context.dtypes.train
    )
    args.update(
        max_length=sub.max_length,
        num_train_epochs=sub.epochs,
        max_steps=sub.max_steps or -1,
        learning_rate=sub.learning_rate,
        lr_scheduler_type=sub.lr_scheduler,
        warmup_steps=sub.warmup_ratio,
        weight_decay=sub.weight_decay,
        per_device_train_batch_size=sub.per_device_batch_size,
        gradient_accumulation_steps=accumulation(sub.batch_size, sub.per_device_batch_size),
        assistant_only_loss=marked,
        completion_only_loss=None if marked or tokenized else True,
        packing=False,
        train_sampling_strategy="group_by_length",  # batches of similar length: little padding
        remove_unused_columns=True,
    )
    steps = train_supervised("sft", model, args, rows, tokenizer, context, label=sub.name, peft=peft_config(stage.lora))
    return {"rows": len(rows), "steps": steps, "data": report.summary()}


def _merge_metrics(stage_dir: Path, count: int) -> None:
    merge_substage_metrics(stage_dir, count)
    if not distributed.is_main():
        return
    reports = {}
    for index in range(1, count + 1):
        marker = stage_dir / f"substage-{index}" / "done"
        if marker.exists():
            reports[f"substage-{index}"] = json.loads(marker.read_text())
    (stage_dir / "data_report.json").write_text(json.dumps(reports, indent=1))
