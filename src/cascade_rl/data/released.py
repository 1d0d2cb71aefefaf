"""The paper's own released datasets, read as NVIDIA published them (SPEC sections 3-6 and 11;
docs/data-formats.md, "The paper's released datasets").

Each format is a converter ``row -> dict | Drop`` registered in :mod:`cascade_rl.data.formats`
(``cascade data convert -f FORMAT`` and a recipe data source's ``format:``); a row of the wrong
shape raises :class:`~cascade_rl.data.rows.RowError` naming the field, a row the paper's recipe
does not train on is a :class:`~cascade_rl.data.job.Drop` with its reason. Samples in the
published schemas are in ``tests/data/samples/nemotron_cascade*``.

Nemotron-Cascade (``nvidia/Nemotron-Cascade-*``):

* ``nemotron-cascade-sft`` (SFT-Stage-1, SFT-Stage-2, SFT-SWE): ``messages``, ``thinking``,
  ``category``, ``source``, ``generator`` -> SFT rows; every user turn gets its ``/think`` or
  ``/no_think`` mode (a flag in the text, else the row's ``thinking``, else whether the reply
  reasons), so the thinking and non-thinking responses of one prompt stay parallel samples;
* ``nemotron-cascade-rl-if``: ``prompt`` (messages), ``instruction_id_list``, ``kwargs`` -> ifeval rows;
* ``nemotron-cascade-rl-math`` (one JSON list): ``problem``, ``answer`` -> math rows; tasks
  without a checkable answer dropped by reason;
* ``nemotron-cascade-rl-swe``: ``prompt`` (the repair prompt, files inside), ``golden_patch``,
  ``relevant_file_contents`` -> swe rows;
* ``nemotron-cascade-rl-rlhf``: ``prompt`` (one user turn), ``category`` -> preference rows;
* ``nemotron-cascade-rm``: chosen / rejected pairs -> reward-model pairs.

Nemotron-Cascade 2: ``nemotron-cascade-2-rl`` (NeMo Gym rows, routed by
:func:`cascade_rl.data.convert.gym_domain`, the ``nemo-gym`` format's routing; rows with no
reference dropped by reason) and ``nemotron-cascade-2-sft`` (OpenAI-style messages, tools, a
loss mask).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from cascade_rl.chat import MODES, THINK_CLOSE, THINK_OPEN, split_thinking
from cascade_rl.data.convert import (
    MATH_SUFFIX,
    NoReference,
    UnknownInstruction,
    helpsteer,
    instruction_fields,
    json_field,
    messages_row,
    need,
    nemo_gym,
    row_id,
    with_suffix,
)
from cascade_rl.data.job import Drop
from cascade_rl.data.rows import RowError
from cascade_rl.data.shapes import as_messages, normalise_preference

_FLAG = re.compile(r"\s*/(think|no_think)\s*$")
#: spellings of a thinking flag in released rows
_THINK_WORDS = {"true", "on", "yes", "1", "think", "thinking", "reasoning", "reasoning_on", "enabled"}
_NO_THINK_WORDS = {"false", "off", "no", "0", "no_think", "nothink", "non_thinking", "reasoning_off", "disabled"}
#: the project's SFT ``source`` of a released ``category`` (first key found in it)
_SOURCES = (
    ("swe", "swe"),
    ("tool", "tool"),
    ("agent", "tool"),
    ("math", "math"),
    ("code", "code"),
    ("science", "science"),
)
#: per-message loss-mask keys of released SFT rows (false / 0: the turn is context, not trained)
_MASK_KEYS = ("loss_mask", "loss", "train", "trainable", "weight")


# ----------------------------------------------------------------------------- thinking modes
def thinking_flag(value: Any, what: str = "thinking") -> str | None:
    """A released row's thinking flag as a mode (``think`` / ``no_think``); None when absent."""
    if value is None:
        return None
    if isinstance(value, bool) or (isinstance(value, (int, float)) and value in (0, 1)):
        return "think" if value else "no_think"
    if isinstance(value, str):
        word = re.sub(r"[\s-]+", "_", value.strip().lower())
        if word in _THINK_WORDS:
            return "think"
        if word in _NO_THINK_WORDS:
            return "no_think"
    raise RowError(f"{what} is not a thinking flag: {value!r:.60}")


def _reasons(message: Mapping[str, Any]) -> bool:
    """Whether an assistant message holds reasoning (``reasoning_content`` or a non-empty
    ``<think>`` block)."""
    if isinstance(message.get("reasoning_content"), str) and message["reasoning_content"].strip():
        return True
    text = message.get("content") or ""
    return (
        isinstance(text, str) and (THINK_OPEN in text or THINK_CLOSE in text) and bool(split_thinking(text).reasoning)
    )


def _reply_mode(messages: Sequence[dict], user: int) -> str:
    for message in messages[user + 1 :]:
        if message.get("role") == "assistant":
            return "think" if _reasons(message) else "no_think"
    return "think"


def moded_turns(messages: Sequence[dict], row_mode: str | None) -> list[dict] | Drop:
    """``messages`` with every user turn's thinking mode (``mode``): a trailing ``/think`` /
    ``/no_think`` in its text (removed from the text), else ``row_mode``, else whether the reply
    that follows reasons. Each reply is checked against its turn's mode (:func:`_checked_reply`);
    a reply that contradicts it drops the row with the reason."""
    out = [dict(message) for message in messages]
    mode: str | None = row_mode
    last_reply = max((i for i, m in enumerate(out) if m.get("role") == "assistant"), default=-1)
    for index, message in enumerate(out):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            flag = _FLAG.search(message["content"])
            if flag:
                message["content"] = message["content"][: flag.start()]
            given = message.get("mode") if message.get("mode") in MODES else None
            mode = flag.group(1) if flag else given or row_mode or _reply_mode(out, index)
            message["mode"] = mode
        elif message.get("role") == "assistant" and mode is not None:
            problem = _checked_reply(message, mode, final=index == last_reply)
            if problem:
                return Drop(problem)
    return out


def _checked_reply(message: dict, mode: str, *, final: bool) -> str | None:
    """Fix or judge one reply against its turn's mode: a ``no_think`` reply loses an empty
    ``<think></think>`` block (the template writes none) and may not reason; a ``think`` reply
    must close its thinking, and the final one must think and answer after ``</think>`` (the
    text before it, draft answers included, is reasoning). Returns the reason to drop the row."""
    text = message.get("content") if isinstance(message.get("content"), str) else ""
    tagged = THINK_OPEN in text or THINK_CLOSE in text
    split = split_thinking(text) if tagged else None
    if mode == "no_think":
        if _reasons(message):
            return "non-thinking turn whose reply reasons"
        if split is not None:  # an empty block: the answer alone
            after = text.split(THINK_CLOSE, 1)[1] if THINK_CLOSE in text else text.replace(THINK_OPEN, "", 1)
            message["content"] = after.lstrip()
        message.pop("reasoning_content", None)
        return None
    if split is not None and not split.finished:
        return "unfinished thinking (no </think>)"
    if final and not _reasons(message):
        return "thinking turn whose final reply has no <think> block"
    if final and split is not None and not split.answer and not message.get("tool_calls"):
        return "thinking reply with no answer after </think>"
    return None


def _row_mode(row: Mapping[str, Any], *names: str) -> str | None:
    for name in names:
        if row.get(name) is not None:
            return thinking_flag(row[name], name)
    return None


def _chat(value: Any, what: str) -> list[dict]:
    value = json_field(value, what) if isinstance(value, str) and value.lstrip().startswith("[") else value
    if not isinstance(value, list) or not all(isinstance(m, Mapping) for m in value):
        raise RowError(f"{what} is not a list of messages")
    return [{**m, "role": "system"} if m.get("role") == "developer" else dict(m) for m in value]


def _selected(options: Any, what: str) -> set[str]:
    """A format option given as one name, ``a,b`` or a list, lower-cased."""
    if isinstance(options, str):
        options = options.split(",")
    if not isinstance(options, (list, tuple, set)):
        raise RowError(f"{what} must be a name or a list of names, got {options!r}")
    return {str(option).strip().lower() for option in options if str(option).strip()}


def _sft_row(row: Mapping[str, Any], messages: list[dict], modes: Any, extra: Mapping[str, Any]) -> dict | Drop:
    """The SFT row of ``messages`` (modes set, replies checked), kept when its final turn's mode
    is among ``modes`` (``think``, ``no_think`` or both)."""
    turns = moded_turns(messages, _row_mode(row, "thinking", "reasoning", "thinking_mode"))
    if isinstance(turns, Drop):
        return turns
    users = [m["mode"] for m in turns if m.get("role") == "user" and "mode" in m]
    wanted = _selected(modes, "modes")
    if users and users[-1] not in wanted:
        return Drop(f"{users[-1]} sample (modes: {', '.join(sorted(wanted))})")
    tools = json_field(row.get("tools"), "tools") or None
    out = {**messages_row({"messages": turns, "tools": tools, "source": extra["source"]}), **extra}
    identifier = row_id(row, "id", "uuid", "index")
    return {**out, **({"id": identifier} if identifier else {})}


# ----------------------------------------------------------------------------- Nemotron-Cascade SFT
def sft_source(category: Any) -> str:
    """The project's SFT ``source`` (general, math, code, science, tool, swe) of a released
    ``category`` (``general``, ``math``, ``SWE Repair``, ``tool_calling``, ...)."""
    text = str(category or "").lower()
    return next((source for key, source in _SOURCES if key in text), "general")


def nemotron_cascade_sft(
    row: Mapping[str, Any], suffix: str = "", modes: Any = ("think", "no_think"), categories: Any = None
) -> dict | Drop:
    """A Nemotron-Cascade SFT row (Stage-1, Stage-2, SFT-SWE) as an SFT row. ``modes``: keep
    only samples of these thinking modes (a dedicated thinking model: ``think``);
    ``categories``: keep only rows of these categories (the published name or the project's
    source, e.g. ``science``). A math row carrying its ``answer`` keeps it for ``cascade data
    verify`` (which reads the text after ``</think>``)."""
    category = row.get("category")
    if categories is not None:
        wanted = _selected(categories, "categories")
        if str(category or "").lower() not in wanted and sft_source(category) not in wanted:
            return Drop(f"category {category!r} not selected")
    extra: dict[str, Any] = {"source": sft_source(category)}
    for name in ("category", "generator"):
        if isinstance(row.get(name), str):
            extra[name] = row[name]
    if isinstance(row.get("source"), str):
        extra["origin"] = row["source"]
    answer = row.get("answer", row.get("expected_answer"))
    if extra["source"] == "math" and isinstance(answer, (str, int, float)) and str(answer).strip():
        extra.update(domain="math", answer=str(answer).strip())
    return _sft_row(row, _chat(need(row, "messages"), "messages"), modes, extra)


# ----------------------------------------------------------------------------- Nemotron-Cascade RL
def _prompt_messages(value: Any, what: str = "prompt") -> list[dict]:
    value = json_field(value, what) if isinstance(value, str) and value.lstrip().startswith("[{") else value
    try:
        messages = as_messages(value, what)
    except ValueError as error:
        raise RowError(str(error)) from None
    while messages and messages[-1]["role"] == "assistant":
        messages.pop()
    if not messages or messages[-1]["role"] != "user":
        raise RowError(f"{what} does not end with a user turn")
    return messages


def nemotron_cascade_rl_if(row: Mapping[str, Any], suffix: str = "", taxonomy: str = "all") -> dict | Drop:
    """An RL-Instruction-Following row as an ifeval row (``kwargs`` decoded whatever their
    encoding: :func:`cascade_rl.data.convert.instruction_fields`; an instruction the ifeval reward
    has no checker for drops the row, by id). ``taxonomy``: ``ifeval`` keeps
    rows whose instructions are all IFEval's (the paper's first IF-RL sub-stage), ``iftrain``
    the others (IFBench's training taxonomy, the second), ``all`` both."""
    if taxonomy not in ("all", "ifeval", "iftrain"):
        raise RowError(f"taxonomy must be all, ifeval or iftrain, got {taxonomy!r}")
    try:
        fields = instruction_fields(need(row, "instruction_id_list"), row.get("kwargs"))
    except UnknownInstruction as error:
        return Drop(str(error))
    from cascade_rl.rewards.ifeval import IFEVAL_IDS

    ifeval_only = all(i in IFEVAL_IDS for i in fields["instruction_id_list"])
    if taxonomy == "ifeval" and not ifeval_only:
        return Drop("instructions outside the IFEval taxonomy (taxonomy: ifeval)")
    if taxonomy == "iftrain" and ifeval_only:
        return Drop("IFEval-taxonomy instructions only (taxonomy: iftrain)")
    messages = _prompt_messages(need(row, "prompt"))
    if suffix:
        messages[-1]["content"] = with_suffix(messages[-1]["content"], suffix)
    identifier = row_id(row, "id", "index", "key")
    return {"prompt": messages, "domain": "ifeval", **fields, **({"id": identifier} if identifier else {})}


def uncheckable_task(task_type: Any) -> str | None:
    """Why a math task type has no answer Math RL can check (SPEC 6 drops multiple-choice, yes/no,
    proof and multi-part problems), or None."""
    text = re.sub(r"[^a-z]+", " ", str(task_type or "").lower())
    words = set(text.split())
    if {"proof", "prove", "proofs"} & words:
        return "a proof"
    if "choice" in words or "mcq" in words or "mc" in words:
        return "multiple choice (guessable)"
    if {"yes", "no"} <= words or {"true", "false"} <= words or "yesno" in words:
        return "yes/no (guessable)"
    if "multi part" in text or "multipart" in words:
        return "multi-part"
    return None


def nemotron_cascade_rl_math(row: Mapping[str, Any], suffix: str = MATH_SUFFIX) -> dict | Drop:
    """An RL-Math problem as a math row; the prompt asks for ``\\boxed{}`` unless the problem
    does. A ``task_type`` without a checkable answer, or no answer, drops the row by reason."""
    problem = need(row, "problem", "question")
    if not isinstance(problem, str):
        raise RowError("problem is not a string")
    reason = uncheckable_task(row.get("task_type"))
    if reason:
        return Drop(f"task_type {row.get('task_type')!r}: {reason}, no answer Math RL checks")
    answer = row.get("answer", row.get("expected_answer"))
    if answer is None or not str(answer).strip():
        return Drop("no answer to check")
    prompt = problem if "\\boxed" in problem else with_suffix(problem, suffix)
    out: dict[str, Any] = {"prompt": prompt, "domain": "math", "answer": str(answer).strip()}
    for name in ("source", "task_type"):
        if isinstance(row.get(name), str):
            out[name] = row[name]
    identifier = row_id(row, "id", "index", "uuid")
    return {**out, **({"id": identifier} if identifier else {})}


def _relevant_files(value: Any) -> dict[str, str]:
    """``relevant_file_contents`` (a list of ``{file_path, content}``, a path -> content object,
    or JSON text of either) as ``{path: content}``."""
    value = json_field(value, "relevant_file_contents")
    if isinstance(value, Mapping):
        value = [{"file_path": path, "content": content} for path, content in value.items()]
    if not isinstance(value, list):
        raise RowError("relevant_file_contents is not a list of {file_path, content}")
    files: dict[str, str] = {}
    for entry in value:
        path = entry.get("file_path", entry.get("path")) if isinstance(entry, Mapping) else None
        content = entry.get("content") if isinstance(entry, Mapping) else None
        if not isinstance(path, str) or not isinstance(content, str):
            raise RowError("relevant_file_contents has an entry without a file_path and its content")
        files[path] = content
    return files


def _unseen_file(golden_patch: str, files: Mapping[str, str]) -> str | None:
    """The first file the golden patch changes or deletes that ``files`` lacks (a file it creates
    needs none: an empty SEARCH creates it); raises RowError when the patch does not parse."""
    from cascade_rl.rewards.swe_edits import EditParseError, parse_patch, patched_path

    try:
        patched = parse_patch(golden_patch)
    except (EditParseError, ValueError) as error:
        raise RowError(f"golden_patch is not a unified diff ({error})") from None
    for patched_file in patched:
        if not patched_file.is_added_file and patched_path(patched_file) not in files:
            return patched_path(patched_file)
    return None


def nemotron_cascade_rl_swe(row: Mapping[str, Any], suffix: str = "") -> dict | Drop:
    """An RL-SWE row as a swe row: the released repair prompt as it is (the files are inside
    it), the files as ``{path: content}`` and the golden patch, as the SWE reward reads them. A
    golden patch that changes a file the prompt does not show cannot be reached: dropped."""
    prompt = need(row, "prompt")
    golden = need(row, "golden_patch")
    if not isinstance(golden, str):
        raise RowError("golden_patch is not a string")
    files = _relevant_files(need(row, "relevant_file_contents"))
    if _unseen_file(golden, files):
        return Drop("golden patch changes a file the prompt does not show")
    messages = _prompt_messages(prompt)
    if suffix:
        messages[-1]["content"] = with_suffix(messages[-1]["content"], suffix)
    out: dict[str, Any] = {"prompt": messages, "domain": "swe", "files": files, "golden_patch": golden}
    for name in ("original_prompt", "source", "instance_id"):
        if isinstance(row.get(name), str) and row[name]:
            out[name] = row[name]
    identifier = row_id(row, "instance_id", "id", "index")
    return {**out, **({"id": identifier} if identifier else {})}


def nemotron_cascade_rl_rlhf(row: Mapping[str, Any], suffix: str = "") -> dict:
    """An RL-RLHF prompt as a preference row: its user turn (as a list of one message or text)."""
    messages = _prompt_messages(need(row, "prompt"))
    if suffix:
        messages[-1]["content"] = with_suffix(messages[-1]["content"], suffix)
    out: dict[str, Any] = {"prompt": messages, "domain": "preference"}
    for name in ("category", "data_source", "source"):
        if isinstance(row.get(name), str):
            out[name] = row[name]
    identifier = row_id(row, "id", "index", "uuid")
    return {**out, **({"id": identifier} if identifier else {})}


def _turns(value: Any, what: str) -> list[dict]:
    """A reply given as text, one message, or a list of messages (a whole conversation)."""
    value = json_field(value, what) if isinstance(value, str) and value.lstrip().startswith("[{") else value
    if isinstance(value, Mapping):
        value = [value]
    if isinstance(value, str):
        return [{"role": "assistant", "content": value}]
    return _chat(value, what)


def _split_prompt(prompt: Any, chosen: list[dict], rejected: list[dict]) -> tuple[Any, list[dict], list[dict]]:
    """(prompt, chosen reply, rejected reply): conversations that repeat the prompt lose it; with
    no prompt field, the turns both conversations share are the prompt (TRL's implicit prompt)."""
    if prompt is None:
        shared = 0
        while shared < min(len(chosen), len(rejected)) - 1 and chosen[shared] == rejected[shared]:
            shared += 1
        return chosen[:shared], chosen[shared:], rejected[shared:]
    turns = _turns(prompt, "prompt") if not isinstance(prompt, str) else [{"role": "user", "content": prompt}]
    size = len(turns)
    if chosen[:size] == turns and rejected[:size] == turns:
        chosen, rejected = chosen[size:], rejected[size:]
    return turns, chosen, rejected


def nemotron_cascade_rm(row: Mapping[str, Any], suffix: str = "") -> dict | Drop:
    """An RM-Training pair as (prompt, chosen, rejected); HelpSteer-style rows (``response1``,
    ``response2``, ``overall_preference``) read as ``helpsteer`` does, ties dropped; a pair whose
    two replies are the same is dropped."""
    if "overall_preference" in row or "preference_strength" in row:
        return helpsteer(row)
    chosen = _turns(need(row, "chosen"), "chosen")
    rejected = _turns(need(row, "rejected"), "rejected")
    prompt = next((row[n] for n in ("prompt", "context", "input", "question") if row.get(n) not in (None, "")), None)
    prompt, chosen, rejected = _split_prompt(prompt, chosen, rejected)
    if chosen == rejected:
        return Drop("chosen and rejected are the same")
    try:
        pair = normalise_preference({"prompt": prompt, "chosen": chosen, "rejected": rejected})
    except ValueError as error:
        raise RowError(str(error)) from None
    for name in ("source", "category", "data_source"):
        if isinstance(row.get(name), str):
            pair[name] = row[name]
    return pair


# ----------------------------------------------------------------------------- Nemotron-Cascade 2
def nemotron_cascade_2_rl(row: Mapping[str, Any], suffix: str = "", domain: str | None = None) -> dict | Drop:
    """A Nemotron-Cascade-2-RL-data row (IF-RL, multi-domain-RL, MOPD, SWE-RL): the ``nemo-gym``
    conversion, whose routing sends it to its domain (ifeval, mcqa, workplace, structured_output,
    math, code; SWE rows become instances). A row with no reference, or an instruction the ifeval
    reward has no checker for, is dropped by reason."""
    try:
        return nemo_gym(row, suffix, domain)
    except NoReference as error:
        return Drop(f"no reference: {error}")
    except UnknownInstruction as error:
        return Drop(str(error))


def _loss_mask(row: Mapping[str, Any], messages: list[dict]) -> list[bool]:
    """Per message, whether it is trained: a top-level ``loss_mask`` list (one entry per message)
    or a per-message key (:data:`_MASK_KEYS`); without either, every message."""
    top = row.get("loss_mask")
    if isinstance(top, list):
        if len(top) != len(messages):
            raise RowError(f"loss_mask has {len(top)} entries for {len(messages)} messages")
        return [bool(value) for value in top]
    marks = []
    for message in messages:
        key = next((k for k in _MASK_KEYS if k in message and isinstance(message[k], (bool, int, float))), None)
        marks.append(True if key is None else bool(message.pop(key)))
    return marks


def _masked_turns(row: Mapping[str, Any], messages: list[dict]) -> list[dict] | Drop:
    """The conversation the project's SFT trains as the loss mask asks: every assistant turn is
    trained, so untrained turns after the last trained one are cut, and a row that leaves an
    earlier assistant turn untrained (a per-turn mask) is dropped."""
    marks = _loss_mask(row, messages)
    replies = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    trained = [i for i in replies if marks[i]]
    if not trained:
        return Drop("loss mask trains no assistant turn")
    if any(not marks[i] for i in replies if i < trained[-1]):
        return Drop("loss mask leaves an assistant turn untrained before a trained one")
    return messages[: trained[-1] + 1]


def nemotron_cascade_2_sft(row: Mapping[str, Any], suffix: str = "", modes: Any = ("think", "no_think")) -> dict | Drop:
    """A Nemotron-Cascade-2-SFT-Data row (OpenAI-style ``messages``, ``reasoning_content``,
    ``tool_calls``, ``tools``, a loss mask) as an SFT row; each user turn's mode as for
    ``nemotron-cascade-sft``."""
    messages = _masked_turns(row, _chat(need(row, "messages"), "messages"))
    if isinstance(messages, Drop):
        return messages
    extra: dict[str, Any] = {}
    for name, target in (("category", "category"), ("domain", "category"), ("source", "origin")):
        if isinstance(row.get(name), str):
            extra.setdefault(target, row[name])
    extra["source"] = sft_source(extra.get("category"))
    return _sft_row(row, messages, modes, extra)
