"""Multi-turn episodes over a single-turn sampler: the agent loop of Nemotron-Cascade 2's
multi-domain RL (SPEC section 11; docs/environments.md), for the trainer's rollouts (GRPO and
MOPD) and for evaluation alike.

An environment (:mod:`cascade_rl.rewards.environment`) owns tools, state and verdict and never
sees a token; a sampler turns prompts into one completion each. This module alternates the two,
the way NeMo Gym's agent alternates model and resources server, and keeps what only the loop
knows: which tokens are the model's.

* :func:`run_episodes` works on **token ids** (the trainer's engines, a local checkpoint): each
  round samples one assistant turn for every open episode from its whole sequence so far
  (prompt, earlier turns, tool results), steps the episode with the turn's text, and appends the
  tool results as the chat template renders them (:func:`cascade_rl.chat.tool_turn_text`), after
  the model's own end-of-turn token. What comes back per episode is the completion the trainer
  trains on -- every turn and every tool result, in order -- with a **tool mask** (1 for the
  model's tokens, 0 for the environment's: TRL multiplies it into the loss mask) and the
  sampler's log-probabilities (0 on the environment's tokens). The tokens the model read are
  exactly the tokens the trainer scores: nothing is re-tokenised.
* :func:`converse` works on **messages** (any :class:`~cascade_rl.llm.base.Generator`, a served
  model too): each round sends every open episode's conversation and steps it with the reply.

**Budgets.** ``Budget.tokens`` bounds an episode's whole completion, tool results included (they
take room in the sequence the trainer scores, as in TRL and NeMo RL); ``Budget.turn_tokens``
bounds each model turn; the step budget is the episode's own (``max_steps``). A turn cut at a
budget is passed to its episode as truncated, which ends it; tool results that do not fit are
cut at the budget and the episode ends there (``end = "token budget"``). Either way the
completion then ends without an end-of-turn token: it is *truncated*, and the stage's overlong
rule applies to it as to any truncated response (overlong filtering: unscored and out of the
loss; otherwise the verdict of what the episode did).

A row without an environment (``None`` in place of its episode) is a one-turn episode, so one
batch mixes single-turn and multi-turn domains. With ``lockstep`` every process takes the same
number of sampling rounds (an idle one samples one token and drops it), for engines whose
generation is a collective (FSDP, ZeRO-3 gather the weights in every call).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cascade_rl.chat import decode_response, tool_turn_text
from cascade_rl.llm.base import Generator, Sampling, generate_many

#: the sampler's contract: one completion (token ids, ending with a stop id when one came) per
#: prompt, at most ``max_tokens`` each, and the tokens' log-probabilities when it has them
TurnSampler = Callable[[list[list[int]], int], tuple[list[list[int]], list[list[float]] | None]]

TOKEN_BUDGET = "token budget"


class StepResult(Protocol):
    messages: list[dict[str, Any]]
    done: bool
    end: str | None


class Interlocutor(Protocol):
    """What the loop needs of an episode (:class:`cascade_rl.rewards.environment.Episode` offers it)."""

    messages: list[dict[str, Any]]
    end: str | None

    def step(self, response: str, *, truncated: bool = False) -> StepResult: ...

    def cut(self, end: str) -> None: ...


@dataclass(frozen=True)
class Budget:
    """An episode's token budgets: ``tokens`` for its whole completion (every turn and tool
    result), ``turn_tokens`` per model turn (None: what is left of ``tokens``)."""

    tokens: int
    turn_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.tokens < 1 or (self.turn_tokens is not None and self.turn_tokens < 1):
            raise ValueError(f"token budgets must be positive, got {self.tokens} and {self.turn_tokens}")

    def turn(self, used: int, multi_turn: bool) -> int:
        """Tokens the next turn may take after ``used`` (a one-turn row: the whole budget)."""
        left = self.tokens - used
        return min(left, self.turn_tokens) if multi_turn and self.turn_tokens else left


class ChatCodec:
    """Text and tokens of one tokenizer: a turn's text as the environment reads it (special
    tokens kept, trailing stop ids dropped) and the environment's reply as token ids (the chat
    template's tool turn and the next generation prompt)."""

    def __init__(self, tokenizer: Any, stop_ids: Sequence[int], template: str | None = None):
        self.tokenizer, self.stop_ids = tokenizer, set(int(i) for i in stop_ids)
        self.template = template if template is not None else getattr(tokenizer, "chat_template", None)

    def text(self, ids: Sequence[int]) -> str:
        return decode_response(self.tokenizer, ids, self.stop_ids)

    def ended(self, ids: Sequence[int]) -> bool:
        return bool(ids) and int(ids[-1]) in self.stop_ids

    def reply_ids(self, tool_messages: Sequence[dict]) -> list[int]:
        text = tool_turn_text(tool_messages, template=self.template)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass
class Transcript:
    """One episode's completion: the token ids after the prompt, which of them are the model's
    (``tool_mask``), the sampler's log-probabilities (None without them), the model turns taken
    and why the episode ended (None: still open)."""

    completion_ids: list[int] = field(default_factory=list)
    tool_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)
    turns: int = 0
    end: str | None = None

    @property
    def model_tokens(self) -> int:
        return sum(self.tool_mask)

    def add(self, ids: Sequence[int], logprobs: Sequence[float] | None, *, model: bool) -> None:
        self.completion_ids += [int(i) for i in ids]
        self.tool_mask += [int(model)] * len(ids)
        if logprobs is None or self.logprobs is None:
            self.logprobs = None
        else:
            self.logprobs += [float(v) for v in logprobs]


def run_episodes(
    prompt_ids: Sequence[Sequence[int]],
    episodes: Sequence[Interlocutor | None],
    sample: TurnSampler,
    *,
    budget: Budget,
    codec: ChatCodec,
    lockstep: Callable[[bool], bool] | None = None,
) -> list[Transcript]:
    """Every episode played to its end on token ids (module docstring); ``episodes[i]`` is the
    environment of ``prompt_ids[i]``, or None for a one-turn row. ``lockstep(open_here)`` says
    whether any process still has an open episode (every process calls it each round)."""
    if len(prompt_ids) != len(episodes):
        raise ValueError(f"{len(prompt_ids)} prompts but {len(episodes)} episodes")
    transcripts = [Transcript() for _ in episodes]
    while True:
        open_rows = [i for i, t in enumerate(transcripts) if t.end is None]
        if lockstep is not None and not lockstep(bool(open_rows)):
            break
        if not open_rows:
            if lockstep is None:
                break
            sample([list(prompt_ids[0])], 1)  # the others' round: this process's collectives, nothing kept
            continue
        _round(open_rows, prompt_ids, episodes, transcripts, sample, budget, codec)
    return transcripts


def _round(
    rows: list[int],
    prompt_ids: Sequence[Sequence[int]],
    episodes: Sequence[Interlocutor | None],
    transcripts: list[Transcript],
    sample: TurnSampler,
    budget: Budget,
    codec: ChatCodec,
) -> None:
    """One assistant turn for each open episode, then each episode's step."""
    limits = [budget.turn(len(transcripts[i].completion_ids), episodes[i] is not None) for i in rows]
    turns, logprobs = sample([list(prompt_ids[i]) + transcripts[i].completion_ids for i in rows], max(limits))
    for k, i in enumerate(rows):
        ids = list(turns[k])[: limits[k]]
        transcript, episode = transcripts[i], episodes[i]
        transcript.add(ids, None if logprobs is None else list(logprobs[k])[: len(ids)], model=True)
        transcript.turns += 1
        ended = codec.ended(ids)
        if episode is None:
            transcript.end = "answered" if ended else "truncated"
            continue
        step = episode.step(codec.text(ids), truncated=not ended)
        if step.done:
            transcript.end = step.end
            continue
        _reply(transcript, episode, codec.reply_ids(step.messages), budget)


def _reply(transcript: Transcript, episode: Interlocutor, reply: list[int], budget: Budget) -> None:
    """The environment's tokens after a turn, cut where the episode's budget ends (which ends it)."""
    room = budget.tokens - len(transcript.completion_ids)
    transcript.add(reply[:room], [0.0] * min(room, len(reply)), model=False)
    if len(reply) >= room:
        episode.cut(TOKEN_BUDGET)
        transcript.end = TOKEN_BUDGET


def converse(
    generator: Generator,
    episodes: Sequence[Interlocutor],
    sampling: Sampling,
) -> None:
    """Every episode played to its end on messages: each round, one reply of ``generator`` (at
    most ``sampling.max_tokens`` tokens) to every open episode's conversation. A served model's
    replies carry no token counts, so only the step budget and the per-turn budget apply; a turn
    the server cut shows as an unfinished answer (module docstring)."""
    single = sampling.times(1)
    while True:
        open_episodes = [episode for episode in episodes if episode.end is None]
        if not open_episodes:
            return
        replies = generate_many(generator, [list(episode.messages) for episode in open_episodes], single)
        for episode, reply in zip(open_episodes, replies):
            episode.step(reply[0])
