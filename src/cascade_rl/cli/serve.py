"""``cascade serve``: serve models apart from the training processes (:mod:`cascade_rl.serve`):
a reward model behind vLLM's Pooling API, a distillation teacher behind vLLM's completions API
with ``prompt_logprobs``; and the reward verifiers behind NeMo Gym's resources-server protocol
(:mod:`cascade_rl.integrations.nemo_gym`)."""

from __future__ import annotations

from pathlib import Path

import typer

from cascade_rl.cli.common import checked_options, command_group, parse_options, say

app = command_group(
    "Serve a reward model or a distillation teacher (the protocols of vLLM), or the verifiers (NeMo Gym's)."
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


@app.command("verifiers")
def verifiers(
    host: str = typer.Option("127.0.0.1", help="Address to listen on (0.0.0.0: every interface)."),
    port: int = typer.Option(8002, min=1, max=65535, help="Port to listen on."),
    option: list[str] = typer.Option(
        [], "--option", help="Scorer option DOMAIN.KEY=VALUE, e.g. genrm.judge=http://HOST:PORT/v1#MODEL (repeatable)."
    ),
    concurrency: int = typer.Option(
        8, "--concurrency", min=1, help="Verifications run at once (code runs one sandboxed program each)."
    ),
    timeout: float = typer.Option(
        300.0, "--timeout", min=0.001, help="Seconds one verification may take; longer: reward 0, mask_sample true."
    ),
    group_size: int = typer.Option(
        1, "--group-size", min=1, help="Rollouts per prompt that a group domain (genrm) waits for and scores together."
    ),
    group_timeout: float = typer.Option(
        1800.0, "--group-timeout", min=0.001, help="Seconds to wait for a group to fill; then it is scored as it is."
    ),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level."),
) -> None:
    """Serve every reward domain as a NeMo Gym resources server at http://HOST:PORT (POST /verify,
    POST /seed_session, GET /health), for NeMo RL. A verify request (the task row, its
    responses_create_params and the policy's Responses API `response`) is routed by its fields as
    `cascade data convert -f nemo-gym` reads them (or by a `domain` the registry knows) and answered
    with `reward`, `mask_sample` and `failure_reason`."""
    from cascade_rl.integrations.nemo_gym import VerifierSettings, serve_verifiers

    settings = VerifierSettings(checked_options(parse_options(option)), concurrency, timeout, group_size, group_timeout)
    say(f"verifiers at http://{host}:{port}/verify")
    serve_verifiers(settings, host=host, port=port, log_level=log_level)
