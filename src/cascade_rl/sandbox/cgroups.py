"""Control groups for sandboxes: memory and process count of a run's whole process tree,
enforced by the kernel (SPEC section 6; the package docstring says what holds without).

Each :class:`~cascade_rl.sandbox.core.SandboxServer` gets one group per controller, made
below this process's own group (so whatever limits the host already has still apply), named
``cascade-sandbox-<host pid>/<n>``, with two groups inside: ``server`` (the supervisor, no
limit) and ``run`` (the run's processes, with the run's limits). The supervisor is kept out
of the limited group because what a run leaves behind stays charged after its processes are
gone (files in the RAM-backed /tmp until they are freed): in the same group, the supervisor's next
page could meet the run's limit with nothing left to kill but the supervisor. The host opens
the groups' files and hands the open file descriptors to the supervisor (``config["cgroup"]``:
``version`` and role -> fd); the supervisor never sees ``/sys``. It joins ``server`` once it
has started, and each run's first process joins ``run`` before anything else (writing ``0`` to
``cgroup.procs``; the kernel checks the permissions of whoever opened that file: the host;
measured: 0.06 ms a fork), so everything the run forks is born there; before each run the
supervisor writes the run's limits and notes the OOM kill counter. Roles:

==============  =========================================  ==========================
role            cgroup v1                                  cgroup v2
==============  =========================================  ==========================
join:*          ``server/cgroup.procs`` of each hierarchy  ``server/cgroup.procs``
procs:*         ``run/cgroup.procs`` of each hierarchy     ``run/cgroup.procs``
memory_limit    ``run/memory.limit_in_bytes``              ``run/memory.max``
swap_limit      ``run/memory.memsw.limit_in_bytes``        (``memory.swap.max`` = 0)
oom_events      ``run/memory.oom_control``                 ``run/memory.events``
pids_limit      ``run/pids.max``                           ``run/pids.max``
==============  =========================================  ==========================

Memory is charged to the group for every page the run's processes allocate, including
memfds, System V and POSIX shared memory, tmpfs files (/tmp and /dev/shm) and kernel memory;
at the limit the kernel reclaims, then kills (an ``oom_kill`` the supervisor reports as
``limit="memory"``; the supervisor is not in the group, and programs run with the highest
``oom_score_adj`` besides). cgroup v1 is used where the memory controller is mounted as a v1
hierarchy (pids is used when mounted too); cgroup v2 where this process's group delegates
``memory`` and ``pids`` (``cgroup.subtree_control``; e.g. a systemd unit with
``Delegate=yes``, or a container's own cgroup namespace). Creating groups needs write access
there (root, or a delegated subtree). ``CASCADE_SANDBOX_CGROUPS=off`` disables them.
"""

from __future__ import annotations

import atexit
import errno
import functools
import itertools
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger("cascade_rl.sandbox")

CGROUPS_ENV = "CASCADE_SANDBOX_CGROUPS"
PREFIX = "cascade-sandbox-"
V1_CONTROLLERS = ("memory", "pids")  # memory is required, pids is used when mounted
V1_FILES = {
    "memory": {"memory_limit": "memory.limit_in_bytes", "swap_limit": "memory.memsw.limit_in_bytes"},
    "pids": {"pids_limit": "pids.max"},
}
V1_READ = {"memory": {"oom_events": "memory.oom_control"}}
V2_FILES = {"memory_limit": "memory.max", "pids_limit": "pids.max"}
V2_READ = {"oom_events": "memory.events"}
V2_ONCE = {"memory.swap.max": "0", "memory.oom.group": "1"}
RMDIR_WAIT_S = 2.0


@dataclass(frozen=True)
class Layout:
    """Where this process's sandbox groups go: ``version`` and {controller: parent directory}
    (v2: one entry, ``"unified"``)."""

    version: str
    parents: dict[str, Path] = field(default_factory=dict)


def _mountinfo() -> list[tuple[str, str, str, set[str]]]:
    """(mount point, root inside the filesystem, type, super options) of every mount."""
    mounts = []
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            before, _, after = line.partition(" - ")
            fields, tail = before.split(), after.split()
            if len(fields) >= 5 and len(tail) >= 3:
                mounts.append((fields[4], fields[3], tail[0], set(tail[2].split(","))))
    return mounts


def _own_groups() -> dict[str, str]:
    """{controller: this process's group path}; the v2 group under the key ``""``."""
    groups = {}
    with open("/proc/self/cgroup", encoding="utf-8") as handle:
        for line in handle:
            parts = line.rstrip("\n").split(":", 2)
            if len(parts) == 3:
                for controller in parts[1].split(",") if parts[1] else [""]:
                    groups[controller] = parts[2]
    return groups


def _inside(mount_point: str, root: str, group: str) -> Path | None:
    """The directory of ``group`` in a cgroup filesystem mounted at ``mount_point`` whose
    root is ``root``, or None when the group lies outside what that mount shows."""
    relative = os.path.relpath(group, root)
    if relative.startswith(".."):
        return None
    return Path(mount_point) / ("" if relative == "." else relative)


def _v1_parents() -> dict[str, Path]:
    own, parents = _own_groups(), {}
    for mount_point, root, kind, options in _mountinfo():
        if kind != "cgroup":
            continue
        for controller in V1_CONTROLLERS:
            if controller in options and controller in own and controller not in parents:
                directory = _inside(mount_point, root, own[controller])
                if directory is not None and directory.is_dir():
                    parents[controller] = directory
    return parents


def _v2_parent() -> Path | None:
    own = _own_groups().get("")
    if own is None:
        return None
    for mount_point, root, kind, _ in _mountinfo():
        if kind == "cgroup2":
            directory = _inside(mount_point, root, own)
            if directory is not None and directory.is_dir():
                return directory
    return None


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _make_parent(directory: Path) -> Path:
    """This process's ``cascade-sandbox-<pid>`` below ``directory`` (stale ones of dead
    processes are removed first)."""
    for stale in directory.glob(f"{PREFIX}*"):
        pid = stale.name[len(PREFIX) :]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            _remove_tree(stale)
    parent = directory / f"{PREFIX}{os.getpid()}"
    parent.mkdir(exist_ok=True)
    return parent


def _enable_v2_controllers(directory: Path) -> None:
    """Make ``memory`` and ``pids`` available to the groups below ``directory``."""
    wanted = {"memory", "pids"}
    if not wanted <= set((directory / "cgroup.controllers").read_text().split()):
        raise OSError(errno.ENOTSUP, f"{directory} does not offer the memory and pids controllers")
    enabled = set((directory / "cgroup.subtree_control").read_text().split())
    if not wanted <= enabled:
        _write(directory / "cgroup.subtree_control", " ".join(f"+{name}" for name in sorted(wanted - enabled)))


def _detect() -> Layout:
    """The layout here, or raise OSError saying why cgroups cannot be used."""
    if os.environ.get(CGROUPS_ENV, "").strip().lower() in ("off", "0", "no", "false"):
        raise OSError(errno.EPERM, f"{CGROUPS_ENV} turns them off")
    v1 = _v1_parents()
    if "memory" in v1:
        return Layout("v1", {controller: _make_parent(directory) for controller, directory in v1.items()})
    directory = _v2_parent()
    if directory is None:
        raise OSError(errno.ENOENT, "no cgroup v1 memory hierarchy and no cgroup2 mount showing this process's group")
    _enable_v2_controllers(directory)  # delegated to us, or fails (a group with processes cannot delegate)
    parent = _make_parent(directory)
    _enable_v2_controllers(parent)
    return Layout("v2", {"unified": parent})


_detect_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def _layout_or_reason() -> Layout | str:
    try:
        found = _detect()
    except OSError as error:
        reason = f"cgroups unavailable ({error.strerror or error})"
        logger.info("sandbox: %s; limits fall back to rlimits and the supervisor's watchdog", reason)
        return reason
    return found


def layout() -> Layout | None:
    """The cgroup layout sandboxes use here, or None (the reason is logged once)."""
    with _detect_lock:  # sandboxes start in many threads at once: detect (and log) once
        found = _layout_or_reason()
    return found if isinstance(found, Layout) else None


layout.cache_clear = _layout_or_reason.cache_clear  # type: ignore[attr-defined]


def _remove_tree(directory: Path) -> None:
    """rmdir ``directory`` and the groups below it (waiting briefly for exiting processes)."""
    try:
        children = sorted(path for path in directory.iterdir() if path.is_dir())
    except OSError:
        children = []
    for child in children:
        _remove_tree(child)
    deadline = time.monotonic() + RMDIR_WAIT_S
    while True:
        try:
            directory.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as error:
            if error.errno != errno.EBUSY or time.monotonic() > deadline:
                logger.info("sandbox: cannot remove cgroup %s (%s)", directory, error)
                return
            time.sleep(0.01)


@atexit.register  # registered at import, so it runs after the pools (started later) closed
def _remove_parents() -> None:
    found = _layout_or_reason() if _layout_or_reason.cache_info().currsize else None
    if isinstance(found, Layout):
        for parent in found.parents.values():
            _remove_tree(parent)


_counter = itertools.count()
_counter_lock = threading.Lock()


class SandboxCgroup:
    """The groups of one sandbox and their open files (``fds``: role -> fd, for the
    supervisor). :meth:`close` closes the files and removes the groups."""

    def __init__(self, found: Layout) -> None:
        with _counter_lock:
            name = str(next(_counter))
        self.version = found.version
        self.directories: list[Path] = []
        self.fds: dict[str, int] = {}
        try:
            for controller, parent in found.parents.items():
                directory = parent / name
                directory.mkdir()
                self.directories.append(directory)
                if self.version == "v2":
                    _enable_v2_controllers(directory)  # v2: processes live in leaves only
                for leaf in ("server", "run"):
                    (directory / leaf).mkdir()
                self._open(controller, directory)
        except OSError:
            self.close()
            raise

    def _open(self, controller: str, directory: Path) -> None:
        run = directory / "run"
        suffix = "" if self.version == "v2" else f":{controller}"
        if self.version == "v2":
            for name, value in V2_ONCE.items():
                try:
                    _write(run / name, value)
                except OSError:
                    pass  # no swap accounting, or an older kernel without oom.group
            writable, readable = V2_FILES, V2_READ
        else:
            writable, readable = V1_FILES.get(controller, {}), V1_READ.get(controller, {})
        self.fds[f"join{suffix}"] = os.open(directory / "server" / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        self.fds[f"procs{suffix}"] = os.open(run / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        for flags, files in ((os.O_WRONLY, writable), (os.O_RDONLY, readable)):
            for role, filename in files.items():
                if (run / filename).exists():
                    self.fds[role] = os.open(run / filename, flags | os.O_CLOEXEC)

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}
        for directory in reversed(self.directories):
            _remove_tree(directory)
        self.directories = []


def sandbox_cgroup() -> SandboxCgroup | None:
    """Groups for a new sandbox, or None when cgroups are unavailable or cannot be made."""
    found = layout()
    if found is None:
        return None
    try:
        return SandboxCgroup(found)
    except OSError as error:
        logger.info("sandbox: cannot make a cgroup (%s); this sandbox runs without", error)
        return None
