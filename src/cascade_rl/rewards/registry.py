"""One explicit registry of reward domains (DESIGN convention 4; SPEC sections 5-6).

Each RL row names its reward domain in a ``domain`` column (convention 3); this module maps
that name to the scorer and the reference fields the row must carry. Scorer modules are
imported lazily, so scoring math never imports torch.

A domain is scored one response at a time (``scorer``: ``fn(response, *, prompt=None,
**fields, **options) -> Score``), as a batch (``batch_scorer``: ``fn(requests, **options) ->
list[Score]`` where a request is ``{"response", "prompt", **fields}``), for rewards that need
the whole batch (RLHF's batch penalty), the prompt's group (IF+RM z-score) or a worker pool
(code), or one prompt's group at a time (``group_scorer``: ``fn(requests_of_one_group,
**options) -> list[Score]``), for rewards that compare the responses of a prompt with each
other (the pairwise GenRM of Cascade 2). :func:`score_batch` serves all three; a group is the
requests that share a ``group`` key (the GRPO group, or a ``cascade score`` line's
``responses``), else a prompt, and :func:`score_groups` scores given groups.

**A scorer that raises** has reached no verdict, and that is not the response's fault (a bug, a
malformed reference, a verifier that crashed): the rollout gets :meth:`Score.no_verdict` with
the exception as the reason and in ``details["error"]``, so training leaves it out instead of
teaching the policy that its answer was wrong, and one bad row never stops a stage. A batch
scorer that raises gives every row of its batch no verdict: nothing is scored a second time,
one row at a time.

**Options** (issue 39: strict reward options). Each domain declares, in its entry here, the
options its scorer takes and their types (:attr:`RewardDomain.options`: the one place a new
domain names them; ``tests/rewards/test_registry.py`` pins them against the scorer's signature).
:func:`check_options` reads a domain's options against that declaration -- an unknown name or a
value of the wrong type is an :class:`OptionError` naming ``DOMAIN.OPTION`` and what the domain
accepts -- and is called where options come in: when a recipe loads (``reward_options``, a
benchmark's ``options``) and when ``cascade score`` parses ``--option``. :func:`score_batch`
and :func:`score_groups` refuse an undeclared option before they score anything.

Users add domains without editing this file: a ``domain`` value of the form
``package.module:function`` names a per-response scorer directly; its options are the keyword
parameters of its signature (any, when it takes ``**kwargs``).
"""

from __future__ import annotations

import importlib
import inspect
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError

from cascade_rl.chat import last_user_text
from cascade_rl.rewards.base import Score
from cascade_rl.sandbox import IsolationUnavailable

Positive = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegative = Annotated[float, Field(ge=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]

#: the options of a domain scored by a reward model (``preference``, ``if_rm``): the model (a
#: checkpoint directory, an ``http://HOST:PORT[#MODEL]`` server, or ``@STAGE`` in a recipe), its
#: batching and length, and the settings of its server client (rewards/preference.py)
REWARD_MODEL_OPTIONS: dict[str, Any] = {
    "reward_model": str,
    "batch_size": PositiveInt,
    "max_length": PositiveInt | None,
    "max_concurrency": PositiveInt,
    "timeout": Positive,
    "max_retries": NonNegativeInt,
    "backoff_base": NonNegative,
    "backoff_max": NonNegative,
    "cooldown": NonNegative,
    "api_key": str | None,
}


@dataclass(frozen=True)
class RewardDomain:
    name: str
    fields: tuple[str, ...]
    description: str
    scorer: str | None = None
    batch_scorer: str | None = None
    #: options without which the domain cannot score (e.g. a reward-model path)
    required_options: tuple[str, ...] = ()
    #: rewards that depend on other rollouts (RLHF's batch minimum, IF+RM's group z-score):
    #: ``fn(scores, groups, **options) -> list[float]``, applied by the GRPO adapter to the
    #: whole global batch of the step (all processes' rollouts) after local scoring
    combine: str | None = None
    #: checks the servers the domain's options name before a stage trains (reward-model server,
    #: SWE judge): ``fn(domain_name, options, *, timeout) -> None``, raising PreflightError
    preflight: str | None = None
    #: scores the responses of one prompt together (a pairwise judge): ``fn(requests, **options)
    #: -> list[Score]``, ``requests`` being one group (module docstring)
    group_scorer: str | None = None
    #: a multi-turn environment (``package.module:factory``, :mod:`cascade_rl.rewards.environment`):
    #: rows of this domain are episodes that a rollout engine drives step by step
    environment: str | None = None
    #: the row fields that can carry what is judged; a row to score needs one of them (a
    #: multi-turn domain may take the model's calls instead of a response text)
    response_fields: tuple[str, ...] = ("response",)
    #: checks that a row's reference fields can be read (``fn(row) -> None``, raising
    #: ValueError naming the field), so a bad row is skipped with its reason before a stage
    #: trains or a file is scored, instead of scoring 0 on every rollout
    check: str | None = None
    #: every option the scorer takes (recipe ``reward_options.<domain>``, a benchmark's
    #: ``options``, ``cascade score --option``) and its type, as pydantic reads it (a type,
    #: ``Literal[...]``, ``Annotated[..., Field(gt=0)]``; ``Any`` for objects such as a judge)
    options: Mapping[str, Any] = field(default_factory=dict)

    def load_environment(self) -> Callable[..., Any] | None:
        return _load(self.environment) if self.environment else None

    def load_scorer(self) -> Callable[..., Score] | None:
        return _load(self.scorer) if self.scorer else None

    def load_combine(self) -> Callable[..., list[float]] | None:
        return _load(self.combine) if self.combine else None

    def load_batch_scorer(self) -> Callable[..., list[Score]] | None:
        return _load(self.batch_scorer) if self.batch_scorer else None

    def load_group_scorer(self) -> Callable[..., list[Score]] | None:
        return _load(self.group_scorer) if self.group_scorer else None


def _load(target: str) -> Callable:
    module_name, _, attr = target.partition(":")
    if not attr:
        raise ValueError(f"scorer {target!r} must look like 'package.module:function'")
    return getattr(importlib.import_module(module_name), attr)


def _build(domains: Iterable[RewardDomain]) -> dict[str, RewardDomain]:
    registry: dict[str, RewardDomain] = {}
    for domain in domains:
        if domain.name in registry:
            raise ValueError(f"reward domain {domain.name!r} registered twice")
        if not (domain.scorer or domain.batch_scorer or domain.group_scorer):
            raise ValueError(f"reward domain {domain.name!r} has no scorer")
        registry[domain.name] = domain
    return registry


REGISTRY: dict[str, RewardDomain] = _build(
    [
        RewardDomain(
            "math",
            ("answer",),
            "1 if the last \\boxed{} of the answer equals `answer` (math-verify), else 0; "
            "language mixing -> language_penalty (-1)",
            scorer="cascade_rl.rewards.math:score",
            options={"language_penalty": float, "timeout": Positive, "mixing_min_letters": PositiveInt},
        ),
        RewardDomain(
            "ifeval",
            ("instruction_id_list", "kwargs"),
            "1 if every IFEval / IFBench instruction holds (strict by default), else 0",
            scorer="cascade_rl.rewards.ifeval:score",
            options={"mode": Literal["strict", "loose"]},
        ),
        RewardDomain(
            "code",
            ("tests",),
            "1 if the last ```python block passes all tests in the sandbox, else 0; language mixing -> 0",
            scorer="cascade_rl.rewards.code:score",
            batch_scorer="cascade_rl.rewards.code:score_batch",
            options={
                "language_penalty": float,
                "time_limit": Positive,
                "memory_mb": PositiveInt,
                "output_bytes": PositiveInt,
                "stop_on_failure": bool,
                "cpu_limit": Literal["tree", "off", False] | Positive,
            },
        ),
        RewardDomain(
            "swe",
            ("files", "golden_patch"),
            "SEARCH/REPLACE repair: 1 identical to the golden patch, 0 no-op, -1 unparseable, "
            "else lexical (unidiff) or judged similarity",
            scorer="cascade_rl.rewards.swe:score",
            preflight="cascade_rl.rewards.swe:preflight",
            options={
                "similarity": Literal["lexical", "semantic"],
                "judge": Any,  # a generator spec (directory, local:PATH, http://HOST/v1#MODEL, dict) or a judge
                "shaping": bool,
                "ambiguous": Literal["first", "reject"],
            },
        ),
        RewardDomain(
            "tool_call",
            ("expected_calls",),
            "1 if the answer's <tool_call> blocks make exactly the expected calls (names and arguments; BFCL "
            "ground truth: one of several acceptable values per argument), else 0",
            scorer="cascade_rl.rewards.tool_call:score",
            options={"strict_types": bool},
        ),
        RewardDomain(
            "multiple_choice",
            ("answer",),
            "1 if the option letter the answer chooses (Answer: C, \\boxed{C}, (C), ...) is the gold one, else 0",
            scorer="cascade_rl.rewards.choice:score",
            options={"num_choices": PositiveInt},
        ),
        RewardDomain(
            "mcqa",
            ("options", "expected_answer"),
            "Nemotron-Cascade 2 / NeMo Gym MCQA: 1 if the letter in the answer's last \\boxed{} is expected_answer "
            "(grading_mode strict_single_letter_boxed; lenient_boxed, lenient_answer_colon[_md] on request)",
            scorer="cascade_rl.rewards.mcqa:score",
            check="cascade_rl.rewards.mcqa:check_row",
            options={
                "grading_mode": Literal[
                    "strict_single_letter_boxed", "lenient_boxed", "lenient_answer_colon", "lenient_answer_colon_md"
                ]
                | None,
                "single_answer": bool,
            },
        ),
        RewardDomain(
            "structured_output",
            ("schema_str",),
            "1 if the answer parses as schema_type (json, yaml, xml, ...) and validates against schema_str "
            "made strict (every property required, no additional ones), else 0 with the failure kind",
            scorer="cascade_rl.rewards.structured:score",
            check="cascade_rl.rewards.structured:check_row",
        ),
        RewardDomain(
            "workplace",
            ("ground_truth",),
            "multi-turn workplace assistant: 1 if the model's tool calls leave all five databases as the "
            "reference calls do (replayed on fresh copies), else 0",
            scorer="cascade_rl.rewards.workplace.scorer:score",
            check="cascade_rl.rewards.workplace.scorer:check_row",
            environment="cascade_rl.rewards.workplace.scorer:WorkplaceEpisode",
            response_fields=("response", "calls"),
        ),
        RewardDomain(
            "preference",
            (),
            "reward-model score of the answer; language mixing -> lowest reward in the batch - 10",
            batch_scorer="cascade_rl.rewards.preference:score_batch",
            combine="cascade_rl.rewards.preference:language_floor",
            required_options=("reward_model",),
            preflight="cascade_rl.rewards.preference:preflight",
            options={**REWARD_MODEL_OPTIONS, "language_penalty_offset": float, "check_language": bool},
        ),
        RewardDomain(
            "if_rm",
            ("instruction_id_list", "kwargs"),
            "thinking-model IF-RL: R_IF + sigmoid(z(R_RM)) if R_IF == 1 else 0, z over the prompt's rollouts",
            batch_scorer="cascade_rl.rewards.combine:score_batch",
            combine="cascade_rl.rewards.combine:combine_scores",
            required_options=("reward_model",),
            preflight="cascade_rl.rewards.preference:preflight",
            options={**REWARD_MODEL_OPTIONS, "mode": Literal["strict", "loose"]},
        ),
        RewardDomain(
            "genrm",
            (),
            "Cascade 2's pairwise generative RM: a judge compares the responses of a prompt's group in pairs "
            "(circular or all pairs); the mean of each response's scores (1-5, ties broken by the ranking 1-6)",
            group_scorer="cascade_rl.rewards.genrm:score_group",
            required_options=("judge",),
            preflight="cascade_rl.rewards.genrm:preflight",
            options={
                "judge": Any,  # a generator spec (directory, http://HOST/v1#MODEL, dict of settings) or a judge
                "strategy": Literal["circular", "all_pairs"],
                "both_orders": bool,
                "judges_per_pair": PositiveInt,
                "prompt": str,  # the judge's prompt template
                "principle": str | None,
                "default_score": float,
                "default_ranking": float,
                "parse_retries": NonNegativeInt,
                "parse_retry_sleep": NonNegative,
                "temperature": NonNegative,
                "top_p": Annotated[float, Field(gt=0, le=1)],
                "max_tokens": PositiveInt,
                "cooldown": NonNegative,
                "reasoning_bonus": float,
                "answer_bonus": float,
                "top_percentile": Annotated[float, Field(ge=0, le=1)],
                "reasoning_length_penalty": float,
                "answer_length_penalty": float,
            },
        ),
    ]
)


def get_domain(name: str) -> RewardDomain:
    """The registered domain ``name``, or a user scorer given as ``package.module:function``."""
    if name in REGISTRY:
        return REGISTRY[name]
    if ":" in name:
        _load(name)  # fail now, with the import error, rather than mid-stage
        return RewardDomain(name, (), f"user scorer {name}", scorer=name)
    raise KeyError(
        f"unknown reward domain {name!r}; known: {', '.join(sorted(REGISTRY))} "
        "(or give a scorer as 'package.module:function')"
    )


class PreflightError(RuntimeError):
    """A server a reward domain's options name does not answer (one line: option and URL)."""


def preflight(domain: RewardDomain | str, options: Mapping[str, Any] | None, *, timeout: float = 300.0) -> None:
    """Check, before a stage trains, that the servers ``options`` point ``domain`` at (a
    reward-model server, the SWE judge) answer and score within ``timeout`` seconds; raise
    :class:`PreflightError` naming the option and the URL if not. Domains without servers
    (or with local models) pass at once."""
    domain = get_domain(domain) if isinstance(domain, str) else domain
    if domain.preflight:
        _load(domain.preflight)(domain.name, dict(options or {}), timeout=timeout)


def missing_fields(domain: RewardDomain, row: Mapping[str, Any]) -> list[str]:
    """Reference fields ``row`` lacks for ``domain`` (empty when the row can be scored)."""
    return [name for name in domain.fields if row.get(name) is None]


def check_row(domain: RewardDomain, row: Mapping[str, Any]) -> None:
    """Raise ValueError naming the first field of ``row`` that ``domain`` cannot read (a
    missing reference field, or what the domain's own ``check`` finds)."""
    missing = missing_fields(domain, row)
    if missing:
        raise ValueError(f"domain {domain.name} needs field {missing[0]!r}")
    if domain.check:
        _load(domain.check)(row)


# ----------------------------------------------------------------------------- options
class OptionError(ValueError):
    """A reward option a domain does not take, or a value it cannot read: one line naming
    ``DOMAIN.OPTION`` (callers put where it was written in front: the recipe field, ``--option``)."""

    def __init__(self, domain: str, option: str, reason: str):
        super().__init__(f"{domain}.{option}: {reason}")
        self.domain, self.option, self.reason = domain, option, reason


def accepted_options(domain: RewardDomain) -> Mapping[str, Any] | None:
    """The options ``domain`` takes, name -> type (:attr:`RewardDomain.options`); for a user
    scorer (``package.module:function``) the keyword parameters of its signature, each of any
    type; None when it takes ``**kwargs`` (any option)."""
    if domain.name in REGISTRY:
        return domain.options
    scorer = domain.load_scorer() or domain.load_batch_scorer() or domain.load_group_scorer()
    parameters = list(inspect.signature(scorer).parameters.values())[1:]  # the response (or requests) first
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return {p.name: Any for p in parameters}


def check_options(domain: RewardDomain | str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``options`` read against what ``domain`` declares: each value parsed to its declared type
    (``"-1"`` -> -1.0 for a float); an unknown name or a value that does not parse is an
    :class:`OptionError` naming the option and what the domain accepts."""
    domain = get_domain(domain) if isinstance(domain, str) else domain
    accepted = accepted_options(domain)
    if accepted is None:
        return dict(options or {})
    parsed = {}
    for name, value in (options or {}).items():
        if name not in accepted:
            known = ", ".join(sorted(accepted)) or "none"
            raise OptionError(domain.name, str(name), f"unknown option; {domain.name} accepts: {known}")
        try:
            parsed[name] = _adapter(accepted[name]).validate_python(value)
        except ValidationError as error:
            reason = "; ".join(problem["msg"] for problem in error.errors())
            raise OptionError(domain.name, name, f"{reason} (got {value!r})") from None
    return parsed


def check_required_options(domain: RewardDomain | str, options: Mapping[str, Any] | None) -> None:
    """The options without which ``domain`` cannot score are all given (:class:`OptionError`)."""
    domain = get_domain(domain) if isinstance(domain, str) else domain
    for name in domain.required_options:
        if (options or {}).get(name) is None:
            raise OptionError(domain.name, name, f"missing: {domain.name} cannot score without this option")


@cache
def _adapter(kind: Any) -> TypeAdapter:
    return TypeAdapter(kind)


def _refuse_unknown(domain: RewardDomain, options: Mapping[str, Any]) -> None:
    accepted = accepted_options(domain)
    unknown = sorted(set(options) - set(accepted)) if accepted is not None else []
    if unknown:
        known = ", ".join(sorted(accepted or ())) or "none"
        raise OptionError(domain.name, unknown[0], f"unknown option; {domain.name} accepts: {known}")


# ----------------------------------------------------------------------------- scoring
def score_batch(
    domain: RewardDomain | str,
    requests: Sequence[Mapping[str, Any]],
    options: Mapping[str, Any] | None = None,
    *,
    workers: int = 1,
) -> list[Score]:
    """Score ``requests`` (each ``{"response", "prompt"?, **fields}``) with ``domain``.

    Uses the domain's group scorer on each group of the requests (:func:`group_key`), its batch
    scorer when it has one (given ``workers`` when it takes a ``workers`` parameter: code's
    sandbox pool), else its per-response scorer (on ``workers`` threads). An option the domain
    does not declare raises :class:`OptionError` before anything is scored. A scorer that raises
    gives no verdict with ``details["error"]`` (module docstring): a row's, that row; a batch
    scorer's, every row of the batch, which is never scored a second time one row at a time. Only
    :class:`~cascade_rl.sandbox.IsolationUnavailable` (untrusted code cannot be isolated here
    and nobody opted into rlimits only) is raised: it is the machine's, not a row's.
    """
    domain = get_domain(domain) if isinstance(domain, str) else domain
    options = dict(options or {})
    _refuse_unknown(domain, options)
    if domain.group_scorer is not None:
        members: dict[str, list[int]] = {}
        for index, request in enumerate(requests):
            members.setdefault(group_key(request), []).append(index)
        scored = score_groups(domain, [[requests[i] for i in m] for m in members.values()], options, workers=workers)
        out: list[Any] = [None] * len(requests)
        for indices, scores in zip(members.values(), scored):
            for i, score in zip(indices, scores):
                out[i] = score
        return out
    batch = domain.load_batch_scorer()
    if batch is not None:
        if "workers" in inspect.signature(batch).parameters:
            options.setdefault("workers", workers)
        try:
            return list(batch(list(requests), **options))
        except IsolationUnavailable:  # the machine's, not a row's: nothing is scored
            raise
        except Exception as error:  # noqa: BLE001 - no verdict for the batch, the error in the details
            reason = f"{domain.name} batch scorer failed: {type(error).__name__}: {error}"
            return [Score.no_verdict(reason, error=reason) for _ in requests]
    scorer = domain.load_scorer()
    assert scorer is not None

    def one(request: Mapping[str, Any]) -> Score:
        return score_one(scorer, request, options)

    if workers <= 1 or len(requests) <= 1:
        return [one(r) for r in requests]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, requests))


def group_key(request: Mapping[str, Any]) -> str:
    """The group a request belongs to: its ``group`` when given, else its prompt."""
    if request.get("group") is not None:
        return f"group:{request['group']}"
    prompt = request.get("messages") or request.get("prompt")
    return "prompt:" + json.dumps(prompt, sort_keys=True, ensure_ascii=False, default=str)


def score_groups(
    domain: RewardDomain | str,
    groups: Sequence[Sequence[Mapping[str, Any]]],
    options: Mapping[str, Any] | None = None,
    *,
    workers: int = 1,
) -> list[list[Score]]:
    """Scores of each group of requests (the responses of one prompt), in order: the domain's
    group scorer on each group (``workers`` groups at once), or :func:`score_batch` on all of
    them for a domain that scores responses on their own. A group scorer that raises, or
    answers with the wrong number of scores, gives its whole group no verdict."""
    domain = get_domain(domain) if isinstance(domain, str) else domain
    options = dict(options or {})
    _refuse_unknown(domain, options)
    group_scorer = domain.load_group_scorer()
    if group_scorer is None:
        flat = score_batch(domain, [request for group in groups for request in group], options, workers=workers)
        cursor, out = 0, []
        for group in groups:
            out.append(flat[cursor : cursor + len(group)])
            cursor += len(group)
        return out

    def one(group: Sequence[Mapping[str, Any]]) -> list[Score]:
        try:
            scores = list(group_scorer(list(group), **options))
        except Exception as error:  # noqa: BLE001 - reported in the details, no verdict
            return [_error_score(error) for _ in group]
        if len(scores) != len(group):
            problem = ValueError(f"{domain.name}: group scorer gave {len(scores)} scores for {len(group)} responses")
            return [_error_score(problem) for _ in group]
        return scores

    if workers <= 1 or len(groups) <= 1:
        return [one(group) for group in groups]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, groups))


def score_samples(
    rows: Sequence[Mapping[str, Any]],
    samples: Sequence[Sequence[str]],
    options: Mapping[str, Any],
    workers: int = 4,
) -> list[list[Score]]:
    """Scores per row and sample: ``samples[i]`` are responses to ``rows[i]`` (a normalised RL row:
    ``prompt`` messages, ``domain``, ``reference`` fields), each domain scored as one batch
    (:func:`score_batch`) with ``options[domain]``. Used by evaluation, difficulty filters and
    the prompt filter alike."""
    requests = _sample_requests(rows, samples)
    by_domain: dict[str, list[int]] = {}
    for index, (domain, _) in enumerate(requests):
        by_domain.setdefault(domain, []).append(index)
    flat: list[Any] = [None] * len(requests)
    for domain, members in by_domain.items():
        scores = score_batch(
            get_domain(domain), [requests[i][1] for i in members], options.get(domain), workers=workers
        )
        for i, score in zip(members, scores):
            flat[i] = score
    out, cursor = [], 0
    for responses in samples:
        out.append(flat[cursor : cursor + len(responses)])
        cursor += len(responses)
    return out


def _sample_requests(rows: Sequence[Mapping[str, Any]], samples: Sequence[Sequence[str]]) -> list[tuple[str, dict]]:
    out = []
    for index, (row, responses) in enumerate(zip(rows, samples)):
        for response in responses:
            out.append(
                (
                    row["domain"],
                    {
                        **row["reference"],
                        "response": response,
                        "prompt": last_user_text(row["prompt"]),
                        "messages": row["prompt"],
                        "group": str(index),
                    },
                )
            )
    return out


def score_one(scorer: Callable[..., Score], request: Mapping[str, Any], options: Mapping[str, Any]) -> Score:
    """Call a per-response scorer on one request; an exception gives no verdict."""
    arguments = _accepted(scorer, {**request, **options})
    response = arguments.pop("response", "") or ""
    start = time.perf_counter()
    try:
        result = scorer(response, **arguments)
    except IsolationUnavailable:  # the machine's, not a row's: nothing is scored
        raise
    except Exception as error:  # noqa: BLE001
        return _error_score(error)
    if not isinstance(result, Score):
        result = Score(float(result))
    if "seconds" not in result.details:
        result.details["seconds"] = round(time.perf_counter() - start, 6)
    return result


def _accepted(function: Callable, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The subset of ``arguments`` that ``function`` accepts (all of them if it takes
    ``**kwargs``), so rows may carry extra columns (``domain``, ids, metadata)."""
    parameters = inspect.signature(function).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return dict(arguments)
    return {k: v for k, v in arguments.items() if k in parameters or k == "response"}


def _error_score(error: BaseException) -> Score:
    """No verdict: the scorer raised (module docstring)."""
    message = f"{type(error).__name__}: {error}"
    return Score.no_verdict(f"scorer raised {message}", error=message)
