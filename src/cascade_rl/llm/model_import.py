"""Bring any model in: a GGUF file or a Hugging Face directory becomes a plain checkpoint that
every stage of the cascade can load (SPEC section 1: the cascade starts from a base model).

``cascade model import SRC --out DIR [--dtype float32|bfloat16]`` writes ``DIR`` with

* the weights as ``model.safetensors`` in the chosen dtype (GGUF tensors are de-quantised to
  float by ``transformers``' GGUF reader, then moved into a model built from the config: a model
  loaded from GGUF keeps a GGUF quantisation marker that ``save_pretrained`` refuses);
* ``config.json`` and ``generation_config.json`` (the model's own stop and pad ids);
* the tokenizer with its chat template (the one in the GGUF file or the directory);
* ``cascade_import.json``: what was imported (source, its sha256, dtype, parameter count) and how
  far the imported model's logits are from the source's on a probe sequence.

The import writes into a temporary directory next to ``DIR`` and renames it at the end, so a
killed import leaves nothing half-written. A second import of the same source and dtype into the
same ``DIR`` says it is done and does nothing; ``DIR`` holding anything else is refused unless
``force``. A GGUF architecture that ``transformers`` cannot read is a one-line error naming the
file and the architectures it can read.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

MARKER = "cascade_import.json"
DTYPES = ("float32", "bfloat16")
#: token ids of the probe the import compares logits on (clipped to the vocabulary)
PROBE_IDS = (1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 30, 2, 198, 1, 4093, 198)


class ModelImportError(ValueError):
    """A source that cannot be imported; the message names the file and why."""


@dataclass
class ImportResult:
    out: Path
    imported: bool  # False: the same source was imported into out before
    source: str
    source_format: str  # gguf | hf
    dtype: str
    parameters: int
    architecture: str
    chat_template: bool
    max_logit_difference: float | None


# ----------------------------------------------------------------------------- the source
@dataclass
class Source:
    path: Path  # the GGUF file, or the Hugging Face directory
    kind: str  # gguf | hf

    @property
    def directory(self) -> Path:
        return self.path.parent if self.kind == "gguf" else self.path

    def load_kwargs(self) -> dict[str, Any]:
        return {"gguf_file": self.path.name} if self.kind == "gguf" else {}


def find_source(source: str | Path) -> Source:
    """What ``source`` is: a ``.gguf`` file, a directory holding one ``.gguf`` file, or a Hugging
    Face checkpoint directory (``config.json``)."""
    path = Path(source).expanduser()
    if not path.exists():
        raise ModelImportError(f"{path}: no such file or directory")
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise ModelImportError(f"{path}: not a GGUF file (.gguf) nor a Hugging Face directory")
        return Source(path.resolve(), "gguf")
    if (path / "config.json").is_file():
        return Source(path.resolve(), "hf")
    ggufs = sorted(path.glob("*.gguf"))
    if len(ggufs) == 1:
        return Source(ggufs[0].resolve(), "gguf")
    if ggufs:
        names = ", ".join(p.name for p in ggufs)
        raise ModelImportError(f"{path}: holds several GGUF files ({names}); name the one to import")
    raise ModelImportError(
        f"{path}: neither a Hugging Face directory (no config.json) nor a directory with a .gguf file"
    )


def gguf_architecture(path: Path) -> str:
    """``general.architecture`` of a GGUF file, read from its header (no tensors loaded)."""
    from gguf import GGUFReader

    try:
        field = GGUFReader(str(path)).fields.get("general.architecture")
    except Exception as error:  # a truncated or foreign file
        raise ModelImportError(f"{path}: not a readable GGUF file ({error})") from None
    if field is None:
        raise ModelImportError(f"{path}: the GGUF header names no general.architecture")
    return str(field.contents())


def check_gguf_supported(path: Path) -> str:
    """The file's architecture, or a one-line error naming the file and what transformers reads."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    architecture = gguf_architecture(path)
    supported = sorted(set(GGUF_SUPPORTED_ARCHITECTURES) - {"general", "tokenizer"})
    if architecture not in supported:
        import transformers

        raise ModelImportError(
            f"{path}: GGUF architecture {architecture!r} is not readable by transformers {transformers.__version__} "
            f"(it reads: {', '.join(supported)})"
        )
    return architecture


def file_digest(path: Path) -> str:
    """sha256 of a file, or of a directory's weight and config files in name order."""
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.iterdir() if p.is_file() and p.name != MARKER)
    for item in files:
        digest.update(item.name.encode())
        with open(item, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


# ----------------------------------------------------------------------------- the import
def import_model(
    source: str | Path,
    out: str | Path,
    *,
    dtype: str = "float32",
    force: bool = False,
    echo: Callable[[str], None] = print,
) -> ImportResult:
    """Import ``source`` into ``out`` (see the module docstring)."""
    if dtype not in DTYPES:
        raise ModelImportError(f"--dtype {dtype!r}: choose one of {', '.join(DTYPES)}")
    found = find_source(source)
    out = Path(out).expanduser()
    architecture = check_gguf_supported(found.path) if found.kind == "gguf" else ""
    digest = file_digest(found.path)
    previous = _previous_import(out)
    if previous is not None and not force:
        if previous.get("source_sha256") == digest and previous.get("dtype") == dtype:
            echo(f"{out}: {found.path.name} is already imported ({dtype}); nothing to do")
            return ImportResult(out, False, **_result_fields(previous))
        raise ModelImportError(
            f"{out}: holds an import of {previous.get('source')} ({previous.get('dtype')}); "
            "pass --force to replace it or choose another --out"
        )
    if out.exists() and previous is None and any(out.iterdir()) and not force:
        raise ModelImportError(f"{out}: exists and is not an import of this tool; pass --force or choose another --out")
    staging = out.with_name(f".{out.name}.importing")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        record = _convert(found, staging, dtype, architecture, digest, echo)
        (staging / MARKER).write_text(json.dumps(record, indent=1))
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    echo(
        f"imported {found.path.name} -> {out} ({record['architecture']}, {record['parameters'] / 1e6:.1f}M parameters, "
        f"{dtype}; logits within {record['max_logit_difference']:.2g} of the source)"
    )
    return ImportResult(out, True, **_result_fields(record))


def _previous_import(out: Path) -> dict | None:
    marker = out / MARKER
    if not marker.is_file():
        return None
    try:
        return json.loads(marker.read_text())
    except json.JSONDecodeError:
        return None


def _result_fields(record: dict) -> dict[str, Any]:
    names = ("source", "source_format", "dtype", "parameters", "architecture", "chat_template", "max_logit_difference")
    return {name: record.get(name) for name in names}


def _convert(found: Source, staging: Path, dtype: str, architecture: str, digest: str, echo) -> dict:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs = found.load_kwargs()
    echo(f"reading {found.path} ...")
    tokenizer = AutoTokenizer.from_pretrained(found.directory, local_files_only=True, **kwargs)
    loaded = AutoModelForCausalLM.from_pretrained(
        found.directory, local_files_only=True, dtype=torch.float32, **kwargs
    ).eval()
    plain = plain_model(loaded, getattr(torch, dtype))
    plain.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    difference = max_logit_difference(loaded, plain, len(tokenizer))
    if not tokenizer.chat_template:
        echo(f"note: {found.path.name} carries no chat template; give the recipe model.chat_template: cascade")
    return {
        "source": str(found.path),
        "source_format": found.kind,
        "source_sha256": digest,
        "dtype": dtype,
        "architecture": architecture or plain.config.model_type,
        "parameters": sum(p.numel() for p in plain.parameters()),
        "vocabulary": len(tokenizer),
        "chat_template": bool(tokenizer.chat_template),
        "max_logit_difference": difference,
        "transformers": transformers.__version__,
    }


def plain_model(loaded: Any, dtype: Any) -> Any:
    """``loaded``'s weights in a model built from its config, without the GGUF quantisation
    marker (``save_pretrained`` refuses a model that carries one), in ``dtype``."""
    from transformers import AutoModelForCausalLM

    config = loaded.config.__class__.from_dict(loaded.config.to_dict())
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = dtype
    plain = AutoModelForCausalLM.from_config(config, dtype=dtype)
    plain.load_state_dict(loaded.state_dict(), strict=True)
    plain.generation_config = loaded.generation_config
    return plain.eval()


def max_logit_difference(reference: Any, model: Any, vocabulary: int) -> float:
    """Largest absolute difference between the two models' logits on a fixed probe sequence."""
    import torch

    ids = torch.tensor([[token % vocabulary for token in PROBE_IDS]])
    with torch.no_grad():
        expected = reference(input_ids=ids).logits.float()
        got = model(input_ids=ids).logits.float()
    return float((expected - got).abs().max())


def describe(result: ImportResult) -> dict[str, Any]:
    return {key: (str(value) if isinstance(value, Path) else value) for key, value in asdict(result).items()}
