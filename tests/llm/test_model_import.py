"""`cascade model import`: a GGUF file (written by the test itself: tests/gguf_assets.py) or a
Hugging Face directory becomes a plain checkpoint with the same logits, its tokenizer and chat
template; a second import says it is done; unreadable input fails in one line naming the file."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from gguf_assets import CHAT_TEMPLATE, write_gguf
from transformers import AutoModelForCausalLM, AutoTokenizer

from cascade_rl.llm.model_import import MARKER, ModelImportError, import_model

PROBE = "what is 3 plus 4? the answer is 7."


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "tiny.Q8_0.gguf"
    original = write_gguf(path, quantization="Q8_0")
    return path, original


def logits(model, tokenizer) -> torch.Tensor:
    ids = torch.tensor([tokenizer(PROBE)["input_ids"]])
    with torch.no_grad():
        return model(ids).logits


def test_gguf_import_gives_transformers_own_gguf_logits_tokenizer_and_template(gguf_file, tmp_path):
    path, original = gguf_file
    out = tmp_path / "model"
    result = import_model(path, out, echo=lambda _: None)
    assert result.imported and result.source_format == "gguf" and result.architecture == "llama"
    assert (out / "model.safetensors").exists() and not list(out.glob("*.gguf"))
    reference = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name).eval()
    reference_tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    imported = AutoModelForCausalLM.from_pretrained(out, local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(out, local_files_only=True)
    assert torch.equal(logits(imported, tokenizer), logits(reference, reference_tokenizer))
    assert (logits(imported, tokenizer) - logits(original, tokenizer)).abs().max() < 0.05  # Q8_0 rounding only
    assert tokenizer(PROBE)["input_ids"] == reference_tokenizer(PROBE)["input_ids"]
    assert tokenizer.chat_template == CHAT_TEMPLATE
    assert tokenizer.eos_token == tokenizer.pad_token == "<|im_end|>"
    assert imported.generation_config.eos_token_id == 2
    assert getattr(imported.config, "quantization_config", None) is None  # a plain checkpoint
    record = json.loads((out / MARKER).read_text())
    assert record["max_logit_difference"] == 0.0 and record["parameters"] == sum(
        p.numel() for p in original.parameters()
    )


def test_a_second_import_says_it_is_done_and_changes_nothing(gguf_file, tmp_path):
    path, _ = gguf_file
    out = tmp_path / "model"
    import_model(path, out, echo=lambda _: None)
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    lines: list[str] = []
    again = import_model(path, out, echo=lines.append)
    assert not again.imported and "already imported" in lines[0]
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp
    with pytest.raises(ModelImportError, match="--force"):  # another dtype into the same directory
        import_model(path, out, dtype="bfloat16", echo=lambda _: None)


def test_bfloat16_import_and_a_hugging_face_directory(gguf_file, tmp_path):
    path, _ = gguf_file
    half = import_model(path, tmp_path / "bf16", dtype="bfloat16", echo=lambda _: None)
    model = AutoModelForCausalLM.from_pretrained(half.out, dtype="auto")
    assert model.dtype == torch.bfloat16 and half.max_logit_difference < 0.1
    again = import_model(half.out, tmp_path / "copy", echo=lambda _: None)  # a Hugging Face directory
    assert again.source_format == "hf" and again.dtype == "float32"
    tokenizer = AutoTokenizer.from_pretrained(again.out)
    copied = AutoModelForCausalLM.from_pretrained(again.out)
    assert torch.equal(logits(copied, tokenizer), logits(model.float(), tokenizer))


def test_unreadable_inputs_fail_in_one_line_naming_the_file(tmp_path):
    foreign = tmp_path / "foreign.gguf"
    write_gguf(foreign, quantization="F32", architecture="not-a-model")
    with pytest.raises(ModelImportError, match=r"foreign\.gguf: GGUF architecture 'not-a-model' is not readable"):
        import_model(foreign, tmp_path / "out", echo=lambda _: None)
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"not a gguf file")
    with pytest.raises(ModelImportError, match=r"garbage\.gguf: not a readable GGUF file"):
        import_model(garbage, tmp_path / "out", echo=lambda _: None)
    with pytest.raises(ModelImportError, match="no such file"):
        import_model(tmp_path / "missing.gguf", tmp_path / "out", echo=lambda _: None)
    assert not (tmp_path / "out").exists()


def test_cli_imports_then_reports_done(gguf_file, tmp_path):
    path, _ = gguf_file
    env = {**os.environ, "COLUMNS": "200"}
    command = [sys.executable, "-m", "cascade_rl.cli", "model", "import", str(path), "--out", str(tmp_path / "m")]
    first = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "imported tiny.Q8_0.gguf" in first.stderr
    second = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert second.returncode == 0 and "already imported" in second.stderr
    bad = subprocess.run(
        [*command[:5], str(Path(tmp_path) / "nope.gguf"), "--out", str(tmp_path / "x")],
        **{"capture_output": True, "text": True, "timeout": 300, "env": env},
    )
    assert bad.returncode == 2 and "nope.gguf: no such file" in bad.stderr
