"""Local generation with ``transformers`` on a checkpoint directory (DESIGN: ``llm/``; the
small-model path of the SWE pipeline, SPEC section 7, and of data building, SPEC section 6).

* The model and tokenizer are read from a local path only (``local_files_only``): nothing is
  downloaded.
* Prompts are rendered with the tokenizer's own chat template; a tokenizer without one gets the
  project's Cascade template (:mod:`cascade_rl.chat`), and ``use_cascade_template=True`` forces
  it. ``mode`` keys on user messages become ` /think` / ` /no_think` flags
  (:func:`~cascade_rl.llm.base.apply_modes`) when the template knows thinking modes; a plain
  instruction model's template (one that mentions neither ``no_think`` nor ``enable_thinking``)
  gets the messages without modes or flags, as the trainers render them for it.
* Sampling follows the request exactly: temperature and top-p, no hidden top-k;
  ``temperature=0`` is greedy decoding (one decode, repeated ``n`` times). The tokens come from
  :func:`~cascade_rl.llm.decode.decode`, which drops finished sequences from the batch.
* Decoding keeps every token of the response -- ``<think>``/``</think>`` are often *special*
  added tokens, which ``skip_special_tokens=True`` would silently drop, leaving scorers unable
  to find the answer. The completion is cut at the first stop token (EOS, ``<|im_end|>``, the
  model's generation-config EOS ids) and decoded with ``skip_special_tokens=False``, so
  scorers see ``<think>...</think>answer`` as the model wrote it, without end-of-turn or padding
  markers.
* ``engine="vllm"`` samples the same requests through this process's vLLM engine
  (:mod:`cascade_rl.llm.vllm_engine`): prompts go in as the same token ids, completions come back
  as token ids cut and decoded the same way, and every batch of sequences is one engine call
  (vLLM keeps ``batch_size`` sequences running, refilling as they finish). The ``transformers``
  model is then loaded only if a caller needs it (``next_token_logprobs``). Sampling is seeded from
  torch's global generator, so a seeded caller gets the same samples again.
* One lock guards the model, so a generator can be shared between threads; ``agenerate`` runs
  the work in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from cascade_rl.chat import IM_END, install_chat_template, template_reads_modes, without_modes
from cascade_rl.llm.base import Messages, Sampling, apply_modes, check_messages
from cascade_rl.llm.decode import decode
from cascade_rl.llm.pretrained import load_pretrained


def _resolve_device(device: str | None) -> str:
    import torch

    if device is not None:
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


ENGINES = ("transformers", "vllm")


def _resolve_dtype(dtype: Any, device: str) -> Any:
    """``None``: float32 on CPU, the checkpoint's own dtype elsewhere; names like "bfloat16"."""
    import torch

    if dtype is None:
        return torch.float32 if device == "cpu" else "auto"
    if dtype == "auto" or isinstance(dtype, torch.dtype):
        return dtype
    resolved = getattr(torch, str(dtype), None)
    if not isinstance(resolved, torch.dtype):
        raise ValueError(f"unknown dtype {dtype!r}; use e.g. 'float32', 'bfloat16' or 'auto'")
    return resolved


class LocalGenerator:
    """Samples completions from a local Hugging Face causal LM (see the module docstring).

    ``batch_size`` bounds the sequences (prompts x ``n``) sampled at once;
    ``default_mode`` ("think" / "no_think") flags user turns that carry no mode of their own;
    ``engine``: ``transformers`` (:func:`~cascade_rl.llm.decode.decode`) or ``vllm``.
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        device: str | None = None,
        dtype: Any = None,
        default_mode: str | None = None,
        batch_size: int = 8,
        use_cascade_template: bool = False,
        engine: str = "transformers",
    ) -> None:
        from transformers import AutoConfig, AutoTokenizer

        path = Path(model_path).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"model directory not found: {path}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        apply_modes([], default_mode)  # validates default_mode
        self.model_path, self.default_mode, self.batch_size, self.engine = path, default_mode, batch_size, engine
        self.device = _resolve_device(device)
        self.torch_dtype = _resolve_dtype(dtype, self.device)
        self.config = AutoConfig.from_pretrained(path, local_files_only=True)
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        if use_cascade_template or not self.tokenizer.chat_template:
            install_chat_template(self.tokenizer)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"  # decoder-only batches are padded on the left
        self._model: Any = None if engine == "vllm" else self._load_model()
        self.reads_modes = template_reads_modes(self.tokenizer.chat_template)
        self.stop_ids = self._stop_token_ids()
        self._lock = threading.Lock()
        self.reserved_tokens = 0  # the vLLM engine's sequence length, at least (:meth:`reserve`)
        self.on_finished: Callable[[], None] | None = None  # :meth:`reporting`

    def _load_model(self) -> Any:
        from transformers import AutoModelForCausalLM

        model = load_pretrained(AutoModelForCausalLM, self.model_path, local_files_only=True, dtype=self.torch_dtype)
        return model.to(self.device).eval()

    @property
    def model(self) -> Any:
        """The ``transformers`` model (loaded on first use with the vLLM engine)."""
        if self._model is None:
            self._model = self._load_model()
        return self._model

    @property
    def dtype_name(self) -> str:
        """The weights' dtype, e.g. ``float32`` (``auto``: the checkpoint's own)."""
        if isinstance(self.torch_dtype, str):
            return str(getattr(self.config, "dtype", None) or "auto").removeprefix("torch.")
        return str(self.torch_dtype).removeprefix("torch.")

    def _stop_token_ids(self) -> list[int]:
        """Token ids that end a completion: the tokenizer's EOS, ``<|im_end|>`` when the
        vocabulary has it, and the EOS ids of the model's generation config."""
        configured = _generation_eos(self.model_path, self.config)
        ids = set(configured if isinstance(configured, list) else [configured])
        ids.add(self.tokenizer.eos_token_id)
        im_end = self.tokenizer.convert_tokens_to_ids(IM_END)
        if isinstance(im_end, int) and im_end != self.tokenizer.unk_token_id:
            ids.add(im_end)
        ids.discard(None)
        if not ids:
            raise ValueError(f"{self.model_path}: the tokenizer defines no EOS token to stop at")
        return sorted(ids)

    def render_prompt(self, messages: Messages, assistant_prefix: str = "") -> str:
        """The exact prompt text the model reads: the chat template with the generation prompt,
        followed by ``assistant_prefix`` (text the assistant turn starts with)."""
        flagged = apply_modes(messages, self.default_mode) if self.reads_modes else without_modes(messages)
        rendered = self.tokenizer.apply_chat_template(flagged, tokenize=False, add_generation_prompt=True)
        return rendered + assistant_prefix

    def generate(self, messages: list[dict], sampling: Sampling = Sampling()) -> list[str]:
        """``sampling.n`` completions of one conversation."""
        return self.generate_batch([messages], sampling)[0]

    async def agenerate(self, messages: list[dict], sampling: Sampling = Sampling()) -> list[str]:
        return await asyncio.to_thread(self.generate, messages, sampling)

    def generate_batch(self, conversations: Sequence[Messages], sampling: Sampling = Sampling()) -> list[list[str]]:
        """``sampling.n`` completions for each conversation, in order, in batched forward passes."""
        for messages in conversations:
            check_messages(messages)
        prompts = [self.render_prompt(messages) for messages in conversations]
        prompts_per_call = len(prompts) if self.engine == "vllm" else max(1, self.batch_size // sampling.n)
        results: list[list[str]] = []
        with self._lock:
            for start in range(0, len(prompts), prompts_per_call):
                results += self._sample(prompts[start : start + prompts_per_call], sampling)
        return results

    def reserve(self, conversations: Sequence[Messages], max_tokens: int) -> None:
        """Size the vLLM engine for the longest of ``conversations`` plus ``max_tokens`` before
        sampling starts: a caller that knows all its prompts (an evaluation, the prompt filter)
        gets one engine, not a new one each time a batch's longest prompt is longer than the
        last's. Nothing to do for the transformers engine."""
        if self.engine == "vllm" and conversations:
            self.reserved_tokens = max(self.reserved_tokens, self.longest_prompt(conversations) + max_tokens)

    @contextlib.contextmanager
    def reporting(self, on_finished: Callable[[], None]) -> Iterator[bool]:
        """Inside, ``on_finished`` is called as each conversation's completions finish, so that a
        progress bar moves while the vLLM engine samples hundreds of prompts in one call. Yields
        whether this engine reports (the transformers engine does not: its caller counts each
        batch when it returns)."""
        reports = self.engine == "vllm"
        self.on_finished = on_finished if reports else None
        try:
            yield reports
        finally:
            self.on_finished = None

    def longest_prompt(self, conversations: Sequence[Messages]) -> int:
        """Tokens of the longest of ``conversations`` as the model reads it (:meth:`render_prompt`)."""
        return max(len(self._ids(self.render_prompt(messages))) for messages in conversations)

    def _ids(self, prompt: str) -> list[int]:
        return self.tokenizer(prompt, add_special_tokens=False)["input_ids"]

    async def agenerate_batch(
        self, conversations: Sequence[Messages], sampling: Sampling = Sampling()
    ) -> list[list[str]]:
        return await asyncio.to_thread(self.generate_batch, conversations, sampling)

    def _sample(self, prompts: list[str], sampling: Sampling) -> list[list[str]]:
        tokens = self._sample_ids([self._ids(p) for p in prompts], sampling)
        return [[self._decode(ids) for ids in group] for group in tokens]

    def prompt_ids(self, messages: Messages) -> list[int]:
        """The token ids of :meth:`render_prompt` (what :meth:`sample_ids` continues)."""
        check_messages(messages)
        return self._ids(self.render_prompt(messages))

    def sample_ids(self, prompt_ids: Sequence[Sequence[int]], max_tokens: int, sampling: Sampling) -> list[list[int]]:
        """One completion per token sequence, at most ``max_tokens`` new tokens, drawn as ``sampling``
        says (its ``n`` and ``max_tokens`` aside): the new token ids up to and including the first
        stop id (the turns of a multi-turn episode, :mod:`cascade_rl.llm.episodes`)."""
        drawn = replace(sampling, n=1, max_tokens=max_tokens)
        prompts = [list(ids) for ids in prompt_ids]
        per_call = len(prompts) if self.engine == "vllm" else self.batch_size
        out: list[list[int]] = []
        with self._lock:
            for start in range(0, len(prompts), per_call):
                out += [group[0] for group in self._sample_ids(prompts[start : start + per_call], drawn)]
        return out

    def _sample_ids(self, ids: list[list[int]], sampling: Sampling) -> list[list[list[int]]]:
        """``sampling.n`` completions (token ids) of each prompt's ids."""
        if self.engine == "vllm":
            return self._sample_vllm(ids, sampling)
        import torch

        n = sampling.n
        copies = 1 if sampling.temperature == 0 else n
        width = max(map(len, ids))
        pad = self.tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(row)) + row for row in ids], device=self.device)
        attention = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in ids], device=self.device)
        token_lists = decode(
            self.model,
            input_ids.repeat_interleave(copies, dim=0),
            attention.repeat_interleave(copies, dim=0),
            max_new_tokens=sampling.max_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k,
            stop_ids=self.stop_ids,
        )
        if copies == 1:  # greedy decoding gives the same tokens every time
            token_lists = [tokens for tokens in token_lists for _ in range(n)]
        return [token_lists[i * n : (i + 1) * n] for i in range(len(ids))]

    def _sample_vllm(self, ids: list[list[int]], sampling: Sampling) -> list[list[list[int]]]:
        import torch

        from cascade_rl.llm.vllm_engine import sampling_alone, shared_engine

        engine = shared_engine(
            self.model_path,
            dtype=self.dtype_name,
            max_num_seqs=self.batch_size,
            sequence_tokens=max(self.reserved_tokens, max(map(len, ids), default=0) + sampling.max_tokens),
            in_process=not sampling_alone(),
        )
        seed = int(torch.randint(0, 2**31 - 1, ()))  # from the caller's seeded generator
        report = self.on_finished
        outputs = engine.sample(
            ids,
            sampling,
            stop_ids=self.stop_ids,
            seed=seed,
            on_finished=(lambda _index, _completions: report()) if report is not None else None,
        )
        return [[list(c.token_ids) for c in completions] for completions in outputs]

    def _decode(self, token_ids: list[int]) -> str:
        """Text of a completion up to its first stop token, special tokens kept (module doc)."""
        stops = set(self.stop_ids)
        end = next((i for i, token in enumerate(token_ids) if token in stops), len(token_ids))
        return self.tokenizer.decode(token_ids[:end], skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def next_token_logprobs(self, messages: Messages, assistant_prefix: str = "") -> Any:
        """Log-probabilities (a 1-D tensor over the vocabulary) of the token that follows the
        prompt plus ``assistant_prefix`` -- what an LLM judge reads (see :mod:`.judge`)."""
        import torch

        check_messages(messages)
        inputs = self.tokenizer(
            self.render_prompt(messages, assistant_prefix), return_tensors="pt", add_special_tokens=False
        ).to(self.device)
        with self._lock, torch.inference_mode():
            logits = self.model(**inputs).logits[0, -1].float()
        return torch.log_softmax(logits, dim=-1).cpu()


def _generation_eos(path: Path, config: Any) -> Any:
    """The EOS id(s) of a checkpoint's generation config (``generation_config.json``), else its config's."""
    from transformers import GenerationConfig

    try:
        return GenerationConfig.from_pretrained(path, local_files_only=True).eos_token_id
    except OSError:  # no generation_config.json
        return getattr(config, "eos_token_id", None)
