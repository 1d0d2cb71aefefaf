"""``cascade model import``: bring a model in -- a GGUF file or a Hugging Face directory -> a
plain checkpoint with its tokenizer and chat template (:mod:`cascade_rl.llm.model_import`)."""

from __future__ import annotations

from pathlib import Path

import typer

from cascade_rl.cli.common import command_group, fail, say

app = command_group("Bring a model in: GGUF file or Hugging Face directory -> plain checkpoint.")


@app.command("import")
def model_import(
    source: Path = typer.Argument(..., help="A .gguf file, a directory holding one, or a Hugging Face directory."),
    out: Path = typer.Option(..., "--out", "-o", help="Checkpoint directory to write (safetensors + tokenizer)."),
    dtype: str = typer.Option("float32", "--dtype", help="Weights dtype: float32 or bfloat16."),
    force: bool = typer.Option(False, "--force", help="Replace whatever --out holds."),
) -> None:
    """Import a model as a plain safetensors checkpoint with its tokenizer and chat template.

    GGUF weights are de-quantised to float; the logits of the imported model are compared with
    the source's on a probe. Importing the same source again into the same --out does nothing.
    """
    from cascade_rl.llm.model_import import ModelImportError, import_model

    try:
        import_model(source, out, dtype=dtype, force=force, echo=say)
    except ModelImportError as error:
        raise fail(error) from None
