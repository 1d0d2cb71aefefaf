"""Local compute on a CPU: the sampling loop vs ``transformers`` ``generate``, and the dense LM
head vs TRL's fused one, on the embedded default's model (built from recipes/tiny.yaml's sizes
as the cascade builds it: Qwen3, hidden 256, 2 layers, vocabulary 2,048; random weights).

* **Sampling** (``llm/decode.py``; evaluation and GRPO rollouts without vLLM): the same
  left-padded prompts (40-300 tokens) in batches of 64, T 0.6, top-p 0.95, up to 192 new tokens.
  A random model rarely ends a response, so 40 of its tokens are stop tokens: responses then
  end after ~50 tokens on average, geometrically, as evaluation responses spread from a few
  tokens to the budget. Both engines get the same stop tokens; the tokens they generate are
  counted (the same distribution, different draws).
* **Training step** (the dense head of ``train/trl_backend.py``; SFT, GRPO, distillation): forward and backward of 8
  sequences with the first half of each unscored (the prompt), TRL's fused head vs the dense
  head, alternating, medians of ``--rounds``.

    .venv/bin/python benchmarks/bench_local.py [--prompts 256] [--rounds 15]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


class DemoVocabulary:
    """What :func:`~cascade_rl.world.model.build_tiny_model` reads of a tokenizer: the demo's
    2,048-token vocabulary and its special ids (no text is tokenised here)."""

    eos_token_id, pad_token_id = 1, 0

    def __len__(self) -> int:
        return 2048


def tiny_model():
    """The embedded default's model, built as `cascade run recipes/tiny.yaml` builds it."""
    from cascade_rl.recipe import load_recipe
    from cascade_rl.world.model import build_tiny_model

    sizes = load_recipe(ROOT / "recipes" / "tiny.yaml").model.tiny.model_dump()
    return build_tiny_model(DemoVocabulary(), seed=0, **sizes).eval()


def left_padded_batches(count: int, batch: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(1)
    lengths = torch.randint(40, 300, (count,), generator=generator).tolist()
    batches = []
    for start in range(0, count, batch):
        chunk = lengths[start : start + batch]
        width = max(chunk)
        ids = torch.zeros(len(chunk), width, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, length in enumerate(chunk):
            ids[row, width - length :] = torch.randint(2, 2048, (length,), generator=generator)
            mask[row, width - length :] = 1
        batches.append((ids, mask))
    return batches


def sampling(model, batches, stops: list[int], engine: str) -> tuple[float, int]:
    from cascade_rl.llm.decode import decode

    torch.manual_seed(0)
    started, tokens = time.perf_counter(), 0
    for ids, mask in batches:
        if engine == "decode":
            out = decode(model, ids, mask, max_new_tokens=192, temperature=0.6, top_p=0.95, stop_ids=stops)
            tokens += sum(map(len, out))
        else:
            with torch.inference_mode():
                new = model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    max_new_tokens=192,
                    do_sample=True,
                    temperature=0.6,
                    top_p=0.95,
                    top_k=0,
                    eos_token_id=stops,
                    pad_token_id=0,
                )[:, ids.size(1) :]
            ended = torch.isin(new, torch.tensor(stops))
            lengths = torch.where(ended.any(-1), ended.int().argmax(-1) + 1, torch.tensor(new.size(1)))
            tokens += int(lengths.sum())
    return time.perf_counter() - started, tokens


def training_steps(rounds: int) -> dict[str, list[float]]:
    from trl.trainer.utils import add_fused_lm_head

    from cascade_rl.train.trl_backend import install_lm_head

    outputs = ("log_probs", "entropy", "is_top1")  # what TRL's SFT trainer asks for
    heads = {}
    for name in ("fused", "dense"):
        model = tiny_model().train()
        add_fused_lm_head(model, outputs=outputs)
        install_lm_head(model, name, outputs=outputs)
        heads[name] = model
    ids = torch.randint(2, 2048, (8, 116), generator=torch.Generator().manual_seed(2))
    labels = ids.clone()
    labels[:, :58] = -100
    times: dict[str, list[float]] = {name: [] for name in heads}
    for _ in range(rounds):
        for name, model in heads.items():
            started = time.perf_counter()
            out = model(input_ids=ids, labels=labels, fused_lm_head=True)
            (out.loss + 0 * out.entropy.sum()).backward()
            model.zero_grad()
            times[name].append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = tiny_model()
    batches = left_padded_batches(args.prompts, 64)
    stops = list(range(1000, 1040))
    sampling(model, batches[:1], stops, "decode")  # warm-up
    results = {engine: sampling(model, batches, stops, engine) for engine in ("generate", "decode")}
    print(
        f"sampling {args.prompts} prompts, batches of 64, T 0.6, top-p 0.95, <= 192 new tokens ({args.threads} threads)"
    )
    for engine, (seconds, tokens) in results.items():
        print(f"  {engine:9s} {seconds:6.1f} s  {tokens:6d} tokens  {tokens / args.prompts:5.1f} per response")
    ratio = results["generate"][0] / results["decode"][0]
    print(f"  decode is x{ratio:.2f} the speed of generate (same prompts, same stop tokens)")
    times = training_steps(args.rounds)
    fused, dense = (statistics.median(times[name]) * 1000 for name in ("fused", "dense"))
    print(f"training step, 8 x 116 tokens, half scored, median of {args.rounds}:")
    print(f"  fused (TRL) {fused:6.1f} ms   dense {dense:6.1f} ms   dense is x{fused / dense:.2f} the speed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
