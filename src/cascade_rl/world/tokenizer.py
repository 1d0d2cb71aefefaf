"""The toy world's tokenizer: byte-level BPE trained on the toy corpus (issue 4; SPEC section 2).

* Byte-level BPE (``tokenizers``), so any text round-trips; digits are split one per token
  (``Digits(individual_digits=True)``), which a tiny model needs to do column arithmetic.
* The ChatML and think/tool tokens of :data:`cascade_rl.chat.SPECIAL_TOKENS` are single added
  tokens that BPE never splits. ``<|im_start|>``, ``<|im_end|>`` and the pad token
  ``<|endoftext|>`` are *special* (dropped by ``skip_special_tokens=True``); ``<think>``,
  ``</think>``, ``<tool_call>`` and the other tool markers are added tokens that are **not**
  special, as in Qwen3, so decoding keeps them either way (TRL decodes completions with
  ``skip_special_tokens=True``; a scorer must still see ``</think>``).
* EOS is ``<|im_end|>`` (generation stops at the end of the assistant turn), PAD is
  ``<|endoftext|>`` (distinct from EOS, so padding is never mistaken for a finished turn).
* The project's chat template is installed (:func:`cascade_rl.chat.install_chat_template`);
  the result is saved with ``save_pretrained`` and loads with ``AutoTokenizer.from_pretrained``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from cascade_rl.chat import IM_END, IM_START, SPECIAL_TOKENS, install_chat_template

PAD_TOKEN = "<|endoftext|>"
#: Tokens dropped by ``skip_special_tokens=True``; every other chat token stays in decoded text.
CONTROL_TOKENS = (PAD_TOKEN, IM_START, IM_END)
DEFAULT_VOCAB_SIZE = 2048


def train_bpe(texts: Iterable[str], vocab_size: int = DEFAULT_VOCAB_SIZE) -> Tokenizer:
    """A byte-level BPE ``tokenizers.Tokenizer`` trained on ``texts`` (digits split)."""
    if vocab_size < 300:
        raise ValueError(f"vocab_size must be at least 300 (256 bytes + chat tokens), got {vocab_size}")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(set(CONTROL_TOKENS + SPECIAL_TOKENS)),
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tokenizer.train_from_iterator(_without_chat_tokens(texts), trainer=trainer)
    return tokenizer


def _without_chat_tokens(texts: Iterable[str]) -> Iterable[str]:
    """The corpus with chat tokens removed (they become added tokens; BPE need not learn them).
    They are cut out without a space, so ``<|im_start|>assistant`` teaches ``assistant`` as it
    is tokenized at run time, not ``Ġassistant``."""
    for text in texts:
        for token in (*CONTROL_TOKENS, *SPECIAL_TOKENS):
            text = text.replace(token, "")
        yield text


def wrap(tokenizer: Tokenizer) -> PreTrainedTokenizerFast:
    """A Hugging Face tokenizer around a trained BPE, with the chat tokens and template."""
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, model_max_length=1 << 20, clean_up_tokenization_spaces=False
    )
    fast.add_special_tokens(
        {"additional_special_tokens": [AddedToken(t, special=True, normalized=False) for t in CONTROL_TOKENS]}
    )
    fast.add_tokens([AddedToken(t, special=False, normalized=False) for t in SPECIAL_TOKENS if t not in CONTROL_TOKENS])
    fast.pad_token = PAD_TOKEN
    fast.eos_token = IM_END
    fast.bos_token = None
    fast.padding_side = "left"  # generation batches pad on the left
    return install_chat_template(fast)


def build_tokenizer(
    texts: Iterable[str], out_dir: str | Path | None = None, *, vocab_size: int = DEFAULT_VOCAB_SIZE
) -> PreTrainedTokenizerFast:
    """Train the toy tokenizer on ``texts``; save it to ``out_dir`` when given."""
    tokenizer = wrap(train_bpe(texts, vocab_size))
    if out_dir is not None:
        tokenizer.save_pretrained(str(out_dir))
    return tokenizer
