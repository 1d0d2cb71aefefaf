"""RLHF with a generative, pairwise reward model (Nemotron-Cascade 2; SPEC section 11): a judge
model compares the responses of one prompt's group two at a time, and each response's reward is
the mean of its scores over its comparisons -- NVIDIA's published aggregation, the
``genrm_compare`` resources server of NeMo Gym, which this module follows.

**Pairs** (:func:`comparison_pairs`): ``circular`` (default) compares each response with the
next, ``(0,1), (1,2), ..., (N-1,0)``: N comparisons; ``all_pairs`` compares every pair once,
``(i, j)`` with ``i < j``: N(N-1)/2. ``judges_per_pair`` repeats every comparison (NeMo Gym's
``num_judges_per_comparison``). ``both_orders`` (an option of this project, off by default as in
NeMo Gym) also asks each pair in the other order, so that a judge's preference for the first or
the second position cancels out.

**The judge's reply** (:func:`parse_judgement`): a JSON object ``{"score_1": 1-5, "score_2":
1-5, "ranking": 1-6}`` (ranking 1: the first response is much better ... 6: the second is much
better), read from the reply's answer (its thinking left aside): first the objects of fenced
``json`` blocks, the first usable one wins; else the *last* usable top-level ``{...}`` of the
text. An object is usable when it has at least one of the three keys (``{"overall": {...}}``
is looked into); a missing key takes the default. A reply without one is asked again
(``parse_retries`` times, ``parse_retry_sleep`` seconds apart), then counts as ``score_1 =
score_2 = default_score`` (3.0), ``ranking = default_ranking`` (3.5): neutral, not masked.

**Aggregation** (:func:`aggregate`, NeMo Gym's ``simple_tiebreaker``): when a comparison's two
scores are equal, the ranking breaks the tie: ``score_1 += 3.5 - ranking``, ``score_2 -= 3.5 -
ranking`` (a ranking below 3.5 favours the first response). Each response's reward is the mean
of its (adjusted) scores over its comparisons; a response of a group of one gets
``default_score``.

**Length terms** (:func:`length_adjustments`; all off by default), on the lengths in characters
of each response's reasoning and answer: ``reasoning_bonus`` / ``answer_bonus`` go to the
response with the shortest non-empty reasoning / answer if its score is among the top
``top_percentile`` of the group; ``reasoning_length_penalty`` / ``answer_length_penalty``
(NeMo Gym's ``group_*_length_penalty_coeff``) add ``coefficient x (w - mean w)`` with ``w = 1 -
(length - shortest) / (longest - shortest)``: shorter than the group's average gains, longer
loses, the group's sum is unchanged.

**The judge** (option ``judge``): any OpenAI-compatible chat server (``http://HOST:PORT/v1#MODEL``:
vLLM, SGLang, ``transformers serve``; or a dict with its client settings) or a local model
directory, built once per process (:func:`load_genrm_judge`). Sampling follows NeMo Gym's
defaults (``temperature`` 0.6, ``top_p`` 0.95, ``max_tokens`` 16384). A pair's conversation
is the option ``prompt``:

* ``"roles"``: the format of NVIDIA's GenRM checkpoints (``Qwen3-Nemotron-235B-A22B-GenRM``):
  the prompt's messages, then ``{"role": "principle"}`` when there is a principle, then
  ``{"role": "response_1"}`` and ``{"role": "response_2"}``, each holding a response's answer
  (``"None"`` when empty). Only a chat template that knows these roles shows them to the judge;
  other templates drop them silently, hence not the default.
* any other string: a template for one user message, with ``{conversation}`` (the prompt's
  messages as ``[role]\ncontent``, without the policy's ` /think` / ` /no_think` flags),
  ``{response_1}``, ``{response_2}`` and ``{principle}`` replaced (other braces are left alone). The default,
  :data:`DEFAULT_TEMPLATE`, asks any instruction-following model for the JSON above.

A principle (option ``principle``, or a row's ``principle`` field) steers the comparison, as
NeMo Gym's ``use_principle``; none by default.

**Failures.** A judge call that fails -- a timeout, a connection error, an HTTP error after the
client's retries (:class:`~cascade_rl.llm.transport.HttpClient`) -- leaves its comparison out; a
response left with no comparison has no verdict (:meth:`Score.no_verdict`), so training leaves
it out instead of scoring it 0 (NeMo Gym would have counted the neutral defaults). After a server
failure the judge fails fast for ``cooldown`` seconds (:class:`~cascade_rl.llm.guard.ServiceGuard`),
so a dead judge costs one timeout, not one per pair.

**Details** of each response: ``base_score`` (the mean before length terms), ``length_bonus``,
``comparisons`` (the response's judged comparisons); and, the same for every response of the
group, ``judge_calls`` (requests sent, retries after unusable replies included),
``judge_seconds`` (wall time of the group's judging), ``judge_failures``, ``unparsed``
(comparisons that fell back to the defaults) and ``tiebreak_rate``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from cascade_rl.chat import split_thinking, without_modes
from cascade_rl.llm.base import GenerationError, Sampling
from cascade_rl.llm.factory import load_generator
from cascade_rl.llm.guard import ServiceGuard, wait_for_url
from cascade_rl.rewards.base import Score
from cascade_rl.rewards.preference import prompt_messages

Strategy = Literal["circular", "all_pairs"]
STRATEGIES = ("circular", "all_pairs")
#: rankings run 1-6; below the midpoint the first response is the better one
RANKING_MIDPOINT = 3.5
#: what the judge sees of an empty answer (NeMo Gym's placeholder)
EMPTY_ANSWER = "None"
#: client settings of a judge named by a server spec; a dict spec overrides them
JUDGE_SERVER_DEFAULTS = {"max_concurrency": 16, "timeout": 600.0, "max_retries": 3}
PLACEHOLDERS = re.compile(r"\{(conversation|response_1|response_2|principle)\}")
_FENCED_JSON = re.compile(r"```json\s*([\s\S]*?)\s*```", re.IGNORECASE)

DEFAULT_TEMPLATE = """Please act as an impartial judge and compare two AI assistant responses to the conversation below.

<conversation>
{conversation}
</conversation>

<response_1>
{response_1}
</response_1>

<response_2>
{response_2}
</response_2>
{principle}
Rate the helpfulness of each response from 1 (not helpful) to 5 (very helpful). Then rank the two \
on a scale of 1 to 6: 1 means Response 1 is much better than Response 2, 2 better, 3 slightly \
better; 4 means Response 2 is slightly better than Response 1, 5 better, 6 much better. End your \
reply with one JSON object and nothing after it:
{"score_1": <1-5>, "score_2": <1-5>, "ranking": <1-6>}"""


# ----------------------------------------------------------------------------- pairs and replies
def comparison_pairs(strategy: str, count: int, *, both_orders: bool = False, judges_per_pair: int = 1) -> list:
    """The ``(first, second)`` index pairs a group of ``count`` responses is judged on (module
    docstring), each repeated ``judges_per_pair`` times; none for fewer than two responses."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if not isinstance(judges_per_pair, int) or judges_per_pair < 1:
        raise ValueError(f"judges_per_pair must be a positive integer, got {judges_per_pair!r}")
    if count < 2:
        return []
    if strategy == "all_pairs":
        pairs = list(itertools.combinations(range(count), 2))
    else:
        pairs = [(i, (i + 1) % count) for i in range(count)]
    if both_orders:
        pairs += [(second, first) for first, second in pairs]
    return pairs * judges_per_pair


def parse_judgement(reply: str) -> tuple[float | None, float | None, float | None] | None:
    """``(score_1, score_2, ranking)`` from a judge's answer (module docstring), ``None`` for a
    key the object lacks (the caller's default), or ``None`` when no usable object is found."""
    for block in _FENCED_JSON.finditer(reply):
        for candidate in _top_level_objects(block.group(1)):
            parsed = _usable(candidate)
            if parsed is not None:
                return parsed
    last = None
    for candidate in _top_level_objects(reply):
        parsed = _usable(candidate)
        if parsed is not None:
            last = parsed
    return last


def _top_level_objects(text: str) -> list[str]:
    """The balanced ``{...}`` spans of ``text`` that are not inside another one (braces inside
    JSON strings do not count). A span that never closes is skipped, and the scan goes on from
    the character after its opening brace."""
    spans, start = [], 0
    while (start := text.find("{", start)) >= 0:
        end = _closing_brace(text, start)
        if end is None:
            start += 1
            continue
        spans.append(text[start : end + 1])
        start = end + 1
    return spans


def _closing_brace(text: str, start: int) -> int | None:
    depth, in_string, escaped = 0, False, False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    return None


def _usable(candidate: str) -> tuple[float | None, float | None, float | None] | None:
    try:
        value = json.loads(candidate)
    except json.JSONDecodeError:
        return None
    if isinstance(value, dict) and isinstance(value.get("overall"), dict):
        value = value["overall"]
    if not isinstance(value, dict) or not any(key in value for key in ("score_1", "score_2", "ranking")):
        return None
    numbers = []
    for key in ("score_1", "score_2", "ranking"):
        if key not in value:
            numbers.append(None)
            continue
        try:
            number = float(value[key])
        except (TypeError, ValueError):
            return None
        if not math.isfinite(number):
            return None
        numbers.append(number)
    return numbers[0], numbers[1], numbers[2]


# ----------------------------------------------------------------------------- aggregation
@dataclass(frozen=True)
class Comparison:
    """One judged pair: ``first`` was shown as response 1, ``second`` as response 2.
    ``failure`` says why the judge gave no reply (the comparison then counts for nothing)."""

    first: int
    second: int
    score_1: float = 0.0
    score_2: float = 0.0
    ranking: float = RANKING_MIDPOINT
    parsed: bool = True
    calls: int = 1
    failure: str | None = None


def aggregate(comparisons: Sequence[Comparison], count: int, default_score: float = 3.0) -> list[float | None]:
    """Each response's mean score over its judged comparisons, ties broken by the ranking
    (module docstring); ``None`` for a response without any, unless the group has a single
    response (``default_score``)."""
    if count == 1:
        return [default_score]
    totals, seen = [0.0] * count, [0] * count
    for comparison in comparisons:
        if comparison.failure is not None:
            continue
        first, second = comparison.score_1, comparison.score_2
        if first == second:
            adjustment = RANKING_MIDPOINT - comparison.ranking
            first, second = first + adjustment, second - adjustment
        totals[comparison.first] += first
        totals[comparison.second] += second
        seen[comparison.first] += 1
        seen[comparison.second] += 1
    return [total / n if n else None for total, n in zip(totals, seen)]


def length_adjustments(
    scores: Sequence[float],
    reasoning_lengths: Sequence[int],
    answer_lengths: Sequence[int],
    *,
    reasoning_bonus: float = 0.0,
    answer_bonus: float = 0.0,
    top_percentile: float = 0.2,
    reasoning_length_penalty: float = 0.0,
    answer_length_penalty: float = 0.0,
) -> list[float]:
    """What the length terms add to each score (module docstring)."""
    count = len(scores)
    adjustments = [0.0] * count
    if count < 2:
        return adjustments
    threshold = sorted(scores, reverse=True)[max(0, int(count * top_percentile) - 1)]
    for bonus, lengths in ((reasoning_bonus, reasoning_lengths), (answer_bonus, answer_lengths)):
        candidates = [(length, i) for i, length in enumerate(lengths) if length > 0]
        if bonus > 0 and candidates:
            shortest = min(candidates)[1]
            if scores[shortest] + adjustments[shortest] >= threshold:
                adjustments[shortest] += bonus
    for coefficient, lengths in (
        (reasoning_length_penalty, reasoning_lengths),
        (answer_length_penalty, answer_lengths),
    ):
        if coefficient > 0:
            for i, weight in enumerate(_centred_shortness(lengths)):
                adjustments[i] += weight * coefficient
    return adjustments


def _centred_shortness(lengths: Sequence[int]) -> list[float]:
    shortest, longest = min(lengths), max(lengths)
    if shortest == longest:
        return [0.0] * len(lengths)
    weights = [1.0 - (length - shortest) / (longest - shortest) for length in lengths]
    centre = sum(weights) / len(weights)
    return [weight - centre for weight in weights]


# ----------------------------------------------------------------------------- the judge
class GenrmJudge:
    """A generator (a served or local chat model) used as the pairwise judge, with a
    :class:`ServiceGuard` in front of a server (module docstring)."""

    def __init__(self, spec: str | Mapping[str, Any], *, cooldown: float = 60.0) -> None:
        self.generator = load_generator(spec, server=JUDGE_SERVER_DEFAULTS)
        base_url = getattr(self.generator, "base_url", None)
        limit = getattr(self.generator, "max_concurrency", 1)
        self.guard = ServiceGuard(base_url, limit=limit, cooldown=cooldown) if base_url else None

    def run(self, coroutine):
        """Run a coroutine of judge calls to the end (on the client's loop for a server)."""
        run_sync = getattr(self.generator, "run_sync", None)
        return run_sync(coroutine) if run_sync else asyncio.run(coroutine)

    async def reply(self, messages: list[dict], sampling: Sampling) -> str:
        """The judge's answer to one conversation (its thinking left aside)."""

        async def ask() -> str:
            (text,) = await self.generator.agenerate(messages, sampling.times(1))
            return text

        text = await (self.guard.run(ask) if self.guard else ask())
        return split_thinking(text).answer


def load_genrm_judge(spec: str | Mapping[str, Any], cooldown: float = 60.0) -> GenrmJudge:
    """One judge per spec and process: its client's concurrency limit and guard are shared."""
    key = spec if isinstance(spec, str) else json.dumps(dict(spec), sort_keys=True, default=str)
    with _JUDGES_LOCK:  # scorer threads: two first calls must not build two clients
        return _cached_judge(key, cooldown)


_JUDGES_LOCK = threading.Lock()


@lru_cache(maxsize=8)
def _cached_judge(key: str, cooldown: float) -> GenrmJudge:
    return GenrmJudge(json.loads(key) if key.startswith("{") else key, cooldown=cooldown)


def judge_messages(
    conversation: Sequence[Mapping[str, Any]], first: str, second: str, *, prompt: str, principle: str | None
) -> list[dict]:
    """The conversation one comparison sends to the judge (module docstring: ``prompt``)."""
    history = [{"role": m.get("role", "user"), "content": m.get("content") or ""} for m in conversation]
    if prompt == "roles":
        extra = [{"role": "principle", "content": principle}] if principle else []
        return history + extra + [{"role": "response_1", "content": first}, {"role": "response_2", "content": second}]
    values = {  # the request as the user wrote it: the policy's thinking switch is not its content
        "conversation": "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in without_modes(history)),
        "response_1": first,
        "response_2": second,
        "principle": f"\nJudge the responses by this principle: {principle}\n" if principle else "",
    }
    return [{"role": "user", "content": PLACEHOLDERS.sub(lambda match: values[match.group(1)], prompt)}]


# ----------------------------------------------------------------------------- the group scorer
@dataclass(frozen=True)
class _Settings:
    prompt: str
    principle: str | None
    sampling: Sampling
    default_score: float
    default_ranking: float
    parse_retries: int
    parse_retry_sleep: float


def score_group(
    requests: Sequence[Mapping[str, Any]],
    *,
    judge: str | Mapping[str, Any] | GenrmJudge,
    strategy: Strategy = "circular",
    both_orders: bool = False,
    judges_per_pair: int = 1,
    prompt: str = DEFAULT_TEMPLATE,
    principle: str | None = None,
    default_score: float = 3.0,
    default_ranking: float = 3.5,
    parse_retries: int = 3,
    parse_retry_sleep: float = 0.2,
    temperature: float = 0.6,
    top_p: float = 0.95,
    max_tokens: int = 16384,
    cooldown: float = 60.0,
    reasoning_bonus: float = 0.0,
    answer_bonus: float = 0.0,
    top_percentile: float = 0.2,
    reasoning_length_penalty: float = 0.0,
    answer_length_penalty: float = 0.0,
) -> list[Score]:
    """GenRM rewards of one prompt's group of responses (requests ``{"response", "prompt" |
    "messages", "principle"?}``), in order (module docstring)."""
    if not requests:
        return []
    pairs = comparison_pairs(strategy, len(requests), both_orders=both_orders, judges_per_pair=judges_per_pair)
    splits = [split_thinking(r.get("response") or "") for r in requests]
    answers = [split.answer if split.answer.strip() else EMPTY_ANSWER for split in splits]
    settings = _Settings(
        prompt,
        requests[0].get("principle") or principle,
        Sampling(temperature=temperature, top_p=top_p, max_tokens=max_tokens),
        default_score,
        default_ranking,
        parse_retries,
        parse_retry_sleep,
    )
    start = time.perf_counter()
    comparisons: list[Comparison] = []
    if pairs:
        judge = judge if isinstance(judge, GenrmJudge) else load_genrm_judge(judge, cooldown)
        conversation = prompt_messages(requests[0])
        comparisons = judge.run(_judge_all(judge, conversation, answers, pairs, settings))
    seconds = time.perf_counter() - start
    means = aggregate(comparisons, len(requests), default_score)
    adjustments = _length_terms(
        means,
        [len(split.reasoning) for split in splits],
        [len(split.answer) for split in splits],
        dict(
            reasoning_bonus=reasoning_bonus,
            answer_bonus=answer_bonus,
            top_percentile=top_percentile,
            reasoning_length_penalty=reasoning_length_penalty,
            answer_length_penalty=answer_length_penalty,
        ),
    )
    return _scores(means, adjustments, comparisons, seconds)


async def _judge_all(
    judge: GenrmJudge, conversation: list[dict], answers: list[str], pairs: list, settings: _Settings
) -> list[Comparison]:
    return list(
        await asyncio.gather(
            *(_judge_pair(judge, conversation, answers, first, second, settings) for first, second in pairs)
        )
    )


async def _judge_pair(
    judge: GenrmJudge, conversation: list[dict], answers: list[str], first: int, second: int, settings: _Settings
) -> Comparison:
    messages = judge_messages(
        conversation, answers[first], answers[second], prompt=settings.prompt, principle=settings.principle
    )
    attempts = settings.parse_retries + 1
    for attempt in range(attempts):
        try:
            reply = await judge.reply(messages, settings.sampling)
        except (GenerationError, asyncio.TimeoutError, TimeoutError, ConnectionError) as error:
            reason = f"judge failed: {type(error).__name__}: {error}"
            return Comparison(first, second, calls=attempt + 1, failure=reason)
        parsed = parse_judgement(reply)
        if parsed is not None:
            score_1, score_2, ranking = parsed
            return Comparison(
                first,
                second,
                settings.default_score if score_1 is None else score_1,
                settings.default_score if score_2 is None else score_2,
                settings.default_ranking if ranking is None else ranking,
                calls=attempt + 1,
            )
        if attempt + 1 < attempts:
            await asyncio.sleep(settings.parse_retry_sleep)
    default = settings.default_score
    return Comparison(first, second, default, default, settings.default_ranking, parsed=False, calls=attempts)


def _length_terms(means: Sequence[float | None], reasoning: list[int], answer: list[int], options: dict) -> list:
    """The length terms over the responses that have a score (the others get none)."""
    judged = [i for i, mean in enumerate(means) if mean is not None]
    adjustments: list[float] = [0.0] * len(means)
    values = length_adjustments(
        [means[i] for i in judged], [reasoning[i] for i in judged], [answer[i] for i in judged], **options
    )
    for i, value in zip(judged, values):
        adjustments[i] = value
    return adjustments


def _scores(
    means: Sequence[float | None], adjustments: Sequence[float], comparisons: Sequence[Comparison], seconds: float
) -> list[Score]:
    failures = [c.failure for c in comparisons if c.failure is not None]
    judged = [c for c in comparisons if c.failure is None]
    group = {
        "judge_calls": sum(c.calls for c in comparisons),
        "judge_seconds": round(seconds, 6),
        "judge_failures": len(failures),
        "unparsed": sum(not c.parsed for c in judged),
        "tiebreak_rate": sum(c.score_1 == c.score_2 for c in judged) / len(judged) if judged else 0.0,
    }
    scores = []
    for index, (mean, adjustment) in enumerate(zip(means, adjustments)):
        own = sum(index in (c.first, c.second) for c in judged)
        if mean is None:
            scores.append(Score.no_verdict(failures[0] if failures else "no comparison", comparisons=0, **group))
            continue
        details = {"base_score": mean, "length_bonus": adjustment, "comparisons": own, **group}
        scores.append(Score(mean + adjustment, details))
    return scores


def preflight(domain: str, options: Mapping[str, Any], *, timeout: float = 300.0) -> None:
    """Check, before a stage trains, that a served judge answers ``GET /models`` within
    ``timeout`` seconds; :class:`~cascade_rl.rewards.registry.PreflightError` names the option and
    the URL if not. A local judge passes at once."""
    from cascade_rl.llm.transport import is_server_spec, parse_server_spec
    from cascade_rl.rewards.registry import PreflightError

    spec = options.get("judge")
    url = spec.get("base_url") if isinstance(spec, Mapping) else spec
    if not isinstance(url, str) or not is_server_spec(url):
        return
    where = f"reward_options.{domain}.judge"
    try:
        base = parse_server_spec(url, what="judge").url
        wait_for_url(f"{base}/models", time.monotonic() + timeout)
    except ValueError as error:
        raise PreflightError(f"{where}: {error}") from None
    except TimeoutError as error:
        raise PreflightError(f"{where}: no judge server answers at {base} within {timeout:g} s ({error})") from None
