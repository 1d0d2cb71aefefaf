"""Host side of the sandbox: limits, results, isolation mode, and one sandboxed server process.

See the package docstring (:mod:`cascade_rl.sandbox`) for what is and is not protected. A
:class:`SandboxServer` is one ``bwrap`` sandbox holding the supervisor of
:mod:`cascade_rl.sandbox.server`; it runs programs one at a time (``run`` for an argv,
``run_python`` for Python source executed by a fork of the supervisor's interpreter). The
module-level :func:`run` and :func:`run_python` start a server for one program;
:class:`cascade_rl.sandbox.pool.SandboxPool` keeps servers alive across programs.

**Why one file of about 1,070 lines** (DESIGN.md: files over ~500 lines say why): it is one
object, :class:`SandboxServer` (its start, its run protocol and its clean-up are the half of
the protocol :mod:`cascade_rl.sandbox.server` speaks, about 420 lines: writing stdin,
reading the pipes, following a run's steps), with what it needs right before it: limits and
results, isolation detection, the ``bwrap`` command line, sealed memfds, the stdin feed and
step tracking, and the user-namespace helper. Splitting the protocol's two halves of one class apart
would make each harder to check against the other.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import itertools
import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from cascade_rl.sandbox import cgroups, seccomp

logger = logging.getLogger("cascade_rl.sandbox")

MiB = 1024 * 1024
#: ``CASCADE_SANDBOX=rlimits`` runs untrusted code with resource limits only (the user's opt-in
#: to no isolation, also where bubblewrap works); ``=bwrap`` refuses any opt-in
ISOLATION_ENV = "CASCADE_SANDBOX"
#: what a started server reports it could set up (``SandboxServer.features``): the same pid
#: numbers for every run, a cgroup, the seccomp filter
FEATURES = ("fixed_pids", "cgroup", "seccomp", "fresh_runs")
SANDBOX_UID = 65534  # "nobody": the uid programs run as; no capabilities
#: the supervisor's capabilities in the sandbox's user namespace, never a program's: make each
#: run's namespaces and scratch file systems and bring up its loopback (SYS_ADMIN, NET_ADMIN),
#: reset the pid numbering before each run (ns_last_pid), see the processes hidden from
#: programs (SYS_PTRACE); on root hosts also switch to the programs' uid and kill them
FRESH_RUN_CAPABILITIES = ("CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_SYS_PTRACE")
SUPERVISOR_CAPABILITIES = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", *FRESH_RUN_CAPABILITIES)

STARTUP_TIMEOUT_S = 30.0  # bwrap + interpreter start-up on a very busy machine
HOST_GRACE_S = 5.0  # the host waits this long past a run's time limit for the server
DRAIN_S = 1.0  # after the run ended, how long to wait for pipes to reach EOF
SYSTEM_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
#: the only files of /etc the sandbox sees (users, dynamic linker, time zone, alternatives)
ETC_FILES = (
    "passwd",
    "group",
    "nsswitch.conf",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "alternatives",
)


class SandboxError(RuntimeError):
    """The sandbox itself failed (bwrap missing when required, a server that cannot start)."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run. ``cpu_s`` defaults to ``time_s + 1``: CPU seconds of each
    process (RLIMIT_CPU) and of the run's processes together (both in whole seconds);
    ``memory_mb`` is the address space of each process (RLIMIT_AS) and also caps the memory of
    the run's whole process tree (with cgroups everything it allocates, enforced by the
    kernel; without, its resident memory plus what it stores in the RAM-backed /tmp and
    /dev/shm); ``processes`` caps the tree's size (RLIMIT_NPROC also counts threads);
    ``output_bytes`` caps stdout and stderr each (the run is killed when one overflows);
    ``tmp_mb`` sizes the private /tmp and /dev/shm of a sandbox (set when it starts)."""

    time_s: float = 10.0
    cpu_s: float | None = None
    memory_mb: int = 2048
    processes: int = 64
    file_size_mb: int = 64
    open_files: int = 256
    output_bytes: int = 8 * MiB
    tmp_mb: int = 512

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value is None and name == "cpu_s":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"Limits.{name} must be a positive number, got {value!r}")
        if self.open_files < 8:
            raise ValueError(f"Limits.open_files must be at least 8, got {self.open_files}")

    @property
    def effective_cpu_s(self) -> float:
        return self.cpu_s if self.cpu_s is not None else self.time_s + 1.0

    def for_server(self) -> dict:
        fields_ = asdict(self)
        fields_["cpu_s"] = self.effective_cpu_s
        return fields_


DEFAULT_LIMITS = Limits()


@dataclass
class RunResult:
    """What happened to one program. ``returncode`` is the exit status, ``-signal`` when a
    signal ended it, ``None`` when the sandbox stopped it (time or another limit) or failed.
    ``limit`` names the limit that stopped it (``time``, ``cpu``, ``memory``, ``processes``,
    ``output``, ``file_size``), ``error`` a failure of the sandbox itself, ``result`` what a
    python-mode program wrote to its result channel (fd 3)."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    output_truncated: bool
    seconds: float
    killed_by_signal: int | None
    limit: str | None = None
    error: str | None = None
    result: bytes = b""

    @property
    def stdout_text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", errors="replace")

    @property
    def ok(self) -> bool:
        """Exited by itself with status 0, within every limit."""
        return self.returncode == 0 and self.limit is None and self.error is None


# ----------------------------------------------------------------------------------------------
# isolation mode


class IsolationUnavailable(SandboxError):
    """Bubblewrap cannot isolate programs here and nobody opted into rlimits only: untrusted
    code is not run (the one error a scorer does not turn into a score)."""


def _warn_unisolated(reason: str) -> None:
    message = (
        f"cascade_rl.sandbox: {reason}; untrusted code runs with rlimits only: NO "
        "filesystem, network or process isolation (programs can read and write your "
        "files, use the network and signal your processes). Install bubblewrap "
        "(`apt-get install bubblewrap`, or `make system-deps`) for real isolation."
    )
    logger.warning(message)
    warnings.warn(message, RuntimeWarning, stacklevel=4)


def allow_rlimits_only(source: str) -> None:
    """Opt this process into running untrusted code with rlimits only where bubblewrap cannot
    run (``source`` names who chose it, e.g. the recipe's ``runtime.sandbox: rlimits``; said in
    :func:`isolation_report`). Without an opt-in (this, or ``CASCADE_SANDBOX=rlimits``), such
    a machine refuses to run untrusted code (:class:`IsolationUnavailable`)."""
    global _rlimits_allowed_by
    with _isolation_lock:
        _rlimits_allowed_by = source
        _decided.clear()


def isolation() -> str:
    """``"bwrap"`` (full sandbox) or ``"rlimits"`` (resource limits only, where the user opted
    in; warned about once per process); :class:`IsolationUnavailable` (one line saying why
    and what to do) where bubblewrap cannot run and nobody opted in.

    ``CASCADE_SANDBOX=rlimits`` forces rlimits only (an opt-in, also where bubblewrap works);
    :func:`allow_rlimits_only` allows it where bubblewrap cannot run; ``CASCADE_SANDBOX=bwrap``
    refuses any opt-in. Cached: call ``isolation.cache_clear()`` after changing the environment
    variable.
    """
    with _isolation_lock:  # one probe and at most one warning, however many threads ask
        if "mode" not in _decided:
            _decided.update(_decide_isolation())
            if _decided["mode"] == "rlimits":
                _warn_unisolated(_decided["warning"])
        if _decided["mode"] is None:
            raise IsolationUnavailable(_decided["warning"])
        return _decided["mode"]


def isolation_report() -> dict[str, str | None]:
    """What untrusted code runs in here, for a run's ``machine.json`` and report: ``isolation``
    (``bwrap``, ``rlimits`` or ``unavailable``), ``reason`` (why not bwrap) and ``opted_in``
    (who chose rlimits only)."""
    try:
        mode = isolation()
    except IsolationUnavailable:
        mode = "unavailable"
    with _isolation_lock:
        return {"isolation": mode, "reason": _decided.get("reason"), "opted_in": _decided.get("opted_in")}


_isolation_lock = threading.Lock()
_decided: dict = {}
_rlimits_allowed_by: str | None = None


def _decide_isolation() -> dict:
    forced = os.environ.get(ISOLATION_ENV, "").strip().lower()
    if forced not in ("", "bwrap", "rlimits"):
        raise SandboxError(f"{ISOLATION_ENV} must be 'bwrap' or 'rlimits', got {forced!r}")
    if forced == "rlimits":
        opt_in = f"{ISOLATION_ENV}=rlimits"
        reason = f"{opt_in} forces it"
        return {"mode": "rlimits", "reason": reason, "opted_in": opt_in, "warning": reason}
    problem = _bwrap_problem()
    if problem is None:
        return {"mode": "bwrap"}
    if _rlimits_allowed_by is not None and forced != "bwrap":
        warning = f"{problem} ({_rlimits_allowed_by})"
        return {"mode": "rlimits", "reason": problem, "opted_in": _rlimits_allowed_by, "warning": warning}
    refusal = (
        f"{ISOLATION_ENV}=bwrap but {problem}"
        if forced == "bwrap"
        else f"{problem}: untrusted code is not run without isolation; install bubblewrap (`make system-deps`), "
        f"or accept resource limits only (NO filesystem, network or process isolation) with `runtime.sandbox: "
        f"rlimits` in the recipe or {ISOLATION_ENV}=rlimits"
    )
    return {"mode": None, "reason": problem, "opted_in": None, "warning": refusal}


isolation.cache_clear = _decided.clear  # type: ignore[attr-defined]


def available() -> bool:
    """Whether programs run fully isolated (bubblewrap works here); never raises."""
    try:
        return isolation() == "bwrap"
    except SandboxError:
        return False


def _bwrap_problem() -> str | None:
    """Why bubblewrap cannot be used here, or None when a probe sandbox runs Python fine."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed"
    probe = bwrap_argv(Limits()) + [sys.executable, "-I", "-S", "-c", "pass"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=STARTUP_TIMEOUT_S, cwd="/", env=_server_env())
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap does not start ({error})"
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip()[-300:]
        return f"bubblewrap does not work here ({detail or f'exit status {done.returncode}'})"
    return None


# ----------------------------------------------------------------------------------------------
# the bwrap command line and the environment


def _python_mounts() -> list[tuple[str, str]]:
    """(real directory, path in the sandbox) of every directory the interpreter needs: its
    prefixes (venv and base) and its real location, each at its real path and, where the path
    the interpreter was started by goes through a symbolic link (a venv under a linked
    directory), at that path too, so that ``sys.executable`` and the venv's ``pyvenv.cfg`` are
    found inside the sandbox as outside it. Parents come before the directories below them."""
    executable = Path(os.path.realpath(sys.executable))
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, str(executable.parent.parent)}
    candidates.add(os.path.dirname(os.path.dirname(os.path.abspath(sys.executable))))
    mounts = set()
    for path in candidates:
        real = os.path.realpath(path)
        for destination in {real, os.path.normpath(os.path.abspath(path))}:
            if destination == "/" or destination == "/usr" or destination.startswith("/usr/"):
                continue  # already visible
            mounts.add((real, destination))
    return sorted(mounts, key=lambda mount: (mount[1].count("/"), mount[1]))


def _python_roots() -> list[str]:
    """The sandbox paths of :func:`_python_mounts` (parents first)."""
    return [destination for _, destination in _python_mounts()]


def bwrap_argv(
    limits: Limits,
    *,
    workdir: Path | None = None,
    writable_workdir: bool = True,
    network: bool = False,
    userns_fd: int | None = None,
    separate: bool = False,
) -> list[str]:
    """The ``bwrap`` prefix of a sandbox (see the package docstring for what each part does).

    ``userns_fd``: a user namespace from :class:`_UserNamespace`. With ``separate`` (root
    hosts) the supervisor runs as its uid 0 with :data:`SUPERVISOR_CAPABILITIES` and programs
    as ``SANDBOX_UID``; else both run as ``SANDBOX_UID``, the supervisor with
    :data:`FRESH_RUN_CAPABILITIES`. Without a namespace bwrap makes one mapping only
    ``SANDBOX_UID``, where the supervisor has no capability (and runs cannot get namespaces of
    their own). Programs never have any capability."""
    argv = ["bwrap", *_identity_args(userns_fd, separate), *_namespace_args(network), *_system_args()]
    # the private /tmp first: an interpreter (a venv) that lives under /tmp is mounted on top of it
    argv += _scratch_args(limits.tmp_mb) + _interpreter_args()
    if workdir is not None:
        real = os.path.realpath(workdir)
        argv += ["--bind" if writable_workdir else "--ro-bind", real, real]
    return argv + ["--chdir", "/tmp"]


def _identity_args(userns_fd: int | None, separate: bool) -> list[str]:
    """Who the supervisor is (see :func:`bwrap_argv`)."""
    uid = "0" if separate else str(SANDBOX_UID)
    if userns_fd is None:
        return ["--unshare-user", "--uid", uid, "--gid", uid, "--disable-userns", "--cap-drop", "ALL"]
    argv = ["--userns", str(userns_fd), "--uid", uid, "--gid", uid, "--cap-drop", "ALL"]
    for capability in SUPERVISOR_CAPABILITIES if separate else FRESH_RUN_CAPABILITIES:
        argv += ["--cap-add", capability]
    return argv


def _namespace_args(network: bool) -> list[str]:
    argv = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    argv += ["--hostname", "sandbox", "--die-with-parent", "--new-session", "--as-pid-1"]
    return argv if network else argv + ["--unshare-net"]


def _system_args() -> list[str]:
    """/usr and the top-level links or directories into it, and a few /etc files, read-only."""
    argv = ["--ro-bind", "/usr", "/usr"]
    for name in SYSTEM_LINKS:
        path = Path("/") / name
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    for name in ETC_FILES:
        argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return argv


def _scratch_args(tmp_mb: int) -> list[str]:
    """/proc, /dev, and RAM-backed /tmp and /dev/shm of ``tmp_mb`` each, writable by all."""
    size = str(int(tmp_mb) * MiB)
    argv = ["--proc", "/proc", "--dev", "/dev"]
    for scratch in ("/tmp", "/dev/shm"):
        argv += ["--size", size, "--perms", "1777", "--tmpfs", scratch]
    return argv


def _interpreter_args() -> list[str]:
    """The Python installation (and a venv's) read-only, with the directories leading to it."""
    argv: list[str] = []
    created: set[str] = {"/tmp", "/dev", "/dev/shm", "/proc"}
    for real, destination in _python_mounts():
        for parent in reversed(Path(destination).parents[:-1]):  # e.g. /root, /root/.pyenv: the
            if str(parent) not in created:  # programs' uid must traverse them
                argv += ["--perms", "0755", "--dir", str(parent)]
                created.add(str(parent))
        argv += ["--ro-bind", real, destination]
        created.add(destination)
    return argv


def _server_env() -> dict[str, str]:
    """The environment of bwrap and the supervisor: nothing of the host's (no secrets)."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


def sandbox_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment programs see: a fixed minimal set plus ``extra`` (which wins)."""
    env = {
        "PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    env.update({str(k): str(v) for k, v in (extra or {}).items()})
    return env


@functools.lru_cache(maxsize=1)
def _server_source() -> str:
    return (Path(__file__).with_name("server.py")).read_text(encoding="utf-8")


# ----------------------------------------------------------------------------------------------
# one sandboxed server


def _sealed_memfd(name: str, data: bytes) -> int:
    """A read-only in-memory file holding ``data`` (sealed against writes where supported)."""
    flags = os.MFD_CLOEXEC | getattr(os, "MFD_ALLOW_SEALING", 0)
    fd = os.memfd_create(name, flags)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    seals = (
        getattr(fcntl, "F_SEAL_WRITE", 0)
        | getattr(fcntl, "F_SEAL_GROW", 0)
        | getattr(fcntl, "F_SEAL_SHRINK", 0)
        | getattr(fcntl, "F_SEAL_SEAL", 0)
    )
    if seals and hasattr(fcntl, "F_ADD_SEALS"):
        try:
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
        except OSError:
            pass
    return fd


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class _Feed:
    """The host's end of a run's stdin pipe: written as the program reads, closed at the end
    of the data (the program then reads end of file) or of the run."""

    def __init__(self, fd: int | None, data: bytes) -> None:
        self.fd, self._left, self._polled = fd, memoryview(data), False

    def register(self, poller: select.poll) -> None:
        if self.fd is not None and self._left:
            poller.register(self.fd, select.POLLOUT)
            self._polled = True
        else:
            self.close(None)

    def write(self, poller: select.poll) -> None:
        try:
            self._left = self._left[os.write(self.fd, self._left[: 1 << 16]) :]
        except BlockingIOError:
            return
        except OSError:  # the program closed its stdin (or exited) without reading it all
            self._left = memoryview(b"")
        if not self._left:
            self.close(poller)

    def close(self, poller: select.poll | None) -> None:
        if self.fd is None:
            return
        if poller is not None and self._polled:
            poller.unregister(self.fd)
        os.close(self.fd)
        self.fd = None


class _Steps:
    """The host's view of a run made of steps (``run_python(result_lines=...)``): step ``i``
    ends with its ``counts[i]``-th line on the result channel, within ``step_s`` of the step
    before; the lines seen so far."""

    def __init__(self, counts: Sequence[int], step_s: float, on_line: Callable[[bytes], bool] | None) -> None:
        self.ends = list(itertools.accumulate(counts))  # the line that ends each step
        self.step_s, self.on_line = step_s, on_line
        self.deadline = time.monotonic() + step_s
        self.seen = self._scanned = 0
        self.error: Exception | None = None

    def take(self, buffer: bytearray) -> bool:
        """Consume the complete lines of ``buffer`` not seen yet; True when the run should stop
        (the last line is in, or ``on_line`` asked for it)."""
        while self.seen < self.ends[-1]:
            end = buffer.find(b"\n", self._scanned)
            if end < 0:
                return False
            line, self._scanned = bytes(buffer[self._scanned : end]), end + 1
            self.seen += 1
            if self.seen in self.ends:
                self.deadline = time.monotonic() + self.step_s
            try:
                if self.on_line is not None and self.on_line(line):
                    return True
            except Exception as error:  # noqa: BLE001 - raised again once the run is over
                self.error = error
                return True
        return True


_USERNS_HELPER = r"""
import ctypes, sys
if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0:   # CLONE_NEWUSER
    sys.exit("unshare(CLONE_NEWUSER) failed: errno %d" % ctypes.get_errno())
sys.stdout.write("unshared\n"); sys.stdout.flush()
sys.stdin.readline()                       # the host has written the uid / gid maps
with open("/proc/sys/user/max_user_namespaces", "w") as limit:
    limit.write("0")                       # no nested user namespaces inside the sandbox
sys.stdout.write("ready\n"); sys.stdout.flush()
sys.stdin.read()                           # hold the namespace until the host lets go
"""


class _UserNamespace:
    """The sandbox's user namespace, made by a small helper process (``unshare(CLONE_NEWUSER)``;
    the host writes the maps; no user namespace can be made inside it), which lives on in the
    sandbox after :meth:`close`. With ``separate`` (hosts that run as root) it maps uid/gid 0
    to 0 and ``SANDBOX_UID`` to itself: programs then run under a non-root kernel uid, so
    RLIMIT_NPROC applies to them (the kernel exempts real uid 0), and they cannot signal the
    supervisor. Else it maps ``SANDBOX_UID`` to this process's uid and gid, as bwrap's own
    namespace would, but one the supervisor has capabilities in (bwrap nests a second
    namespace for ``--disable-userns`` and for any uid but 0, leaving it none over the
    sandbox's mounts and /proc)."""

    def __init__(self, separate: bool) -> None:
        self._helper = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _USERNS_HELPER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd="/",
            env=_server_env(),
        )
        self.fd = -1
        try:
            self._expect("unshared")
            for name, mapping in self._maps(separate):
                with open(f"/proc/{self._helper.pid}/{name}", "w") as handle:
                    handle.write(mapping)
            self._helper.stdin.write(b"go\n")
            self._helper.stdin.flush()
            self._expect("ready")
            self.fd = os.open(f"/proc/{self._helper.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        except (OSError, SandboxError) as error:
            self.close()
            raise SandboxError(f"cannot make the sandbox user namespace: {error}") from None

    @staticmethod
    def _maps(separate: bool) -> list[tuple[str, str]]:
        """What the host writes to the helper's /proc files, in order."""
        if separate:
            both = f"0 0 1\n{SANDBOX_UID} {SANDBOX_UID} 1\n"
            return [("uid_map", both), ("gid_map", both)]
        uid, gid = f"{SANDBOX_UID} {os.getuid()} 1\n", f"{SANDBOX_UID} {os.getgid()} 1\n"
        return [("uid_map", uid), ("setgroups", "deny"), ("gid_map", gid)]

    def _expect(self, word: str) -> None:
        ready, _, _ = select.select([self._helper.stdout], [], [], STARTUP_TIMEOUT_S)
        line = self._helper.stdout.readline().decode().strip() if ready else ""
        if line != word:
            detail = self._helper.stderr.read().decode(errors="replace") if line == "" else line
            raise SandboxError(f"helper said {detail.strip()[-300:]!r}, expected {word!r}")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self._helper.poll() is None:
            self._helper.kill()
        self._helper.communicate()


def _separate_uids_possible() -> bool:
    """Programs can run under their own uid when the host is root (and it worked before)."""
    return os.geteuid() == 0 and not _separate_uids_failed.is_set()


_separate_uids_failed = threading.Event()
#: no user namespace of the project's own could be made where programs share the supervisor's
#: uid (unprivileged user namespaces off, a setuid bwrap): runs then cannot get namespaces of
#: their own
_userns_failed = threading.Event()
_renewal_said = threading.Event()


class SandboxServer:
    """One sandbox (bwrap + supervisor) that runs programs one at a time. Not thread-safe:
    use one per thread (the pool does). It dies with the thread that started it (bwrap's
    ``--die-with-parent`` follows the creating thread), so start it in the thread that uses it.
    ``separate_uids`` says whether programs run under their own uid (root hosts, no workdir);
    ``features`` what the sandbox could set up (:data:`FEATURES`: the same pid numbers for
    every run, a cgroup, the seccomp filter, namespaces and scratch file systems of each run's
    own; see the package docstring for what each gives). Where runs cannot get namespaces of
    their own, a pooled server starts a new sandbox after every run instead (``renewals``
    counts them), so that no run ever finds what an earlier one left."""

    def __init__(
        self,
        *,
        limits: Limits = DEFAULT_LIMITS,
        workdir: Path | None = None,
        writable_workdir: bool = True,
        network: bool = False,
        mode: str | None = None,
    ) -> None:
        self.mode = mode or isolation()
        self.workdir = Path(workdir) if workdir is not None else None
        self.network = network
        self.renewals = 0
        self._start_options = (limits, writable_workdir)
        identities = self._identities()
        for index, (separate, capable) in enumerate(identities):
            try:
                self._start(limits, writable_workdir, separate, capable)
                break
            except SandboxError as error:
                if index == len(identities) - 1:
                    raise
                failed = "programs share the supervisor's uid" if separate else "the supervisor gets no capabilities"
                logger.info("sandbox: %s (%s)", failed, error)
                (_separate_uids_failed if separate else _userns_failed).set()
        self._renew_each_run = self.mode == "bwrap" and self.workdir is None and not self.features["fresh_runs"]
        self._used = False  # a run went through this sandbox (which then needs renewing, above)
        if self._renew_each_run and not _renewal_said.is_set():
            _renewal_said.set()
            logger.warning(
                "sandbox: runs cannot get namespaces of their own here (%s); every run starts a new sandbox "
                "instead (slower)",
                self._stderr_tail() or "no reason given",
            )

    def _identities(self) -> list[tuple[bool, bool]]:
        """The (programs under their own uid, supervisor with capabilities) ways to start this
        sandbox, best first, leaving out those that failed before in this process."""
        if self.mode != "bwrap":
            return [(False, False)]
        ways = []
        if self.workdir is None and _separate_uids_possible():
            ways.append((True, True))
        if not _userns_failed.is_set():
            ways.append((False, True))
        return ways + [(False, False)]

    def _renew(self) -> None:
        """Start a new sandbox in place of this one (where runs cannot get namespaces of their own)."""
        self.renewals += 1
        self._used = False
        self.close()
        self._start(*self._start_options, self.separate_uids, self.capable)

    def _start(self, limits: Limits, writable_workdir: bool, separate: bool, capable: bool) -> None:
        """Start bwrap and the supervisor; wait for its hello."""
        namespace = _UserNamespace(separate) if capable else None  # may raise: nothing to undo yet
        host_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = host_end
        self._stderr = tempfile.TemporaryFile()
        self._cgroup = cgroups.sandbox_cgroup()
        self.separate_uids, self.capable = separate, capable
        cgroup_fds = self._cgroup.fds if self._cgroup else {}
        cgroup_config = {"version": self._cgroup.version, "fds": cgroup_fds} if self._cgroup else {}
        config = json.dumps(
            {
                "socket_fd": server_end.fileno(),
                "isolated": self.mode == "bwrap",
                "pooled": self.workdir is None,
                "network": self.network,
                "tmp_mb": limits.tmp_mb,
                "run_uid": SANDBOX_UID if separate else None,
                "capable": capable,
                "reset_pids": capable and self.workdir is None,
                "tmp_roots": [root for root in _python_roots() if root.startswith(("/tmp/", "/dev/shm/"))],
                "cgroup": cgroup_config,
                "seccomp": seccomp.server_config(),
            }
        )
        argv = [sys.executable, "-I", "-c", _server_source(), config]
        if self.mode == "bwrap":
            argv = (
                bwrap_argv(
                    limits,
                    workdir=self.workdir,
                    writable_workdir=writable_workdir,
                    network=self.network,
                    userns_fd=namespace.fd if namespace else None,
                    separate=separate,
                )
                + argv
            )
        inherited = (server_end.fileno(), *cgroup_fds.values()) + ((namespace.fd,) if namespace else ())
        try:
            self._process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._stderr,
                pass_fds=inherited,
                cwd="/",
                env=_server_env(),
                start_new_session=True,
            )
        except OSError as error:
            host_end.close()
            self._close_cgroup()
            if namespace is not None:
                namespace.close()
            raise SandboxError(f"cannot start the sandbox: {error}") from None
        finally:
            server_end.close()
        try:
            hello = self._receive(time.monotonic() + STARTUP_TIMEOUT_S)
        finally:
            if namespace is not None:
                namespace.close()  # the sandbox's processes keep the namespace alive
        if not (hello and hello.get("ready")):
            reason = self._stderr_tail()
            self.close()
            raise SandboxError(f"sandbox server did not start: {reason}")
        self.features = {name: bool(hello.get(name)) for name in FEATURES}

    # -- lifecycle

    @property
    def alive(self) -> bool:
        return self._process.poll() is None and self._sock.fileno() >= 0

    def close(self) -> None:
        """Stop the server and everything in its sandbox."""
        if self._sock.fileno() >= 0:
            self._sock.close()  # the supervisor exits at end of file
        try:
            self._process.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            self._kill()
        self._stderr.close()
        self._close_cgroup()

    def _close_cgroup(self) -> None:
        if self._cgroup is not None:
            self._cgroup.close()
            self._cgroup = None

    def _kill(self) -> None:
        try:
            os.killpg(self._process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._process.wait()
        if self._sock.fileno() >= 0:
            self._sock.close()

    def __enter__(self) -> SandboxServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _stderr_tail(self) -> str:
        try:
            self._stderr.seek(0)
            return self._stderr.read()[-2000:].decode(errors="replace").strip()
        except (OSError, ValueError):
            return ""

    # -- running programs

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes = b"",
        limits: Limits = DEFAULT_LIMITS,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> RunResult:
        """Run ``argv`` (PATH is searched inside the sandbox) with ``stdin`` and ``limits``."""
        if isinstance(argv, (str, bytes)) or not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError(f"argv must be a non-empty list of strings, got {argv!r}")
        request = {"argv": list(argv), "cwd": str(cwd or self.workdir or "/tmp")}
        return self._execute(request, stdin, limits, env)

    def run_python(
        self,
        source: str,
        *,
        stdin: bytes = b"",
        limits: Limits = DEFAULT_LIMITS,
        env: Mapping[str, str] | None = None,
        filename: str = "main.py",
        recursion_limit: int | None = None,
        int_max_str_digits: int | None = None,
        result_channel: bool = False,
        tester: str | None = None,
        result_lines: int | Sequence[int] | None = None,
        on_line: Callable[[bytes], bool] | None = None,
    ) -> RunResult:
        """Run Python ``source`` as ``__main__`` in a fork of the sandboxed interpreter (no
        interpreter start-up). ``recursion_limit`` / ``int_max_str_digits`` are set first;
        with ``result_channel`` (implied by the two options below) the program may write to
        fd 3, returned as ``result``.

        ``tester``: the Python source of a second process of the run, the *tester*, which
        alone holds the result channel (its fd 3) and talks to the program through a stream
        socket (the tester's fd 4, the program's fd 3); the run ends when the tester exits.
        The tester runs under the same limits and uid as the program but is never dumpable, so
        the program cannot read its memory or file descriptors through /proc (package docstring).

        ``result_lines``: the run is that many steps, each ending with a line (``\\n``) on the
        result channel, or a list of how many lines end each step; each step gets
        ``limits.time_s`` of wall time from the end of the one before (the run as a whole: as
        many times the time and CPU limits as it has steps); a step over its time stops the
        run (``limit="time"``). ``on_line`` is called with each line as it
        arrives (without the newline) and returns True to stop the run there; the run also
        stops when the last expected line has arrived (neither is a limit: ``limit`` stays None).
        """
        if not isinstance(source, str) or not isinstance(tester, (str, type(None))):
            raise TypeError("source (and tester) must be str")
        counts = [1] * result_lines if _positive_int(result_lines) else list(result_lines or ())
        if result_lines is not None and not (counts and all(_positive_int(count) for count in counts)):
            raise ValueError(f"result_lines must be a positive integer or a list of them, got {result_lines!r}")
        request = {
            "python": True,
            "cwd": str(self.workdir or "/tmp"),
            "python_options": {
                "filename": filename,
                "recursion_limit": recursion_limit,
                "int_max_str_digits": int_max_str_digits,
                "result_fd": result_channel or tester is not None or result_lines is not None,
                "tester": tester is not None,
            },
        }
        sources = [source] + ([tester] if tester is not None else [])
        steps = _Steps(counts, limits.time_s, on_line) if result_lines is not None else None
        if steps is not None:
            cpu = limits.effective_cpu_s * len(counts)
            limits = replace(limits, time_s=limits.time_s * len(counts), cpu_s=cpu)
        return self._execute(
            request, stdin, limits, env, [text.encode("utf-8", "surrogateescape") for text in sources], steps
        )

    def _execute(
        self,
        request: dict,
        stdin: bytes,
        limits: Limits,
        env: Mapping | None,
        sources: Sequence[bytes] = (),
        steps: _Steps | None = None,
    ) -> RunResult:
        if not isinstance(stdin, (bytes, bytearray, memoryview)):
            raise TypeError(f"stdin must be bytes, got {type(stdin).__name__}")
        if self._renew_each_run and self._used:
            self._renew()  # (before the run, so that a failure to start is this run's, not the last one's)
        if not self.alive:
            raise SandboxError("sandbox server is not running")
        self._used = True
        request = {**request, "env": sandbox_env(env), "limits": limits.for_server()}
        result_channel = bool((request.get("python_options") or {}).get("result_fd"))
        mine: list[int] = []  # read ends we keep
        theirs: list[int] = []  # fds handed to the server
        feed = None  # the write end of the program's stdin, a pipe: read once, never rewound
        try:
            theirs.append(_sealed_memfd("request", json.dumps(request).encode()))
            stdin_read, feed = os.pipe()
            theirs.append(stdin_read)
            os.set_blocking(feed, False)
            names = ["stdout", "stderr"] + (["result"] if result_channel else [])
            for _ in names:
                read_end, write_end = os.pipe()
                mine.append(read_end)
                theirs.append(write_end)
            theirs += [_sealed_memfd(f"source{i}", source) for i, source in enumerate(sources)]
            self._sock.sendmsg([b'{"op": "run"}'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array("i", theirs))])
        except OSError as error:
            for fd in mine + ([feed] if feed is not None else []):
                os.close(fd)
            self._kill()
            return _failed(f"cannot send the run to the sandbox: {error}")
        finally:
            for fd in theirs:
                os.close(fd)
        return self._collect(dict(zip(mine, names)), limits, _Feed(feed, bytes(stdin)), steps)

    def _collect(self, pipes: dict[int, str], limits: Limits, feed: _Feed, steps: _Steps | None) -> RunResult:
        """Write stdin and read the pipes (capped) until the server reports the end of the run;
        with ``steps``, follow the result channel line by line (see :meth:`run_python`)."""
        captured = {name: bytearray() for name in pipes.values()}
        poller = select.poll()
        for fd in pipes:
            poller.register(fd, select.POLLIN)
        poller.register(self._sock.fileno(), select.POLLIN)
        feed.register(poller)
        status: dict | None = None
        truncated, stopping = False, None
        deadline = time.monotonic() + limits.time_s + HOST_GRACE_S
        try:
            while pipes or status is None:
                now = time.monotonic()
                if steps is not None and status is None and stopping is None and now >= steps.deadline:
                    stopping = "time"
                    self._send({"op": "kill", "reason": "time"})
                if now >= deadline:
                    if status is None:
                        self._kill()
                        return _failed(
                            "sandbox server did not answer in time",
                            captured,
                            truncated,
                            timed_out=True,
                            seconds=limits.time_s,
                        )
                    break  # pipes still open: a process escaped (rlimits-only mode)
                wake = deadline if steps is None or stopping else min(deadline, steps.deadline)
                for fd, _ in poller.poll(max(0.0, wake - now) * 1000):
                    if fd == feed.fd:
                        feed.write(poller)
                        continue
                    if fd == self._sock.fileno():
                        status = self._receive(deadline)
                        poller.unregister(fd)
                        if status is None:
                            self._kill()
                            return _failed(f"sandbox server died: {self._stderr_tail()}", captured, truncated)
                        feed.close(poller)
                        deadline = min(deadline, time.monotonic() + DRAIN_S)
                        continue
                    if fd not in pipes:  # the stdin pipe, closed earlier in this round
                        continue
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        poller.unregister(fd)
                        os.close(fd)
                        del pipes[fd]
                        continue
                    buffer = captured[pipes[fd]]
                    room = limits.output_bytes - len(buffer)
                    buffer += chunk[: max(room, 0)]
                    if len(chunk) > room and not truncated:
                        truncated = True
                        self._send({"op": "kill", "reason": "output"})
                    if steps is not None and pipes[fd] == "result" and stopping is None and steps.take(buffer):
                        stopping = "done"
                        self._send({"op": "kill", "reason": "done"})
        finally:
            for fd in pipes:
                os.close(fd)
            feed.close(None)
        if status.get("limit") == "done":  # stopped by the host once its lines were in: no limit
            status["limit"] = None
        if steps is not None and steps.error is not None:
            raise steps.error
        return _result(status, captured, truncated)

    def _send(self, message: dict) -> None:
        try:
            self._sock.send(json.dumps(message).encode())
        except OSError:
            pass

    def _receive(self, deadline: float) -> dict | None:
        """The next message from the server, or None (end of file, or nothing by ``deadline``)."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self._sock], [], [], remaining)
            if not ready:
                return None
            try:
                data = self._sock.recv(1 << 16)
            except OSError as error:
                if error.errno == errno.EINTR:
                    continue
                return None
            return json.loads(data) if data else None


def _failed(
    reason: str,
    captured: Mapping[str, bytearray] | None = None,
    truncated: bool = False,
    *,
    timed_out: bool = False,
    seconds: float = 0.0,
) -> RunResult:
    captured = captured or {}
    return RunResult(
        None,
        bytes(captured.get("stdout", b"")),
        bytes(captured.get("stderr", b"")),
        timed_out,
        truncated,
        seconds,
        None,
        "time" if timed_out else None,
        reason,
        bytes(captured.get("result", b"")),
    )


def _result(status: dict, captured: Mapping[str, bytearray], truncated: bool) -> RunResult:
    if status.get("error"):
        return _failed(f"sandbox: {status['error']}", captured, truncated)
    signal_number = status.get("signal")
    limit = status.get("limit")
    if limit is None and signal_number == signal.SIGXCPU:
        limit = "cpu"
    elif limit is None and signal_number == signal.SIGXFSZ:
        limit = "file_size"
    return RunResult(
        returncode=status.get("returncode"),
        stdout=bytes(captured.get("stdout", b"")),
        stderr=bytes(captured.get("stderr", b"")),
        timed_out=bool(status.get("timed_out")) or limit == "time",
        output_truncated=truncated,
        seconds=float(status.get("seconds", 0.0)),
        killed_by_signal=signal_number,
        limit=limit,
        result=bytes(captured.get("result", b"")),
    )


# ----------------------------------------------------------------------------------------------
# one-shot helpers


def run(
    argv: list[str],
    *,
    stdin: bytes = b"",
    limits: Limits = DEFAULT_LIMITS,
    workdir: Path | None = None,
    writable_workdir: bool = True,
    env: dict | None = None,
    network: bool = False,
) -> RunResult:
    """Run ``argv`` once in a fresh sandbox; ``workdir`` is bound at its own path (read-write
    unless ``writable_workdir=False``) and is the working directory. See the package
    docstring for the isolation and :class:`Limits` for the limits."""
    with SandboxServer(limits=limits, workdir=workdir, writable_workdir=writable_workdir, network=network) as server:
        return server.run(argv, stdin=stdin, limits=limits, env=env)


def run_python(
    source: str, *, stdin: bytes = b"", limits: Limits = DEFAULT_LIMITS, env: dict | None = None, **options
) -> RunResult:
    """Run Python ``source`` once in a fresh sandbox (see :meth:`SandboxServer.run_python`)."""
    with SandboxServer(limits=limits) as server:
        return server.run_python(source, stdin=stdin, limits=limits, env=env, **options)


__all__ = [
    "DEFAULT_LIMITS",
    "IsolationUnavailable",
    "Limits",
    "RunResult",
    "SandboxError",
    "SandboxServer",
    "allow_rlimits_only",
    "available",
    "bwrap_argv",
    "isolation",
    "isolation_report",
    "run",
    "run_python",
    "sandbox_env",
]
