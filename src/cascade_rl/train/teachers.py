"""Distillation teachers (Nemotron-Cascade 2's MOPD, docs/mopd.md): what a distill stage's
``teachers`` name (a stage's checkpoint, a local checkpoint, a vLLM-protocol server), and the
checks made before any compute: the teacher exists, answers, and shares the student's tokenizer."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cascade_rl.llm.transport import is_server_spec
from cascade_rl.recipe import DistillStage, RecipeError, expand

#: text both tokenizers must encode to the same ids (special tokens, digits, accents, CJK, emoji)
TOKENIZER_PROBE = (
    "<|im_start|>user\nWhat is 12 + 30? Déjà vu: naïve café, 中文, 🙂 /think<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n12 + 30 = 42</think>\nThe answer is \\boxed{42}.<|im_end|>"
)


@dataclass(frozen=True)
class TeacherSpec:
    """One domain's teacher as the recipe gave it (``spec``) and where it is (``source``: a
    checkpoint directory or a server URL); ``stage_dir`` is the cascade stage that made the
    checkpoint, when there is one (the recovery report reads its evaluation)."""

    domain: str
    spec: str
    source: str
    stage_dir: str | None = None

    @property
    def served(self) -> bool:
        return is_server_spec(self.source)


def teacher_from_path(domain: str, spec: str, path: Path) -> TeacherSpec:
    """A checkpoint directory; a stage's ``<run>/<NN-stage>/model`` remembers its stage."""
    stage_dir = path.parent if (path.parent / "stage.json").exists() else None
    return TeacherSpec(domain, spec, str(path), str(stage_dir) if stage_dir else None)


def check_teachers(stage: DistillStage, teachers: Mapping[str, TeacherSpec], student: Path, wait_s: float) -> None:
    """Every teacher answers and shares the student's tokenizer; a one-line ``RecipeError``
    naming the teacher otherwise (run before any compute)."""
    from transformers import AutoTokenizer

    student_tokenizer = AutoTokenizer.from_pretrained(student, local_files_only=True)
    for domain, teacher in sorted(teachers.items()):
        where = f"stages ({stage.name}).teachers.{domain}"
        if teacher.served:
            _check_server(where, teacher.source, student_tokenizer, stage.temperature, wait_s)
            continue
        path = Path(teacher.source)
        if not (path / "config.json").exists():
            raise RecipeError(f"{where}: {teacher.spec!r} is neither a stage of this run nor a checkpoint directory")
        difference = tokenizer_difference(student_tokenizer, AutoTokenizer.from_pretrained(path, local_files_only=True))
        if difference:
            raise RecipeError(f"{where}: {path}'s tokenizer differs from the student's ({difference})")


def tokenizer_difference(student: Any, teacher: Any) -> str | None:
    """Why two tokenizers would give the same text different token ids, or None."""
    ours, theirs = student.get_vocab(), teacher.get_vocab()
    if len(ours) != len(theirs):
        return f"{len(theirs)} tokens, the student's {len(ours)}"
    differing = sorted(token for token, index in ours.items() if theirs.get(token) != index)
    if differing:
        token = differing[0]
        return f"{len(differing)} tokens have other ids, e.g. {token!r}: {theirs.get(token)} vs {ours[token]}"
    if teacher.encode(TOKENIZER_PROBE, add_special_tokens=False) != student.encode(
        TOKENIZER_PROBE, add_special_tokens=False
    ):
        return "the same vocabulary splits text differently"
    return None


def _check_server(where: str, url: str, student: Any, temperature: float, wait_s: float) -> None:
    from cascade_rl.llm.guard import wait_for_url
    from cascade_rl.serve.teacher import TeacherClient

    client = TeacherClient(url, max_concurrency=1, timeout=max(wait_s, 1.0), max_retries=0)
    try:
        try:
            wait_for_url(f"{client.root}/health", time.monotonic() + wait_s)
        except TimeoutError as error:
            raise RecipeError(
                f"{where}: no teacher server answers at {client.root} within {wait_s:g} s ({error})"
            ) from None
        try:
            difference = served_tokenizer_difference(client, student)
            if difference:
                raise RecipeError(f"{where}: {url}'s tokenizer differs from the student's ({difference})")
            if temperature != 1.0:
                pair = [(student.encode(TOKENIZER_PROBE)[:4], student.encode(TOKENIZER_PROBE)[4:12])]
                raw = client.completion_logprobs(pair, temperature=1.0)
                if client.completion_logprobs(pair, temperature=temperature) == raw:
                    raise RecipeError(
                        f"{where}: {url} ignores the temperature in its log-probabilities; serve it with vLLM's "
                        f"--logprobs-mode processed_logprobs, or distill at temperature 1"
                    )
        except RecipeError:
            raise
        except Exception as error:  # noqa: BLE001 - any failure of the probe is the one-line answer
            raise RecipeError(f"{where}: the teacher server at {url} cannot score text: {error}") from None
    finally:
        client.close()


def served_tokenizer_difference(client: Any, student: Any) -> str | None:
    """Why a teacher server would read the student's token ids differently, or None: the probe
    text must encode to the same ids, and every student token id decode to the same text
    (``/detokenize``; skipped on a server without it)."""
    from cascade_rl.llm.base import GenerationError

    if client.tokenize(TOKENIZER_PROBE) != student.encode(TOKENIZER_PROBE, add_special_tokens=False):
        return "the probe text encodes differently"
    every = list(range(len(student)))
    try:
        text = client.detokenize(every)
    except GenerationError as error:
        if getattr(error, "status", None) == 404:
            return None
        return f"it cannot decode the student's {len(every)} token ids: {error}"
    return None if text == student.decode(every) else "the student's token ids decode to other text"


class LocalTeacher:
    """A teacher checkpoint loaded in this process, scored with the trainer's own TRL forward."""

    def __init__(self, model: Any):
        self.model = model


class ServedTeacher:
    """A teacher behind a server (:class:`~cascade_rl.serve.teacher.TeacherClient`)."""

    def __init__(self, client: Any):
        self.client = client


def resolve_teachers(stage: DistillStage, stage_dirs: Mapping[str, Path]) -> dict[str, TeacherSpec]:
    """Each domain's teacher of a distill stage: a stage of this run (``stage_dirs``: each stage's
    directory by name) becomes that stage's checkpoint (a one-line error if it has not finished),
    a server URL stays, anything else is a local checkpoint directory (``${VAR}`` expanded)."""
    teachers = {}
    for domain, spec in stage.teachers.items():
        if spec in stage_dirs:
            stage_dir = Path(stage_dirs[spec])
            status_file = stage_dir / "stage.json"
            status = json.loads(status_file.read_text()) if status_file.exists() else {}
            if status.get("status") != "done" or not (stage_dir / "model").exists():
                raise RecipeError(
                    f"stages ({stage.name}).teachers.{domain}: stage {spec!r} has not run in {stage_dir.parent} "
                    f"({stage_dir.name}/stage.json is {status.get('status', 'missing')!r}); run it first"
                )
            teachers[domain] = TeacherSpec(domain, spec, str(stage_dir / "model"), str(stage_dir))
        elif is_server_spec(spec):
            teachers[domain] = TeacherSpec(domain, spec, expand(spec))
        else:
            teachers[domain] = teacher_from_path(domain, spec, Path(expand(spec)).expanduser())
    return teachers
