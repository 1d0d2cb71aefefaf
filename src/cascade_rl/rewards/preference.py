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

Models are loaded once per path and cached for the process.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from cascade_rl.chat import split_thinking
from cascade_rl.rewards.base import Score


class RewardModel:
    """A sequence-classification reward model on CPU or GPU, thread-safe."""

    def __init__(self, path: str, *, device: str | None = None, max_length: int = 4096):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        self.model = (
            AutoModelForSequenceClassification.from_pretrained(path, num_labels=1, local_files_only=True, dtype=dtype)
            .to(self.device)
            .eval()
        )
        if self.model.config.pad_token_id is None:
            self.model.config.pad_token_id = self.tokenizer.pad_token_id
        self.max_length = max_length
        self._lock = threading.Lock()

    def score(self, conversations: Sequence[Sequence[Mapping[str, Any]]], *, batch_size: int = 8) -> list[float]:
        """Scalar reward of each conversation (the last message is the assistant answer)."""
        import torch

        texts = [
            self.tokenizer.apply_chat_template([_without_mode(m) for m in conversation], tokenize=False)
            for conversation in conversations
        ]
        scores: list[float] = []
        with self._lock, torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                batch = self.tokenizer(
                    texts[start : start + batch_size],
                    return_tensors="pt",
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    add_special_tokens=False,
                )
                logits = self.model(**batch.to(self.device)).logits[:, 0]
                scores.extend(float(x) for x in logits.float().cpu())
        return scores


@lru_cache(maxsize=4)
def load_reward_model(path: str, max_length: int = 4096) -> RewardModel:
    return RewardModel(path, max_length=max_length)


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


def rm_scores(
    requests: Sequence[Mapping[str, Any]], reward_model: str, *, batch_size: int = 8, max_length: int = 4096
) -> list[float]:
    model = load_reward_model(str(reward_model), max_length)
    conversations = [
        prompt_messages(r) + [{"role": "assistant", "content": rm_text(r.get("response") or "")}] for r in requests
    ]
    return model.score(conversations, batch_size=batch_size)


def score_batch(
    requests: Sequence[Mapping[str, Any]],
    *,
    reward_model: str,
    language_penalty_offset: float = 10.0,
    check_language: bool = True,
    batch_size: int = 8,
    max_length: int = 4096,
    **_: Any,
) -> list[Score]:
    """RLHF rewards for a batch (see the module docstring)."""
    if not requests:
        return []
    scores = rm_scores(requests, reward_model, batch_size=batch_size, max_length=max_length)
    mixed = [check_language and _is_mixed(r) for r in requests]
    floor = min(scores) - language_penalty_offset
    return [
        Score(
            floor if mix else value,
            {"rm_score": value, "language_mixing": mix, "finished": split_thinking(r.get("response") or "").finished},
        )
        for r, value, mix in zip(requests, scores, mixed)
    ]


def _is_mixed(request: Mapping[str, Any]) -> bool:
    from cascade_rl.rewards.language import is_mixed

    prompt = request.get("prompt")
    return bool(is_mixed(request.get("response") or "", prompt if isinstance(prompt, str) else None))
