"""``cascade serve``: serve models apart from the training processes (:mod:`cascade_rl.serve`):
a reward model behind vLLM's Pooling API, a distillation teacher behind vLLM's completions API
with ``prompt_logprobs``."""

from __future__ import annotations

from pathlib import Path

import typer

from cascade_rl.cli.common import say

app = typer.Typer(
    help="Serve a reward model or a distillation teacher (the protocols of vLLM).",
    no_args_is_help=True,
    add_completion=False,
)


@app.command("reward-model")
def reward_model(
    path: Path = typer.Argument(
        ..., exists=True, file_okay=False, help="Reward-model checkpoint (a sequence-classification model)."
    ),
    host: str = typer.Option("127.0.0.1", help="Address to listen on (0.0.0.0: every interface)."),
    port: int = typer.Option(8000, min=1, max=65535, help="Port to listen on."),
    device: str | None = typer.Option(
        None, help="cpu, cuda, cuda:N, or auto (spread over all GPUs) (default: cuda if available, else cpu)."
    ),
    max_length: int | None = typer.Option(
        None,
        "--max-length",
        min=1,
        help="Longest input in tokens; longer ones keep their last tokens "
        "(default: the model's max_position_embeddings).",
    ),
    batch_size: int = typer.Option(8, "--batch-size", min=1, help="Most inputs scored in one forward pass."),
    served_model_name: str | None = typer.Option(
        None, "--served-model-name", help="Name clients give as 'model' (URL #NAME) (default: PATH as given)."
    ),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level."),
) -> None:
    """Serve a reward model at http://HOST:PORT (POST /pooling, GET /health) with the protocol of
    `vllm serve PATH --runner pooling`. A recipe points at it with reward_model: "http://HOST:PORT#NAME"."""
    from cascade_rl.serve.server import serve_reward_model

    say(f"loading {path} ...")
    serve_reward_model(
        str(path),
        host=host,
        port=port,
        device=device,
        max_length=max_length,
        batch_size=batch_size,
        served_model_name=served_model_name,
        log_level=log_level,
    )


@app.command("teacher")
def teacher(
    path: Path = typer.Argument(..., exists=True, file_okay=False, help="Teacher checkpoint (a causal LM)."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on (0.0.0.0: every interface)."),
    port: int = typer.Option(8001, min=1, max=65535, help="Port to listen on."),
    device: str | None = typer.Option(None, help="cpu, cuda, cuda:N (default: cuda if available, else cpu)."),
    batch_size: int = typer.Option(8, "--batch-size", min=1, help="Most sequences scored in one forward pass."),
    served_model_name: str | None = typer.Option(
        None, "--served-model-name", help="Name clients give as 'model' (URL #NAME) (default: PATH as given)."
    ),
    log_level: str = typer.Option("warning", "--log-level", help="uvicorn log level."),
) -> None:
    """Serve a distillation teacher at http://HOST:PORT: the token log-probabilities of given text
    (POST /v1/completions with prompt_logprobs, /tokenize, /detokenize), as `vllm serve PATH` does.
    A distill stage points at it with teachers: {DOMAIN: "http://HOST:PORT#NAME"}."""
    from cascade_rl.serve.teacher import serve_teacher

    say(f"loading {path} ...")
    serve_teacher(
        str(path),
        host=host,
        port=port,
        device=device,
        batch_size=batch_size,
        served_model_name=served_model_name,
        log_level=log_level,
    )
