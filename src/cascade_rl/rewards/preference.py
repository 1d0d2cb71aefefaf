"""The RLHF reward: a scalar reward model's score of the answer (SPEC sections 4 and 6).

* The reward model is any ``AutoModelForSequenceClassification`` with one label (a linear head
  on the last hidden state), applied through the RM tokenizer's own chat template to the
  prompt plus the answer — exactly how ``cascade``'s reward-model stage (TRL's RewardTrainer)
  tokenised its training pairs. Thinking flags are removed from the prompt first: the RM judges
  the conversation, not the control flag.
* Thinking responses: the RM sees only the answer after ``</think>``; an unfinished thinking
  response is sent whole (the RM scores it low).
* Language mixing: an English prompt whose response contains other scripts gets
  ``(lowest reward in the batch) - 10``.
* **Local or served.** The option ``reward_model`` is a local checkpoint (loaded once per path
  and cached for the process, on the GPU when there is one) or a server URL
  ``http://HOST:PORT[#MODEL]`` speaking vLLM's Pooling API -- ``cascade serve reward-model
  PATH`` or ``vllm serve PATH --runner pooling``; see :mod:`cascade_rl.llm.pooling`. Server
  options: ``max_concurrency`` (16), ``timeout`` (120 s per request), ``max_retries`` (3),
  ``backoff_base`` (0.5 s), ``backoff_max`` (30 s), ``cooldown`` (60 s), ``api_key`` (the
  server's ``--api-key``). A conversation the server fails to score (a timeout, a connection
  error, an HTTP error after the retries, an answer without a score) has no verdict
  (:meth:`~cascade_rl.rewards.base.Score.no_verdict`: training leaves it out rather than
  scoring it 0) and no ``rm_score``, and the rest of the batch is scored; it takes no part in
  the batch minimum. :func:`preflight` checks a server before a stage trains.
* **Length.** The RM reads at most ``max_length`` tokens (option; default: the model's
  ``max_position_embeddings`` locally, the server's own limit remotely; the paper recipes set
  16384, the RM's training length). A longer conversation keeps its *last* ``max_length``
  tokens: the head of the prompt is dropped, the answer's end and the closing end-of-turn token
  -- where a sequence-classification RM reads its score -- are kept. Cutting the end instead
  would score a prefix of the answer without its ending. TRL's RewardTrainer drops overlong
  pairs in training, but every rollout needs a score; this is also what vLLM's
  ``truncate_prompt_tokens`` does, so local and served scores agree.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from cascade_rl.chat import split_thinking
from cascade_rl.llm.pooling import RewardResult, check_server, reward_model_client
from cascade_rl.llm.pretrained import LOADING, load_pretrained
from cascade_rl.llm.transport import is_server_spec
from cascade_rl.rewards.base import Score

#: reward options that configure a reward-model server client (module docstring)
SERVER_OPTIONS = ("max_concurrency", "timeout", "max_retries", "backoff_base", "backoff_max", "cooldown", "api_key")


class RewardModel:
    """A sequence-classification reward model, thread-safe; serves local scoring and
    ``cascade serve reward-model`` alike.

    ``device``: ``"cpu"``, ``"cuda"``, ``"cuda:1"``, or ``"auto"`` (spread over every visible
    GPU with accelerate, for a model too large for one); default the GPU when there is one."""

    def __init__(self, path: str | Path, *, device: str | None = None):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.path = str(path)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        dtype = torch.float32 if self.device == "cpu" else torch.bfloat16
        placement = {"device_map": "auto"} if self.device == "auto" else {}
        model = load_pretrained(
            AutoModelForSequenceClassification, path, num_labels=1, local_files_only=True, dtype=dtype, **placement
        )
        self.model = (model if self.device == "auto" else model.to(self.device)).eval()
        config = self.model.config
        if config.pad_token_id is None:
            config.pad_token_id = next(
                (i for i in (self.tokenizer.pad_token_id, self.tokenizer.eos_token_id) if i is not None), None
            )
        if config.pad_token_id is None:
            raise ValueError(f"reward model {path}: neither the model nor its tokenizer names a pad token")
        #: the longest input the model was built for (its default ``max_length``)
        self.max_length: int | None = getattr(config, "max_position_embeddings", None)
        #: raw scores pass through this at the server when a request asks for the activation
        self.regression = getattr(config, "problem_type", None) == "regression"
        self._lock, self._encode_lock = threading.Lock(), threading.Lock()
        self.forward_passes = 0  # so far (reported by the server's /health)

    def render(self, conversation: Sequence[Mapping[str, Any]]) -> str:
        """The conversation as the RM reads it: its chat template, no generation prompt."""
        return self.tokenizer.apply_chat_template([_without_mode(m) for m in conversation], tokenize=False)

    def encode(self, text: str, *, max_length: int | None = None, add_special_tokens: bool = False) -> list[int]:
        """Token ids of ``text``, keeping the last ``max_length`` (default :attr:`max_length`)."""
        with self._encode_lock:
            ids = list(self.tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])
        limit = max_length or self.max_length
        return ids[-limit:] if limit and len(ids) > limit else ids

    def score_ids(self, sequences: Sequence[Sequence[int]], *, batch_size: int = 8) -> list[float]:
        """Raw scalar score of each token sequence, in forward passes of at most ``batch_size``
        sequences of similar length (:func:`length_batches`)."""
        import torch

        if any(len(ids) == 0 for ids in sequences):
            raise ValueError("cannot score an empty token sequence")
        scores = [0.0] * len(sequences)
        pad = self.model.config.pad_token_id
        with self._lock, torch.inference_mode():
            for chunk in length_batches([len(ids) for ids in sequences], batch_size):
                width = max(len(sequences[i]) for i in chunk)
                ids = torch.full((len(chunk), width), pad, dtype=torch.long)
                mask = torch.zeros((len(chunk), width), dtype=torch.long)
                for row, i in enumerate(chunk):  # right padding: real tokens keep their positions
                    ids[row, : len(sequences[i])] = torch.tensor(list(sequences[i]), dtype=torch.long)
                    mask[row, : len(sequences[i])] = 1
                device = self.model.device
                logits = self.model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits[:, 0]
                for i, value in zip(chunk, logits.float().cpu().tolist()):
                    scores[i] = value
                self.forward_passes += 1
        return scores

    def score(
        self,
        conversations: Sequence[Sequence[Mapping[str, Any]]],
        *,
        batch_size: int = 8,
        max_length: int | None = None,
    ) -> list[float]:
        """Scalar reward of each conversation (the last message is the assistant answer)."""
        sequences = [self.encode(self.render(c), max_length=max_length) for c in conversations]
        return self.score_ids(sequences, batch_size=batch_size)


def length_batches(lengths: Sequence[int], batch_size: int, max_padding: float = 0.25) -> list[list[int]]:
    """Indices grouped for batched forward passes: by increasing length, at most ``batch_size``
    per batch, and a batch closes before its padding would exceed ``max_padding`` of its real
    tokens (a server receives inputs of any lengths; padding is wasted compute)."""
    batches: list[list[int]] = []
    batch: list[int] = []
    tokens = 0
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if batch and (
            len(batch) >= batch_size or lengths[i] * (len(batch) + 1) > (1 + max_padding) * (tokens + lengths[i])
        ):
            batches.append(batch)
            batch, tokens = [], 0
        batch.append(i)
        tokens += lengths[i]
    return batches + [batch] if batch else batches


def load_reward_model(path: str, device: str | None = None) -> RewardModel:
    """One reward model per path and device in this process, built once though scorer threads
    ask for it at the same time."""
    with LOADING:
        return _cached_reward_model(path, device)


@lru_cache(maxsize=4)
def _cached_reward_model(path: str, device: str | None) -> RewardModel:
    return RewardModel(path, device=device)


def _without_mode(message: Mapping[str, Any]) -> dict:
    return {k: v for k, v in message.items() if k != "mode" and v is not None}


def prompt_messages(request: Mapping[str, Any]) -> list[dict]:
    """The prompt of a request as chat messages (``messages`` if given, else ``prompt``)."""
    messages = request.get("messages")
    if messages:
        return [dict(m) for m in messages]
    prompt = request.get("prompt") or ""
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]


def rm_text(response: str) -> str:
    """What the RM scores: the answer of a finished response, the whole of an unfinished one."""
    reasoning, answer, finished = split_thinking(response)
    return answer if finished else response


def rm_conversation(request: Mapping[str, Any]) -> list[dict]:
    """The conversation the RM scores for one request: its prompt, then the answer."""
    conversation = prompt_messages(request) + [{"role": "assistant", "content": rm_text(request.get("response") or "")}]
    return [_without_mode(m) for m in conversation]


def rm_results(
    requests: Sequence[Mapping[str, Any]],
    reward_model: str,
    *,
    batch_size: int = 8,
    max_length: int | None = None,
    **options: Any,
) -> list[RewardResult]:
    """The reward model's score of each request's answer, from a local model or a server
    (module docstring); a result without a value carries the server's error."""
    check_max_length(max_length)
    conversations = [rm_conversation(r) for r in requests]
    if is_server_spec(reward_model):
        client = reward_model_client(str(reward_model).strip(), **server_options(options))
        return client.score(conversations, max_length=max_length)
    model = load_reward_model(str(reward_model))
    return [RewardResult(value) for value in model.score(conversations, batch_size=batch_size, max_length=max_length)]


def rm_scores(requests: Sequence[Mapping[str, Any]], reward_model: str, **options: Any) -> list[float]:
    """:func:`rm_results` as plain scores, for callers that cannot score without them
    (evaluation): a conversation the server failed to score raises ``RuntimeError``."""
    results = rm_results(requests, reward_model, **options)
    failed = [r.error for r in results if r.error]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(results)} conversation(s) not scored; first: {failed[0]}")
    return [float(r.value) for r in results]  # type: ignore[arg-type]


def server_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The server-client options among a domain's reward options."""
    return {k: options[k] for k in SERVER_OPTIONS if options.get(k) is not None}


def check_max_length(max_length: Any) -> None:
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1):
        raise ValueError(f"max_length must be a positive integer (tokens), got {max_length!r}")


def score_batch(
    requests: Sequence[Mapping[str, Any]],
    *,
    reward_model: str,
    language_penalty_offset: float = 10.0,
    check_language: bool = True,
    batch_size: int = 8,
    max_length: int | None = None,
    **options: Any,
) -> list[Score]:
    """RLHF rewards for a batch (see the module docstring)."""
    if not requests:
        return []
    results = rm_results(requests, reward_model, batch_size=batch_size, max_length=max_length, **options)
    mixed = [check_language and _is_mixed(r) for r in requests]
    local = [
        Score(
            result.value,
            {
                "rm_score": result.value,
                "language_mixing": mix,
                "finished": split_thinking(r.get("response") or "").finished,
            },
        )
        if result.error is None
        else Score.no_verdict(result.error, language_mixing=mix)  # the RM server failed: no verdict
        for r, result, mix in zip(requests, results, mixed)
    ]
    rewards = language_floor(local, language_penalty_offset=language_penalty_offset)
    return [Score(reward, score.details, score.masked) for reward, score in zip(rewards, local)]


def language_floor(
    scores: Sequence[Score], groups: Sequence[Any] | None = None, *, language_penalty_offset: float = 10.0, **_: Any
) -> list[float]:
    """The rewards of a batch: each RM score, except that a language-mixing response gets (the
    lowest RM score in the batch) - ``language_penalty_offset``. Applied to each call's batch by
    :func:`score_batch`, and again by the GRPO adapter to the step's whole batch over all
    processes (the paper's "batch"). A score without an RM score (no verdict: a failed request)
    keeps its placeholder 0."""
    values = [s.details["rm_score"] for s in scores if "rm_score" in s.details]
    if not values:
        return [s.reward for s in scores]
    floor = min(values) - language_penalty_offset
    return [
        (floor if s.details.get("language_mixing") else s.details["rm_score"]) if "rm_score" in s.details else s.reward
        for s in scores
    ]


def _is_mixed(request: Mapping[str, Any]) -> bool:
    from cascade_rl.rewards.language import is_mixed

    prompt = request.get("prompt")
    return bool(is_mixed(request.get("response") or "", prompt if isinstance(prompt, str) else None))


def preflight(domain: str, options: Mapping[str, Any], *, timeout: float = 300.0) -> None:
    """Check the reward model of ``domain`` (``preference`` or ``if_rm``) before a stage trains:
    a local checkpoint directory exists; a server answers ``/health`` and scores a tiny
    conversation (up to ``max_length``) within ``timeout`` seconds. Raises
    :class:`~cascade_rl.rewards.registry.PreflightError` naming the option and the URL."""
    from cascade_rl.rewards.registry import PreflightError

    where = f"reward_options.{domain}"
    try:
        check_max_length(options.get("max_length"))
    except ValueError as error:
        raise PreflightError(f"{where}.max_length: {error}") from None
    spec = options.get("reward_model")
    if spec is None or not isinstance(spec, (str, Path)):
        return  # required_options reports a missing one
    if is_server_spec(spec):
        try:
            check_server(
                str(spec), max_length=options.get("max_length"), timeout=timeout, api_key=options.get("api_key")
            )
        except (RuntimeError, ValueError) as error:
            raise PreflightError(f"{where}.reward_model: {error}") from None
    elif not Path(spec).is_dir():
        raise PreflightError(f"{where}.reward_model: {spec} is neither a checkpoint directory nor an http(s):// URL")
