"""Tiny, offline models for the generation-backend tests, and a misbehaving loopback HTTP proxy.

The models are real ``Qwen3ForCausalLM`` checkpoints (hidden size 32, 2 layers) saved with a
byte-level BPE tokenizer that has the ChatML special tokens, ``<think>``/``</think>`` as *special*
added tokens (so ``skip_special_tokens=True`` would drop them) and the project's chat template.
Their weights are random except for a wiring that makes the next token depend only on the
current one (the layers' output projections are zero, so the residual stream is the token's
embedding): a :data:`Chain` maps a token to the logits of its successors. That gives outputs
known in advance -- exact strings to assert on, and a known P(YES) for the judge -- while
everything else (tokenizer, chat template, ``generate``, ``transformers serve``) is the real
code path.
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cascade_rl.chat import IM_END, SPECIAL_TOKENS, install_chat_template

#: token -> {successor token: logit}; every other token is followed by ``<|im_end|>``.
Chain = dict[str, dict[str, float]]

PAD = "<|endoftext|>"
SURE = 40.0  # a logit this far above the rest makes sampling deterministic at any temperature <= 1

#: The chat model answers every prompt with exactly this (thinking, then "ok").
CHAT_RESPONSE = "<think>r</think>ok"
CHAT_CHAIN: Chain = {
    "\n": {"<think>": SURE},
    "<think>": {"r": SURE},
    "r": {"</think>": SURE},
    "</think>": {"o": SURE},
    "o": {"k": SURE},
    "k": {IM_END: SURE},
}

#: The judge model answers "<judgement>YES</judgement>" with probability 3/4, else "...NO...";
#: "YES" and "NO" are several tokens (byte level), "<judgement>" is one plain added token.
JUDGE_P_YES = 0.75
JUDGE_CHAIN: Chain = {
    "\n": {"<judgement>": SURE},
    "<judgement>": {"Y": SURE + math.log(3.0), "N": SURE},
    "Y": {"E": SURE},
    "E": {"S": SURE},
    "S": {"</judgement>": SURE},
    "N": {"O": SURE},
    "O": {"</judgement>": SURE},
    "</judgement>": {IM_END: SURE},
}
JUDGE_TOKENS = ("<judgement>", "</judgement>")


def build_tokenizer(plain_tokens: tuple[str, ...] = ()):
    """A byte-level BPE tokenizer without merges (every byte is a token) plus the ChatML /
    thinking special tokens and ``plain_tokens`` as non-special added tokens."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import PreTrainedTokenizerFast

    alphabet = ByteLevel.alphabet()
    vocab = {char: i for i, char in enumerate(sorted(alphabet))}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    specials = [PAD, *SPECIAL_TOKENS]
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    backend.add_tokens([AddedToken(t, special=False, normalized=False) for t in plain_tokens])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=IM_END,
        pad_token=PAD,
        extra_special_tokens=[t for t in SPECIAL_TOKENS if t != IM_END],
    )
    return install_chat_template(tokenizer)


def single_token_id(tokenizer, text: str) -> int:
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert len(ids) == 1, f"{text!r} is not one token: {ids}"
    return ids[0]


def build_chain_model(
    path: Path, chain: Chain, plain_tokens: tuple[str, ...] = (), hidden: int = 32, seed: int = 0, head_dim: int = 8
) -> Path:
    """Save a tiny Qwen3 model + tokenizer whose next token follows ``chain`` (module docstring).
    ``head_dim`` changes nothing the model writes (attention adds nothing to the residual stream);
    vLLM's CPU kernels need 32 or more."""
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    tokenizer = build_tokenizer(plain_tokens)
    assert len(chain) < hidden, "each chained token needs its own embedding direction"
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=head_dim,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen3ForCausalLM(config).eval()
    with torch.no_grad():
        for layer in model.model.layers:  # layers leave the residual stream untouched
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        embed, head = model.model.embed_tokens.weight, model.lm_head.weight
        embed.zero_()
        head.zero_()
        default_dim = hidden - 1
        embed[:, default_dim] = 1.0
        # RMSNorm maps a one-hot embedding to sqrt(hidden) on its direction
        scale = 1.0 / math.sqrt(hidden)
        head[tokenizer.convert_tokens_to_ids(IM_END), default_dim] = SURE * scale
        for dim, (token, successors) in enumerate(chain.items()):
            token_id = single_token_id(tokenizer, token)
            embed[token_id].zero_()
            embed[token_id, dim] = 1.0
            for successor, logit in successors.items():
                head[single_token_id(tokenizer, successor), dim] = logit * scale
    # like released chat models: sampling on (``transformers serve`` never turns it on itself)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=True,
        temperature=0.6,
        top_p=0.95,
    )
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_http(url: str, process: subprocess.Popen | None = None, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"server exited with code {process.returncode} before answering {url}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.25)
    raise TimeoutError(f"no answer from {url} within {timeout} s")


class ProxyServer(ThreadingHTTPServer):
    """A real HTTP server in front of an upstream server that can misbehave on purpose: answer
    the first ``fail_first`` requests with ``fail_status`` (and a ``Retry-After`` header), hang,
    or hold each request ``delay`` seconds. It records each request's arrival time and body,
    and the most requests in flight at once."""

    daemon_threads = True

    def __init__(
        self,
        upstream: str | None,
        *,
        fail_first: int = 0,
        fail_status: int = 503,
        retry_after: str | None = None,
        hang: bool = False,
        delay: float = 0.0,
    ):
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.upstream = upstream.rstrip("/") if upstream else None
        self.fail_first, self.fail_status, self.retry_after = fail_first, fail_status, retry_after
        self.hang, self.delay = hang, delay
        self.arrivals: list[float] = []
        self.bodies: list[dict] = []
        self.in_flight = self.max_in_flight = 0
        self.lock = threading.Lock()
        self.release = threading.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> ProxyServer:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.shutdown()
        self.server_close()


class _ProxyHandler(BaseHTTPRequestHandler):
    server: ProxyServer

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:
        server = self.server
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with server.lock:
            server.arrivals.append(time.monotonic())
            server.bodies.append(json.loads(body))
            number = len(server.arrivals)
            server.in_flight += 1
            server.max_in_flight = max(server.max_in_flight, server.in_flight)
        try:
            reply = self._answer(server, body, number)
        finally:
            # counted out before the reply is sent: a client that gets its answer and sends the next
            # request at once must not find this one still counted in flight
            with server.lock:
                server.in_flight -= 1
        if reply is not None:
            self._reply(*reply)

    def _answer(self, server: ProxyServer, body: bytes, number: int) -> tuple[int, bytes, dict] | None:
        if server.hang:
            server.release.wait(60)
            return None
        time.sleep(server.delay)
        if number <= server.fail_first:
            headers = {"Retry-After": server.retry_after} if server.retry_after else {}
            return server.fail_status, json.dumps({"error": "try again"}).encode(), headers
        request = urllib.request.Request(
            server.upstream + self.path.removeprefix("/v1"), data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as upstream:
                return upstream.status, upstream.read(), {}
        except urllib.error.HTTPError as error:
            return error.code, error.read(), {}

    def _reply(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
