"""A tiny tokenizer + randomly initialised Qwen3 checkpoint for engine tests (no downloads).

Tests that only need *a* causal LM use this instead of the toy world so they stay fast."""

from __future__ import annotations

from pathlib import Path

CORPUS = [
    f"what is {a} plus {b}? <think>{a}+{b}={a + b}</think>The answer is \\boxed{{{a + b}}}."
    for a in range(12)
    for b in range(12)
] + ["hello world, how are you today? fine thanks."] * 4


def build_tokenizer(path: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from cascade_rl.chat import SPECIAL_TOKENS, install_chat_template

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    raw.train_from_iterator(CORPUS, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token=None)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tokenizer.add_tokens([t for t in SPECIAL_TOKENS if t not in ("<|im_start|>", "<|im_end|>")])
    install_chat_template(tokenizer)
    tokenizer.save_pretrained(path)
    return tokenizer


def build_checkpoint(path: Path, *, hidden: int = 32, layers: int = 2, heads: int = 4, seed: int = 0) -> Path:
    """``hidden / heads`` is the head size: vLLM's CPU kernels need 32 or more (``heads=2, hidden=64``)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    path = Path(path)
    tokenizer = build_tokenizer(path)
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        head_dim=hidden // heads,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    Qwen3ForCausalLM(config).save_pretrained(path)
    return path


def contains_answer(response: str, *, answer: str, **_):
    """A toy reward for engine tests: 1 if the answer text appears in the response."""
    from cascade_rl.rewards.base import Score

    return Score(float(str(answer) in response))


def first_char_parity(response: str, **_):
    """A reward that varies across random samples (so a random model gets a gradient)."""
    from cascade_rl.rewards.base import Score

    return Score(float(ord(response[0]) % 2) if response else 0.0)


def kill_once(response: str, **_):
    """Engine-test reward that SIGKILLs its own process once, when the file named by
    CASCADE_TEST_KILL_FLAG exists and the path in CASCADE_TEST_KILL_AFTER exists: a crash in
    the middle of a stage, as `kill -9` would cause."""
    import os
    import signal
    from pathlib import Path

    flag, after = os.environ.get("CASCADE_TEST_KILL_FLAG"), os.environ.get("CASCADE_TEST_KILL_AFTER")
    if flag and after and Path(flag).exists() and Path(after).exists():
        Path(flag).unlink()
        os.kill(os.getpid(), signal.SIGKILL)
    return first_char_parity(response)


def answer_parity(response: str, *, answer: str, **_):
    """A reward fixed by the prompt alone (its answer's parity), whatever was generated: runs with
    different sampling (1 or 2 processes) see the same results, so their schedules must agree."""
    from cascade_rl.rewards.base import Score

    return Score(float(int(answer) % 2 == 0))


def answer_band(response: str, *, answer: str, **_):
    """A reward fixed by the prompt's answer, whatever was generated: answer % 3 == 0 scores 1.0
    (every sample solves it: too easy), == 1 scores -1.0 (none scores above zero: hopeless),
    == 2 scores 0.3 (above zero, never solved: kept by the prompt filter)."""
    from cascade_rl.rewards.base import Score

    return Score({0: 1.0, 1: -1.0, 2: 0.3}[int(answer) % 3])


#: what the slow scorer saw: calls, and the most calls running at once (scorer threads)
SCORING = {"active": 0, "most": 0, "calls": 0}


def slow_parity(response: str, *, delay: float = 0.05, **_):
    """:func:`first_char_parity` after ``delay`` seconds (a verifier that takes time), counting how
    many calls run at once."""
    import threading
    import time

    from cascade_rl.rewards.base import Score

    lock = SCORING.setdefault("lock", threading.Lock())
    with lock:
        SCORING["active"] += 1
        SCORING["calls"] += 1
        SCORING["most"] = max(SCORING["most"], SCORING["active"])
    try:
        time.sleep(delay)
        return Score(float(ord(response[0]) % 2) if response else 0.0)
    finally:
        with lock:
            SCORING["active"] -= 1


def fails_on(response: str, *, marker: str = "FAIL", **_):
    """A verifier whose service fails on responses holding ``marker`` (a connection refused), else
    :func:`first_char_parity`."""
    if marker in response:
        raise ConnectionError("verifier at 127.0.0.1:9 refused the connection")
    return first_char_parity(response)


def tenths(response: str, **_):
    """A graded reward: the response's first digit in tenths (``"7"`` scores 0.7; no digit 0)."""
    from cascade_rl.rewards.base import Score

    digits = [c for c in response if c.isdigit()]
    return Score(int(digits[0]) / 10 if digits else 0.0)
