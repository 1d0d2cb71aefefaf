"""What this machine computes fast, measured rather than assumed (speed choices of every stage).

A bfloat16 matrix product is twice as fast as float32 on a CPU with AVX-512 BF16 or AMX, and
about 90 times *slower* on one with AVX2 only (no native bfloat16 arithmetic: every product is
emulated). So a dtype chosen on one machine is wrong on the next; ``auto`` settings are decided
here, once per run, from a probe:

* :func:`cpu_flags` reads the CPU's instruction-set flags (``/proc/cpuinfo``);
* :func:`matmul_gflops` times a product of the shape that dominates sampling a small model
  (96 sequences x 576 hidden x 1536 intermediate: SmolLM2-135M's MLP) in float32 and bfloat16;
* :func:`bf16_is_fast`: on a GPU yes; on a CPU when the bfloat16 product runs at least
  :data:`BF16_MIN_RATIO` of the float32 one's speed;
* :func:`cpu_threads` divides the cores this process may use among the processes of this node;
* :func:`memory_bytes` is the memory this process's machine has (its cgroup's limit when lower),
  from which vLLM's KV cache takes a bounded share on a CPU (llm/vllm_engine.py).

:func:`describe` is what a run records (``machine.json``) beside the choices it made, so that
every figure can name the CPU it came from.
"""

from __future__ import annotations

import functools
import os
import platform
import time
from pathlib import Path
from typing import Any

#: bfloat16 is used for speed only when its product runs at least this fraction of float32's
BF16_MIN_RATIO = 0.9
#: the probe's product: (rows x inner) @ (inner x columns)
PROBE_SHAPE = (96, 576, 1536)
#: the flags that decide bfloat16 speed on x86 and Arm CPUs, recorded with every probe
SPEED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "bf16", "sve", "asimd")


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``flags`` on x86, ``Features`` on Arm); empty where unknown."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


@functools.cache
def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_bytes() -> int:
    """This machine's memory as this process sees it: RAM (``MemTotal``), or its cgroup's
    memory limit when that is lower (a container)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            limit = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if limit.isdigit():
            total = min(total, int(limit))
    return total


def has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def available_cores() -> int:
    """Cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def cpu_threads(processes_per_node: int = 1) -> int:
    """Threads for one of ``processes_per_node`` processes: its share of the available cores."""
    return max(1, available_cores() // max(1, processes_per_node))


@functools.cache
def matmul_gflops(dtype_name: str, threads: int | None = None) -> float:
    """Measured GFLOPS of the probe product in ``dtype_name`` on the CPU (best of 3 after a warm-up)."""
    import torch

    rows, inner, columns = PROBE_SHAPE
    dtype = getattr(torch, dtype_name)
    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        generator = torch.Generator().manual_seed(0)
        a = torch.randn(rows, inner, generator=generator).to(dtype)
        b = torch.randn(inner, columns, generator=generator).to(dtype)
        torch.mm(a, b)
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            torch.mm(a, b)
            best = min(best, time.perf_counter() - started)
    finally:
        torch.set_num_threads(previous)
    return 2 * rows * inner * columns / max(best, 1e-9) / 1e9


def bf16_is_fast() -> bool:
    """bfloat16 arithmetic at (nearly) float32's speed or better: every GPU this project runs
    on; on a CPU, the probe decides (AVX2-only CPUs emulate it ~90x slower)."""
    if has_gpu():
        return True
    return matmul_gflops("bfloat16") >= BF16_MIN_RATIO * matmul_gflops("float32")


def resolve_dtype(setting: str | None) -> str:
    """A dtype setting with ``auto`` decided for this machine: bfloat16 where it is fast, else float32."""
    if setting in (None, "auto"):
        return "bfloat16" if bf16_is_fast() else "float32"
    return setting


def describe() -> dict[str, Any]:
    """The machine facts a run records beside its speed choices."""
    facts: dict[str, Any] = {
        "cpu": cpu_name(),
        "machine": platform.machine(),
        "cores_available": available_cores(),
        "speed_flags": sorted(f for f in SPEED_FLAGS if f in cpu_flags()),
        "gpu": has_gpu(),
        "memory_gib": round(memory_bytes() / 2**30, 1),
    }
    if not facts["gpu"]:
        facts["probe_gflops"] = {name: round(matmul_gflops(name), 1) for name in ("float32", "bfloat16")}
        facts["probe_shape"] = list(PROBE_SHAPE)
    return facts
