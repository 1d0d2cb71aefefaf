"""The execution-free SWE repair reward (SPEC section 6, "SWE RL"; seed equation 2).

``score(response, files=..., golden_patch=...)`` reads the SEARCH/REPLACE edits of the answer
(the text after ``</think>``, see :mod:`cascade_rl.rewards.swe_edits` for the parsing and application
rules), applies them to the original ``files`` and compares the resulting patch with the golden
patch:

==========================================  ========  ==============  ===========
case                                        reward    ``kind``        ``applied``
==========================================  ========  ==============  ===========
same change as the golden patch             1         ``identical``   True
the edits change nothing                    0         ``no_op``       True
unfinished thinking, no/malformed edits,    -1        ``unparseable`` False
SEARCH text not found, file missing
otherwise                                   s         ``similar``     True
==========================================  ========  ==============  ===========

``applied`` (the answer's edits parse and apply to the files) and ``identical`` are booleans in
the details, so training logs the share of rollouts whose edit applies beside the share of
exact fixes (``reward/swe/applied``, ``reward/swe/identical`` in ``metrics.jsonl``).

``s`` is ``similarity="lexical"`` (default here; SWE-RL's unidiff similarity) or
``"semantic"`` (the paper's default for SWE RL: P("YES") of an LLM judge given the appendix C.2
judge prompt, through any object with ``probability_yes(messages) -> float``).

**Normalisation.** When the golden patch applies to ``files`` (the usual case: ``files`` are
the originals it was made from), both sides are compared by the files they produce: the patch
is identical iff it changes the same files and every changed file has the same lines once
trailing whitespace and blank lines are ignored (so context size, hunk headers, ``index``
lines, diff algorithm and blank-line churn do not matter; indentation does). The golden patch
is then re-diffed with the same differ as the model's patch before the lexical similarity is
taken, as SWE-RL's ``get_normalized_patch`` does. When the golden patch does not apply, the
patches are compared by their changed-line blocks (:func:`patch_key`) and the lexical
similarity uses the golden text as given.

**Lexical similarity** (SWE-RL): both patches parsed with ``unidiff``; per file, the
``difflib.SequenceMatcher`` ratio between the two files' hunk texts (headers excluded); the
mean over the union of changed files, a file changed by only one side scoring 0.

**Shaping** (``shaping=True``): a similarity below 0.5 becomes 0 (seed section 7.2). It acts on
the ``similar`` case only; -1 for unparseable answers is kept.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from cascade_rl.chat import last_user_text, split_thinking
from cascade_rl.rewards.base import Score
from cascade_rl.rewards.swe_edits import (
    Ambiguity,
    EditApplyError,
    EditParseError,
    PatchApplyError,
    apply_patch,
    edits_to_patch,
    parse_patch,
    patched_path,
    unified_diff,
)
from cascade_rl.rewards.swe_prompts import format_files, judge_messages, repair_prompt

Similarity = Literal["lexical", "semantic"]
SHAPING_THRESHOLD = 0.5


class Judge(Protocol):
    """Anything that gives the probability of a "YES" verdict for a conversation (e.g.
    ``cascade_rl.llm.judge.YesNoJudge``)."""

    def probability_yes(self, messages: list[dict]) -> float: ...


def score(
    response: str,
    *,
    files: Mapping[str, str] | str,
    golden_patch: str,
    prompt: str | Sequence[dict] | None = None,
    problem_statement: str | None = None,
    similarity: Similarity = "lexical",
    judge: Judge | str | None = None,
    shaping: bool = False,
    ambiguous: Ambiguity = "first",
) -> Score:
    """Reward of one repair response (see the module docstring).

    ``files``: the original files ``{path: content}`` (or that dict JSON-encoded);
    ``golden_patch``: the reference unified diff. ``prompt`` (or ``problem_statement``) is only
    used by the semantic judge, which sees the repair prompt the policy saw; ``judge`` is an
    object with ``probability_yes`` or a generator spec (a local model directory, an
    ``http://host/v1#MODEL`` server, a dict with server settings; see
    :mod:`cascade_rl.llm.judge`) loaded once as a ``YesNoJudge``. Details:
    ``kind``, ``patch``, ``similarity``, ``applied``, ``identical`` and, for unparseable answers, the ``reason`` (not
    ``error``: that key marks a failure of the scorer itself in ``cascade score``). A judge
    that fails (server down, timeout, HTTP error after the retries) gives no verdict
    (:meth:`Score.no_verdict`): training leaves the rollout out and goes on.
    """
    files = _checked_files(files)
    if similarity not in ("lexical", "semantic"):
        raise ValueError(f"similarity must be 'lexical' or 'semantic', got {similarity!r}")
    if similarity == "semantic" and judge is None:
        raise ValueError("similarity='semantic' needs a judge (an object with probability_yes)")
    if not isinstance(golden_patch, str) or not golden_patch.strip():
        raise ValueError("golden_patch must be a non-empty unified diff")
    parse_patch(golden_patch)  # a bad reference is an error, not the policy's fault

    split = split_thinking(response)
    if not split.finished:
        return _unparseable("unfinished thinking: no answer after <think>")
    try:
        result = edits_to_patch(split.answer, files, ambiguous=ambiguous)
    except (EditParseError, EditApplyError) as error:
        return _unparseable(str(error))
    if not result.patch:
        return Score(0.0, _details("no_op", "", 0.0))

    golden_after = _golden_files(files, golden_patch)
    if _identical(files, result.edited_files, golden_after, result.patch, golden_patch):
        return Score(1.0, _details("identical", result.patch, 1.0))
    if similarity == "lexical":
        reference = _canonical_patch(files, golden_after) or golden_patch
        value = lexical_similarity(result.patch, reference)
    else:
        assert judge is not None
        try:
            if isinstance(judge, (str, Mapping)):
                from cascade_rl.llm.judge import load_judge  # one YesNoJudge per spec and process

                judge = load_judge(judge)
            value = _judged(judge, _policy_prompt(prompt, problem_statement, files), golden_patch, result.patch)
        except Exception as error:
            if not _judge_unavailable(error):
                raise
            details = _details("similar", result.patch, None)
            return Score.no_verdict(f"judge failed: {type(error).__name__}: {error}", **details)
    reward = 0.0 if shaping and value < SHAPING_THRESHOLD else value
    return Score(reward, _details("similar", result.patch, value))


def _details(kind: str, patch: str | None, similarity: float | None) -> dict:
    return {
        "kind": kind,
        "patch": patch,
        "similarity": similarity,
        "applied": kind != "unparseable",
        "identical": kind == "identical",
    }


def _unparseable(error: str) -> Score:
    return Score(-1.0, {**_details("unparseable", None, None), "reason": error})


def _checked_files(files: Mapping[str, str] | str) -> dict[str, str]:
    if isinstance(files, str):
        try:
            files = json.loads(files)
        except json.JSONDecodeError as error:
            raise ValueError(f"files is a string but not JSON: {error}") from None
    if not isinstance(files, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise ValueError("files must map repository paths to file contents (str -> str)")
    return dict(files)


# ---- normalisation ------------------------------------------------------------------------


def _golden_files(files: Mapping[str, str], golden_patch: str) -> dict[str, str | None] | None:
    """The files the golden patch produces from ``files``, or None when it does not apply."""
    try:
        return apply_patch(files, golden_patch)
    except PatchApplyError:
        return None


def _canonical_patch(files: Mapping[str, str], golden_after: Mapping[str, str | None] | None) -> str | None:
    """The golden patch re-diffed with our differ (None when it cannot be: it does not apply
    or deletes a file)."""
    if golden_after is None or any(text is None for text in golden_after.values()):
        return None
    return unified_diff(files, golden_after)  # type: ignore[arg-type]


def _normalised_text(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    return tuple(line.rstrip() for line in text.splitlines() if line.strip())


def _changed(files: Mapping[str, str], after: Mapping[str, str | None]) -> dict[str, tuple[str, ...] | None]:
    return {
        path: _normalised_text(text)
        for path, text in after.items()
        if _normalised_text(text) != _normalised_text(files.get(path))
    }


def _identical(
    files: Mapping[str, str],
    model_after: Mapping[str, str],
    golden_after: Mapping[str, str | None] | None,
    model_patch: str,
    golden_patch: str,
) -> bool:
    if golden_after is not None:
        return _changed(files, model_after) == _changed(files, golden_after)
    return patch_key(model_patch) == patch_key(golden_patch)


def patch_key(patch: str) -> tuple:
    """A hashable normal form of a unified diff: per file (in path order), its blocks of
    consecutive changed lines as (source line where the block starts, removed lines, added
    lines), trailing whitespace stripped and blank lines dropped. Context lines, hunk
    splitting and headers do not change it. Used for identity and for majority votes."""
    files = []
    for patched_file in parse_patch(patch):
        blocks = []
        for hunk in patched_file:
            blocks.extend(_change_blocks(hunk))
        if blocks:
            files.append((patched_path(patched_file), tuple(blocks)))
    return tuple(sorted(files))


def _change_blocks(hunk) -> list[tuple[int, tuple[str, ...], tuple[str, ...]]]:
    blocks = []
    # a hunk without source lines ("@@ -5,0 ...") inserts after its start line
    next_source = hunk.source_start + (0 if hunk.source_length else 1)
    start, removed, added = next_source, [], []
    for line in list(hunk) + [None]:
        if line is not None and (line.is_added or line.is_removed):
            target = added if line.is_added else removed
            if line.value.strip():
                target.append(line.value.rstrip())
            if line.is_removed:
                next_source = line.source_line_no + 1
            continue
        if removed or added:
            blocks.append((start, tuple(removed), tuple(added)))
        removed, added = [], []
        if line is not None and line.is_context:
            next_source = line.source_line_no + 1
        start = next_source
    return blocks


# ---- similarity ---------------------------------------------------------------------------


def file_changes(patch: str) -> dict[str, str]:
    """Per changed file, the text of its hunks (``@@`` lines and bodies, no file headers)."""
    changes = {}
    for patched_file in parse_patch(patch):
        text = "".join(str(hunk) for hunk in patched_file)
        if text:
            changes[patched_path(patched_file)] = text
    return changes


def lexical_similarity(model_patch: str, golden_patch: str) -> float:
    """SWE-RL's unidiff similarity: mean over the union of changed files of the
    ``SequenceMatcher`` ratio of the two hunk texts; a file changed on one side only scores 0."""
    model, golden = file_changes(model_patch), file_changes(golden_patch)
    paths = set(model) | set(golden)
    if not paths:
        return 0.0
    ratios = [
        difflib.SequenceMatcher(None, model[path], golden[path], autojunk=False).ratio()
        if path in model and path in golden
        else 0.0
        for path in paths
    ]
    return sum(ratios) / len(ratios)


def _policy_prompt(prompt: str | Sequence[dict] | None, problem_statement: str | None, files: Mapping[str, str]) -> str:
    """The repair prompt the policy answered (rebuilt from the files when not given)."""
    text = last_user_text(prompt)
    return text or repair_prompt(problem_statement or "", format_files(files))


def _judged(judge: Judge, policy_prompt: str, golden_patch: str, model_patch: str) -> float:
    value = float(judge.probability_yes(judge_messages(policy_prompt, golden_patch, model_patch)))
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"judge returned {value!r}, expected a probability in [0, 1]")
    return value


def _judge_unavailable(error: BaseException) -> bool:
    """A judge server that failed (down, timed out, retries spent): the rollout has no verdict;
    any other exception (a judge answering outside [0, 1]) is a bug and propagates."""
    from cascade_rl.llm.base import GenerationError

    return isinstance(error, (GenerationError, TimeoutError, ConnectionError))


def preflight(domain: str, options: Mapping[str, Any], *, timeout: float = 300.0) -> None:
    """Check the SWE judge before a stage trains: with ``similarity: semantic`` and a judge on a
    server, the server answers ``GET /models`` and one tiny judgement within ``timeout``
    seconds (:func:`cascade_rl.llm.judge.check_judge`). Raises
    :class:`~cascade_rl.rewards.registry.PreflightError` naming the option and the URL. Local
    judges and lexical similarity pass at once."""
    from cascade_rl.llm.judge import YesNoJudge, check_judge, load_judge
    from cascade_rl.rewards.registry import PreflightError

    spec = options.get("judge")
    if options.get("similarity") != "semantic" or spec is None:
        return
    where = f"reward_options.{domain}.judge"
    try:
        judge = spec if isinstance(spec, YesNoJudge) else load_judge(spec)
    except (ValueError, TypeError, OSError) as error:
        raise PreflightError(f"{where}: {error}") from None
    try:
        check_judge(judge, timeout=timeout)
    except RuntimeError as error:
        raise PreflightError(f"{where}: {error}") from None
