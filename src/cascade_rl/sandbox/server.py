"""The supervisor that lives inside the sandbox and runs programs for the host (SPEC section 6).

Stdlib only and self-contained: :mod:`cascade_rl.sandbox.core` hands this file's source to the
sandboxed interpreter with ``python -I -c`` (the project directory is not visible inside), plus
one JSON argument (:data:`CONFIG_KEYS`): ``socket_fd``; ``isolated`` (in bubblewrap);
``pooled`` (runs one after another: each gets a fresh state, :class:`FreshRun`), ``network``
(the sandbox has the host's network: no network namespace per run), ``tmp_mb`` (the size of
each run's /tmp and /dev/shm); ``run_uid`` (the uid programs run as when the supervisor may
switch uids, see ``core._UserNamespace``); ``capable`` (the supervisor has the capabilities of
``core.FRESH_RUN_CAPABILITIES`` in the sandbox's user namespace, which programs never get);
``reset_pids`` (every run's processes get the same pid numbers); ``tmp_roots`` (the
interpreter's directories below /tmp or /dev/shm, bound again in each run's /tmp);
``cgroup`` (role -> file descriptor of the sandbox's control group, opened by the host, see
``cascade_rl.sandbox.cgroups``); ``seccomp`` (the BPF filter of ``cascade_rl.sandbox.seccomp``
as hex).

Protocol (a ``SOCK_SEQPACKET`` unix socket; one message = one small JSON object):

* server -> host at start: ``{"ready": true, "pid", "isolated", "fixed_pids", "fresh_runs",
  "cgroup", "seccomp"}`` (the last four: what this server could actually set up).
* host -> server: ``{"op": "run"}`` with file descriptors attached (SCM_RIGHTS), in this order:
  request (a memfd holding the JSON request: ``argv`` or ``python``, ``cwd``, ``env``,
  ``limits``, ``python_options``), the read end of the stdin pipe (the host writes it as the
  program reads: stdin is never a file the program could rewind), the write ends of the
  stdout and stderr pipes, then optionally the result pipe (``python_options.result_fd``), the
  program source (a memfd, python mode) and the tester's source (a memfd,
  ``python_options.tester``). The host writes and reads the pipes itself, so **program data
  never passes through this process's memory**: a later program forked from this server
  cannot find an earlier program's input, output or source in the memory it inherits.
* host -> server while a run is going: ``{"op": "kill", "reason": ...}`` (e.g. output cap hit,
  ``time`` for a step over its time, ``done`` when the host has the lines it waited for).
* server -> host when the run is over: ``{"returncode", "signal", "timed_out", "limit",
  "seconds", "error"}``; by then every process of the run is dead.

One child per run: ``fork`` (with ``reset_pids`` the pid numbering of the sandbox's pid
namespace is reset first, through ``ns_last_pid``, so the program is pid 100 and its children
101, 102, ... in every run, whatever earlier runs forked), then in the child: new session, the
sandbox's cgroup, in a pooled sandbox the run's own namespaces and scratch file systems
(:class:`FreshRun`: their descriptors go to the supervisor, which counts what they store),
rlimits, fds 0/1/2 (and the result fd) in place, the programs' uid or no capability, the
seccomp filter; then either ``execvpe(argv)`` or, in *python mode*, the program is executed
by the forked interpreter itself as a fresh ``__main__`` with the standard streams CPython
would make (no interpreter start-up per run, the fast path of the code reward). A run with a
*tester* forks two (:meth:`Server.spawn_pair`): the program, whose fd 3 is one end of a stream
socket, and the tester, a python-mode process with the result pipe as fd 3, the socket's other
end as fd 4 and an empty stdin, which stays undumpable, so that the program cannot open its
memory or file descriptors through /proc even under the same uid; the run waits for the
tester, and the program ends with it.

The server is the sandbox's init (bwrap ``--as-pid-1``: no program's signal reaches it), a
child subreaper and not dumpable (same-uid programs cannot ptrace it or open its file
descriptors through /proc, and with :func:`hide_other_processes` they do not see it at all).
Its watchdog (every tick) ends a run over its wall time, process count, memory (resident memory
of the tree plus the files in the run's /tmp and /dev/shm; with a cgroup also any OOM kill) or
CPU time (of the whole tree: the cgroup's counter, else the sum over /proc of every process's
own and reaped children's time). At the end it kills every descendant and reaps them; the
run's namespaces and scratch file systems go with them: nothing is wiped, nothing is left.

**Why one file of about 1,000 lines** (DESIGN.md: files over ~500 lines say why): the host
hands this file's source to the sandboxed interpreter (``python -I -c``), which cannot import
the project or anything outside the standard library; the supervisor has to be one
self-contained file. Its sections (process table, cgroup, a fresh state per run, limits, the
child, the server loop, start-up) are marked by comment rules.
"""

import array
import fcntl
import json
import os
import resource
import select
import signal
import socket
import sys
import time
from os import _exit as hard_exit  # bound now: a program may replace os._exit

CONFIG_KEYS = (
    "socket_fd",
    "isolated",
    "pooled",
    "network",
    "tmp_mb",
    "run_uid",
    "capable",
    "reset_pids",
    "tmp_roots",
    "cgroup",
    "seccomp",
)
MiB = 1024 * 1024
TICK_ISOLATED_S = 0.02  # process / memory watchdog period inside a pid namespace (cheap /proc)
TICK_HOST_S = 0.1  # ... when /proc lists every process on the host (rlimits-only mode)
MAX_FDS_PER_MESSAGE = 8
SCRATCH = ("/tmp", "/dev/shm")
FIRST_PID = 100  # with reset_pids, every run's first process has this pid (init is 1, the server 2)
LAST_PID_FILE = "/proc/sys/kernel/ns_last_pid"
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
SECCOMP_MODE_FILTER = 2
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_SPEC_ALLOW = 1, 4
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET = 0x00020000, 0x08000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
SIOCSIFFLAGS, IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x8914, 0x1, 0x8, 0x40


# ----------------------------------------------------------------------------------------------
# process table helpers (work in both modes: inside the pid namespace /proc is small)


def process_table():
    """{pid: (parent pid, CPU clock ticks of the process and its reaped children, zombie)} of
    every process visible in /proc (vanishing ones are skipped)."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat_line = handle.read()
        except OSError:
            continue
        fields = stat_line[stat_line.rfind(b")") + 2 :].split()
        if len(fields) > 14:  # state, ppid, ... utime, stime, cutime, cstime at 11-14
            table[int(name)] = (int(fields[1]), sum(int(f) for f in fields[11:15]), fields[0] == b"Z")
    return table


def descendants(root, table=None, zombies=False):
    """Pids of the processes below ``root`` (children, grandchildren, ...); zombies (which
    hold no resources) only when asked for."""
    table = process_table() if table is None else table
    children = {}
    for pid, (parent, _, zombie) in table.items():
        if zombies or not zombie:
            children.setdefault(parent, []).append(pid)
    found, stack = [], list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def resident_bytes(pids):
    """Total resident memory of ``pids`` (shared pages counted once per process: an upper bound)."""
    total, page = 0, os.sysconf("SC_PAGE_SIZE")
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", "rb") as handle:
                total += int(handle.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
    return total


def tmpfs_bytes(directories):
    """Bytes stored in the RAM-backed file systems at ``directories`` (paths or open file
    descriptors)."""
    total = 0
    for directory in directories:
        try:
            info = os.statvfs(directory)
        except OSError:
            continue
        total += (info.f_blocks - info.f_bfree) * info.f_frsize
    return total


def reap_all():
    """Collect every exited child (orphans of a run are re-parented to this subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_descendants(isolated, deadline_s=5.0):
    """SIGKILL every descendant until none is left (or ``deadline_s`` passed); reap them.

    Inside the pid namespace ``kill(-1)`` reaches every process but init and this one in one
    pass (a fork racing with it fails, since the forking parent already has SIGKILL pending).
    Without a namespace the tree is stopped first (stopped processes cannot fork), then killed.
    """
    me, stop = os.getpid(), time.monotonic() + deadline_s
    while time.monotonic() < stop:
        if isolated:
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        pids = descendants(me)
        if not pids:
            break
        for sig in (() if isolated else (signal.SIGSTOP,)) + (signal.SIGKILL,):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        reap_all()
        time.sleep(0.001)
    reap_all()


# ----------------------------------------------------------------------------------------------
# the control group (file descriptors opened by the host)


class Cgroup:
    """The sandbox's control groups, through file descriptors the host opened (see
    ``cascade_rl.sandbox.cgroups``). The server joins its own unlimited group once, when its
    memory is in place (those pages stay charged where they were); each run's first process
    joins the run group before anything else, so every process of the run is born in it. The
    run's limits are in force while its program runs: set before, the memory limit lifted as
    soon as it ends (what the run left in /tmp still counts until it is freed)."""

    def __init__(self, config):
        config = config or {}
        self.fds = {str(role): int(fd) for role, fd in (config.get("fds") or {}).items()}
        self.unlimited = "max" if config.get("version") == "v2" else "-1"
        self.written = {}

    def __bool__(self):
        return "memory_limit" in self.fds

    def join(self, role="join"):
        """Move the calling process (and so everything it forks from now on) into the server's
        group (``join``) or the run's (``procs``)."""
        for name, fd in self.fds.items():
            if name.split(":")[0] == role:
                os.write(fd, b"0")

    def enter_run(self):
        self.join("procs")

    def prepare(self, limits, paired=False):
        """Set the run's limits (``paired``: a tester runs beside the program, one process more);
        return the OOM kills so far (to count the run's own)."""
        self.set_memory(str(int(limits["memory_mb"]) * MiB))
        self.set("pids_limit", str(int(limits["processes"]) + int(paired)))
        return self.oom_kills()

    def lift_memory_limit(self):
        self.set_memory(self.unlimited)

    def set_memory(self, value):
        """Memory limit, and on v1 the memory + swap one to the same value (no swapping out of
        it); v1 refuses a memory limit above the memory + swap one, so the order depends."""
        try:
            self.set("memory_limit", value)
            self.set("swap_limit", value)
        except OSError:
            self.set("swap_limit", value)
            self.set("memory_limit", value)

    def set(self, role, value):
        if role in self.fds and self.written.get(role) != value:
            self.written.pop(role, None)
            os.write(self.fds[role], value.encode())
            self.written[role] = value

    def oom_kills(self):
        if "oom_events" not in self.fds:
            return 0
        for line in os.pread(self.fds["oom_events"], 4096, 0).decode().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return 0


# ----------------------------------------------------------------------------------------------
# a fresh state for every run: new namespaces and scratch file systems, hidden neighbours


def check(result, what):
    if result != 0:
        import ctypes

        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")


def mount(source, target, kind, flags, options=None):
    """mount(2) through the C library (``source``, ``kind``, ``options``: str or None)."""
    encoded = [None if value is None else value.encode() for value in (source, target, kind, options)]
    check(LIBC.mount(encoded[0], encoded[1], encoded[2], flags, encoded[3]), f"mount {target}")


class FreshRun:
    """What every run of a pooled sandbox gets before its program starts, so that no run can
    leave a mark for the next (the package docstring lists what was checked): its own mount,
    IPC and (unless the sandbox has the host's network) network namespaces, made in the run's
    first process while it still has the supervisor's capabilities; new RAM-backed /tmp and
    /dev/shm of ``tmp_mb`` each (fresh inode numbers, nothing of an earlier run) with the
    interpreter's directories that live below them (``kept``) bound again read-only; the rest
    of the file system read-only (where programs share the supervisor's uid they own / and
    /dev); a loopback interface of its own. Nothing is wiped between runs: the namespaces and
    file systems of a run go away with its last process."""

    def __init__(self, tmp_mb, network, kept):
        self.network, self.kept = bool(network), [os.path.normpath(path) for path in kept]
        self.tmpfs = f"size={int(tmp_mb) * MiB},mode=1777"
        self.flags = CLONE_NEWNS | CLONE_NEWIPC | (0 if self.network else CLONE_NEWNET)

    def enter(self):
        """Make the calling process's fresh state; return file descriptors of its /tmp and
        /dev/shm (for the watchdog's count of what they store)."""
        check(LIBC.unshare(self.flags), "unshare")
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        kept = [(path, os.open(path, os.O_PATH | os.O_CLOEXEC)) for path in self.kept]
        for scratch in SCRATCH:
            mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, self.tmpfs)
        for path, fd in kept:
            self.bind_again(path, fd)
        for path in ("/", "/dev"):
            mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)
        if not self.network:
            loopback_up()
        return [os.open(scratch, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) for scratch in SCRATCH]

    @staticmethod
    def bind_again(path, fd):
        """Bind the directory ``fd`` (opened before /tmp was replaced) at ``path`` again,
        read-only, making the directories leading to it (mode 0755: the programs' uid must
        traverse them)."""
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            os.makedirs(parent, mode=0o755)
        os.mkdir(path, 0o755)
        mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)
        os.close(fd)


def loopback_up():
    """Bring up the loopback interface of a new network namespace (SIOCSIFFLAGS)."""
    import fcntl as control
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as handle:
        control.ioctl(handle, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", IFF_UP | IFF_LOOPBACK | IFF_RUNNING))


def hide_other_processes():
    """Remount the sandbox's /proc so that a program sees only the processes it may trace
    (``hidepid=ptraceable``; ``hidepid=2`` on kernels before 5.8, which exempts the group of
    /proc's owner): its own, not the supervisor, whose counters (the CPU time of every run it
    reaped, its context switches) would carry from run to run, nor the undumpable tester. The
    supervisor keeps seeing them all (CAP_SYS_PTRACE). False where that cannot be done."""
    flags = MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC
    try:
        mount("proc", "/proc", None, flags, "hidepid=ptraceable")
    except OSError:
        try:
            mount("proc", "/proc", None, flags, "hidepid=2")
        except OSError as error:
            sys.stderr.write(f"sandbox server: cannot hide other processes from programs ({error})\n")
            return False
    return True


def drop_capabilities():
    """Lose every capability (ambient, effective, permitted, inheritable) without changing uid:
    where programs share the supervisor's uid, the capabilities it was given stay with it."""
    import ctypes

    check(LIBC.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    check(LIBC.capset(header, data), "capset")


def receive_scratch(sock):
    """What runs' first processes sent on the datagram socket ``sock`` (non-blocking): (file
    descriptors of their scratch file systems, why a run's fresh state could not be made)."""
    found, problems = [], []
    while True:
        try:
            data, ancillary, _, _ = sock.recvmsg(4096, socket.CMSG_SPACE(4 * 8), socket.MSG_DONTWAIT)
        except OSError:  # (BlockingIOError: nothing more)
            return found, problems
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                numbers = array.array("i")
                numbers.frombytes(payload[: len(payload) - len(payload) % numbers.itemsize])
                found.extend(numbers)
        if data.startswith(b"!"):
            problems.append(data[1:].decode(errors="replace"))


# ----------------------------------------------------------------------------------------------
# the program's process: limits, file descriptors, uid, seccomp, then exec or python


def set_limit(which, value):
    """Set soft and hard limit to ``value`` (never above the current hard limit)."""
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def cpu_seconds_allowed(limits):
    """The CPU limit in whole seconds (RLIMIT_CPU's unit), for one process and for the run."""
    return max(1, int(-(-limits["cpu_s"] // 1)))


def apply_limits(limits, isolated):
    cpu = cpu_seconds_allowed(limits)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1 if hard == resource.RLIM_INFINITY else min(cpu + 1, hard)))
    memory = int(limits["memory_mb"]) * MiB
    set_limit(resource.RLIMIT_AS, memory)
    # Deep recursion needs a big main-thread stack; it still counts against RLIMIT_AS.
    set_limit(resource.RLIMIT_STACK, memory)
    set_limit(resource.RLIMIT_FSIZE, int(limits["file_size_mb"]) * MiB)
    set_limit(resource.RLIMIT_NOFILE, int(limits["open_files"]))
    set_limit(resource.RLIMIT_CORE, 0)
    if isolated:
        # Counted per (user namespace, uid) on Linux >= 5.14, so it bounds this run only. Not
        # set without a namespace: there it would count every process of the host user. The
        # kernel exempts uid 0 outside any namespace map, so the watchdog also counts.
        set_limit(resource.RLIMIT_NPROC, int(limits["processes"]))


def place_fds(*fds):
    """Make ``fds[i]`` file descriptor ``i`` (0, 1, 2: the standard streams; 3: the result
    channel; 4: a tester's socket to the program) and close every other one. Each is first
    copied above the range, so that one placed earlier never overwrites one still to place."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64) for fd in fds]
    for target, fd in enumerate(high):
        os.dup2(fd, target)
    os.closerange(len(fds), 1 << 20)


def exit_status(error):
    """The exit status Python itself gives for ``raise SystemExit(code)``."""
    code = error.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:
        pass
    return 1


def print_exception(error):
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == "<string>":
        tb = tb.tb_next  # hide this server's frames: the traceback starts in the program
    try:
        import traceback

        traceback.print_exception(type(error), error, tb)
    except Exception:
        pass


def standard_streams(env):
    """sys.stdin, sys.stdout and sys.stderr as CPython's start-up makes them for a program with
    this environment on these file descriptors (``create_stdio``): buffered binary layers of
    the descriptor's block size; text layers with newline ``"\\n"`` (no newline translation on
    input); stdout block-buffered unless it is a terminal, stderr line-buffered; with
    ``PYTHONUNBUFFERED`` the output streams are unbuffered and write-through; encoding and
    errors from ``PYTHONIOENCODING`` (stderr always backslashreplace)."""
    import io

    buffered = not env.get("PYTHONUNBUFFERED")
    encoding, _, errors = (env.get("PYTHONIOENCODING") or "").partition(":")
    encoding, errors = encoding or "utf-8", errors or "surrogateescape"
    streams = []
    for fd, name in ((0, "<stdin>"), (1, "<stdout>"), (2, "<stderr>")):
        writing = fd > 0
        buffering = 0 if writing and not buffered else -1
        binary = open(fd, "wb" if writing else "rb", buffering, closefd=False)
        raw = binary.raw if buffering else binary
        raw.name = name
        text = io.TextIOWrapper(
            binary,
            encoding,
            "backslashreplace" if fd == 2 else errors,
            "\n",
            buffered and (raw.isatty() or fd == 2),
            not buffered,
        )
        text.mode = "w" if writing else "r"
        streams.append(text)
    return streams


def is_closed(stream):
    try:
        return bool(stream.closed)
    except Exception:
        return True  # CPython skips a stream whose ``closed`` cannot be read


def flush_standard_streams():
    """CPython's flush of sys.stdout and sys.stderr at exit (closed ones are skipped); False
    when one failed, which makes CPython exit with status 120."""
    flushed = True
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name, None)
        if stream is None or is_closed(stream):
            continue
        try:
            stream.flush()
        except Exception as error:
            flushed = False
            if name == "stdout":
                try:
                    os.write(2, f"Exception ignored in: {stream!r}\n{type(error).__name__}: {error}\n".encode())
                except Exception:
                    pass
    return flushed


def finish_python(status, originals):
    """What the interpreter does at exit: join non-daemon threads, atexit, flush sys.stdout and
    sys.stderr (status 120 when that fails), then the original streams as finalization does."""
    threading = sys.modules.get("threading")
    try:
        if threading is not None:
            threading._shutdown()
        import atexit

        atexit._run_exitfuncs()
    except SystemExit as error:
        status = exit_status(error)
    except BaseException as error:
        print_exception(error)
        status = status or 1
    if not flush_standard_streams():
        status = 120
    for stream in originals:
        try:
            stream.flush()
        except Exception:
            pass
    return status


def run_python(source, options):
    """Execute ``source`` as the ``__main__`` program of this (forked) interpreter."""
    import builtins
    import types

    streams = standard_streams(os.environ)
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams
    filename = options.get("filename") or "main.py"
    sys.argv = [filename]
    if options.get("int_max_str_digits") is not None and hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(int(options["int_max_str_digits"]))
    if options.get("recursion_limit"):
        sys.setrecursionlimit(int(options["recursion_limit"]))
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    main.__dict__["__file__"] = filename
    sys.modules["__main__"] = main
    status = 0
    try:
        exec(compile(source, filename, "exec", dont_inherit=True), main.__dict__)
    except SystemExit as error:
        status = exit_status(error)
    except BaseException as error:
        print_exception(error)
        status = 1
    hard_exit(finish_python(status, streams[1:]))


def use_environment(env):
    """Make ``env`` this process's environment, which the next child inherits (set here, in
    the server, so that children with the usual environment do not copy pages to set it)."""
    if dict(os.environ) != env:
        os.environ.clear()
        os.environ.update(env)


def become(uid):
    """Drop to ``uid`` (and its gid, no supplementary groups): all capabilities are lost."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def leave_privileges(server):
    """The programs' uid where the supervisor may switch (it loses every capability then),
    else the same uid without the capabilities the supervisor was given."""
    if server.run_uid is not None:
        become(server.run_uid)
    elif server.capable:
        drop_capabilities()


def seccomp_program(program):
    """``struct sock_fprog`` (and the buffer it points to) for the BPF ``program`` bytes,
    built once in the server so that installing it in a run costs two system calls."""
    import ctypes

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    instructions = ctypes.create_string_buffer(program, len(program))
    return SockFprog(len(program) // 8, ctypes.addressof(instructions)), instructions


def install_seccomp(prepared, syscall_number):
    """Load the filter prepared by :func:`seccomp_program` in this process (and its children):
    through seccomp(2) with SECCOMP_FILTER_FLAG_SPEC_ALLOW where the kernel has it (speculation
    side channels are outside what the sandbox protects against, and the kernel's mitigations
    for filtered processes slow every program down), else prctl."""
    import ctypes

    check(LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
    program = ctypes.byref(prepared[0])
    if (
        syscall_number
        and LIBC.syscall(syscall_number, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_SPEC_ALLOW, program) == 0
    ):
        return
    check(LIBC.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, program, 0, 0), "seccomp")


def child_main(request, fds, server, tester=False):
    """Runs in the program's process (or, with ``tester``, in the tester's: it keeps the result
    channel, gets the socket to the program as fd 4 and is never dumpable, so the program
    cannot open its memory or file descriptors through /proc); never returns. ``request``
    None: a start-up probe."""
    try:
        os.setsid()
        if server.cgroup:  # the run's group; the OOM killer picks the program's processes first
            server.cgroup.enter_run()
            adjust = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
            os.write(adjust, b"1000")
            os.close(adjust)
        if server.fresh is not None:  # the run's own namespaces and scratch file systems
            try:
                scratch = server.fresh.enter()
            except OSError as error:  # the sandbox's failure, not the program's: no verdict
                server.scratch_sender.send(f"!{type(error).__name__}: {error}".encode()[:4000])
                hard_exit(127)
            server.scratch_sender.sendmsg([b"s"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", scratch))])
        if request is None:
            leave_privileges(server)
            if server.seccomp:
                install_seccomp(server.seccomp, server.seccomp_syscall)
            hard_exit(0)
        source = None
        if request.get("python") and fds.get("source") is not None:
            with os.fdopen(fds["source"], "rb") as handle:
                source = handle.read().decode("utf-8", "surrogateescape")
        extra = [fds[name] for name in ("result", "channel") if fds.get(name) is not None]
        place_fds(fds["stdin"], fds["stdout"], fds["stderr"], *extra)
        os.chdir(request.get("cwd") or "/tmp")
        apply_limits(request["limits"], server.isolated)
        leave_privileges(server)
        # the program is a normal process again (its own /proc files are its own); the tester
        # stays undumpable whatever the kernel's suid_dumpable made it after the uid change
        prctl(PR_SET_DUMPABLE, 0 if tester else 1)
        if server.seccomp:
            install_seccomp(server.seccomp, server.seccomp_syscall)
        if source is not None:  # os.environ already holds the run's environment
            options = request.get("python_options") or {}
            run_python(source, {**options, "filename": "tests.py"} if tester else options)
        for name in ("SIGPIPE", "SIGXFSZ", "SIGXCPU"):  # what subprocess's restore_signals does
            if hasattr(signal, name):
                signal.signal(getattr(signal, name), signal.SIG_DFL)
        argv = [str(a) for a in request["argv"]]
        os.execvpe(argv[0], argv, dict(os.environ))
    except BaseException as error:  # noqa: BLE001 - report and leave
        try:
            os.write(2, f"sandbox: cannot start the program: {type(error).__name__}: {error}\n".encode())
        except Exception:
            pass
    hard_exit(127)


# ----------------------------------------------------------------------------------------------
# the server: one run at a time


class Server:
    def __init__(self, sock, config):
        self.sock = sock
        self.isolated = bool(config["isolated"])
        self.run_uid = config.get("run_uid")
        self.tick = TICK_ISOLATED_S if self.isolated else TICK_HOST_S
        self.cgroup = Cgroup(config.get("cgroup"))
        program = bytes.fromhex((config.get("seccomp") or {}).get("filter") or "")
        self.seccomp = seccomp_program(program) if program and LIBC is not None else None
        self.seccomp_syscall = (config.get("seccomp") or {}).get("syscall")
        self.capable = bool(config.get("capable"))
        self.fresh, self.scratch_fds, self.setup_problems = None, [], []
        self.scratch_sender, self.scratch_receiver = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.reset_pids = False
        if self.seccomp and not self.probe():
            sys.stderr.write("sandbox server: the seccomp filter cannot be installed here\n")
            self.seccomp = None
        pooled = self.isolated and bool(config.get("pooled"))
        if pooled and self.capable:
            self.fresh = FreshRun(config.get("tmp_mb") or 512, config.get("network"), config.get("tmp_roots") or ())
            if not (hide_other_processes() and self.probe()):
                self.take_scratch()
                why = f" ({self.setup_problems[0]})" if self.setup_problems else ""
                sys.stderr.write(f"sandbox server: runs cannot get namespaces of their own here{why}\n")
                self.fresh = None
            self.close_scratch()
            self.setup_problems = []
        self.last_pid = open_last_pid() if pooled and config.get("reset_pids") else None
        self.reset_pids = self.last_pid is not None and reset_pid_numbering(self.last_pid)
        if self.cgroup:
            try:
                self.cgroup.join()
            except OSError as error:
                sys.stderr.write(f"sandbox server: cannot join the cgroup ({error}); running without\n")
                self.cgroup = Cgroup(None)

    def probe(self):
        """Whether a run can start with the current settings (a program that exits at once)."""
        try:
            pid = self.spawn(None, {})
        except OSError as error:
            sys.stderr.write(f"sandbox server: a probe run failed to start ({error})\n")
            return False
        return os.waitpid(pid, 0)[1] == 0

    def send(self, message):
        self.sock.send(json.dumps(message).encode())

    def receive(self):
        """(message, fds) or (None, []) at end of file."""
        fds = array.array("i")
        data, ancillary, _, _ = self.sock.recvmsg(1 << 16, socket.CMSG_SPACE(MAX_FDS_PER_MESSAGE * fds.itemsize))
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        if not data:
            for fd in fds:
                os.close(fd)
            return None, []
        return json.loads(data), list(fds)

    def serve(self):
        self.send(
            {
                "ready": True,
                "pid": os.getpid(),
                "isolated": self.isolated,
                "fixed_pids": self.reset_pids,
                "fresh_runs": self.fresh is not None,
                "cgroup": bool(self.cgroup),
                "seccomp": self.seccomp is not None,
            }
        )
        while True:
            message, fds = self.receive()
            if message is None:
                return
            if message.get("op") != "run":
                for fd in fds:
                    os.close(fd)
                continue
            try:
                status = self.run(fds)
            except Exception as error:  # noqa: BLE001 - the host scores it as a failed run
                kill_descendants(self.isolated)
                status = {"error": f"{type(error).__name__}: {error}"}
            finally:
                for fd in fds:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            self.send(status)

    def run(self, fds):
        names = ["request", "stdin", "stdout", "stderr"]
        with os.fdopen(os.dup(fds[0]), "rb") as handle:
            request = json.loads(handle.read())
        options = request.get("python_options") or {}
        if options.get("result_fd"):
            names.append("result")
        if request.get("python"):
            names.append("source")
        if options.get("tester"):
            names.append("tester")
        if len(fds) != len(names):
            raise ValueError(f"expected {len(names)} file descriptors, got {len(fds)}")
        named = dict(zip(names, fds))
        use_environment({str(k): str(v) for k, v in (request.get("env") or {}).items()})
        paired = bool(options.get("tester"))
        oom_kills = self.cgroup.prepare(request["limits"], paired) if self.cgroup else 0
        start = time.monotonic()
        try:
            pid = self.spawn(request, named)
        finally:
            for fd in fds:  # the run owns them now: pipes reach EOF when its processes die
                os.close(fd)
            fds.clear()
        return self.supervise(pid, request["limits"], start, oom_kills)

    def spawn(self, request, fds):
        """Fork the run's program (with reset_pids: as pid FIRST_PID, like every run), or the
        program and its tester; return the pid the run waits for."""
        if self.reset_pids and not reset_pid_numbering(self.last_pid):
            raise OSError("cannot reset the pid numbering")
        if request is not None and "tester" in fds:
            return self.spawn_pair(request, fds)
        pid = os.fork()
        if pid == 0:
            child_main(request, fds, self)
        return pid

    def spawn_pair(self, request, fds):
        """The program and its tester, joined by a stream socket (the program's result channel,
        the tester's fd 4). The tester gets the host's result channel and an empty stdin; the
        run is the tester's: it ends when the tester exits, and the program with it."""
        program_end, tester_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        empty, closed = os.pipe()
        os.close(closed)
        try:
            program = {name: fd for name, fd in fds.items() if name != "tester"}
            if os.fork() == 0:
                child_main(request, {**program, "result": program_end.fileno()}, self)
            tester = {
                "stdin": empty,
                "stdout": fds["stdout"],
                "stderr": fds["stderr"],
                "result": fds["result"],
                "channel": tester_end.fileno(),
                "source": fds["tester"],
            }
            pid = os.fork()
            if pid == 0:
                child_main(request, tester, self, tester=True)
            return pid
        finally:
            program_end.close()
            tester_end.close()
            os.close(empty)

    def supervise(self, pid, limits, start, oom_kills):
        """Wait for the run within its limits; kill every process of the run at the end."""
        deadline = start + float(limits["time_s"])
        status = {"returncode": None, "signal": None, "timed_out": False, "limit": None}
        poller, pidfd = select.poll(), None
        try:
            pidfd = os.pidfd_open(pid)
            poller.register(pidfd, select.POLLIN)
        except (AttributeError, OSError):
            pass  # no pidfd: notice the exit on the next watchdog tick
        poller.register(self.sock.fileno(), select.POLLIN)
        next_check, finished = start + self.tick, 0
        try:
            while status["limit"] is None:
                finished, wait_status = os.waitpid(pid, os.WNOHANG)
                if finished:
                    self.decode(wait_status, status)
                    break
                now = time.monotonic()
                if now >= deadline:
                    status.update(timed_out=True, limit="time")
                    break
                if now >= next_check:
                    next_check = now + self.tick
                    status["limit"] = self.over_limit(limits, oom_kills)
                    if status["limit"]:
                        break
                timeout = max(0.0, min(deadline, next_check) - now)
                for fd, _ in poller.poll(timeout * 1000):
                    if fd == self.sock.fileno():
                        status["limit"] = self.host_request()
            status["seconds"] = time.monotonic() - start
            if not finished:
                os.kill(pid, signal.SIGKILL)
                _, wait_status = os.waitpid(pid, 0)
                self.decode(wait_status, status, killed_by_us=True)
            if self.cgroup:  # the program is dead; files it left count until they are freed
                self.cgroup.lift_memory_limit()
            kill_descendants(self.isolated)  # survivors of the main process: daemons, forks, orphans
            if status["limit"] is None and self.cgroup and self.cgroup.oom_kills() > oom_kills:
                status["limit"] = "memory"  # the kernel killed one of its processes
        finally:
            if pidfd is not None:
                os.close(pidfd)
            self.close_scratch()
        if self.setup_problems:
            status["error"] = f"a run's namespaces could not be made: {self.setup_problems[0]}"
            self.setup_problems = []
        return status

    def scratch_bytes(self):
        """Bytes the run stores in the RAM-backed /tmp and /dev/shm: its own (file descriptors
        its processes sent when they made them), else the sandbox's."""
        if not self.isolated:
            return 0
        if self.fresh is None:
            return tmpfs_bytes(SCRATCH)
        self.take_scratch()
        return tmpfs_bytes(self.scratch_fds)

    def take_scratch(self):
        fds, problems = receive_scratch(self.scratch_receiver)
        self.scratch_fds += fds
        self.setup_problems += problems

    def close_scratch(self):
        """Let go of the run's scratch file systems (they are freed with its last process)."""
        self.take_scratch()
        for fd in self.scratch_fds:
            os.close(fd)
        self.scratch_fds = []

    def host_request(self):
        """Handle a message that arrives during a run: the limit to stop it for, or None."""
        message, extra = self.receive()
        for stray in extra:
            os.close(stray)
        if message is None:  # the host went away: stop everything
            kill_descendants(self.isolated)
            hard_exit(0)
        if message.get("op") == "kill":
            return message.get("reason") or "killed"
        return None

    @staticmethod
    def decode(wait_status, status, killed_by_us=False):
        if os.WIFSIGNALED(wait_status):
            status["signal"] = os.WTERMSIG(wait_status)
            status["returncode"] = None if killed_by_us else -status["signal"]
        elif not killed_by_us:
            status["returncode"] = os.WEXITSTATUS(wait_status)

    def over_limit(self, limits, oom_kills):
        """The limit the run's process tree is over, or None: ``processes``; ``memory``
        (resident memory plus the files in the RAM-backed /tmp and /dev/shm, or an OOM kill in
        its cgroup); ``cpu`` (CPU time of every process of the run together; one process alone
        meets RLIMIT_CPU at the same whole second first)."""
        table = process_table()
        pids = descendants(os.getpid(), table)
        if len(pids) > int(limits["processes"]):
            return "processes"
        if resident_bytes(pids) + self.scratch_bytes() > int(limits["memory_mb"]) * MiB:
            return "memory"
        if self.cgroup and self.cgroup.oom_kills() > oom_kills:
            return "memory"
        if self.cpu_seconds(table) > cpu_seconds_allowed(limits):
            return "cpu"
        return None

    @staticmethod
    def cpu_seconds(table):
        """CPU time of the run so far: over its processes (live and zombie), their own time and
        that of the children they reaped."""
        ticks = sum(table[pid][1] for pid in descendants(os.getpid(), table, zombies=True) if pid in table)
        return ticks / CLOCK_TICKS


def open_last_pid():
    """``ns_last_pid`` of this pid namespace, open for writing, or None."""
    try:
        return os.open(LAST_PID_FILE, os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return None


def reset_pid_numbering(last_pid_fd):
    """Make the next process of this pid namespace get FIRST_PID (writing ``ns_last_pid`` needs
    CAP_SYS_ADMIN in the namespace's user namespace); False when that is not allowed here."""
    try:
        os.pwrite(last_pid_fd, str(FIRST_PID - 1).encode(), 0)
        return True
    except OSError:
        return False


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
LIBC = None  # ctypes handle on the C library, when ctypes works here


def prctl(option, value):
    if LIBC is not None:
        LIBC.prctl(option, value, 0, 0, 0)


def harden():
    """Child subreaper (orphans stay ours to kill) and not dumpable (no ptrace, no /proc fds)."""
    global LIBC
    try:
        import ctypes

        LIBC = ctypes.CDLL(None, use_errno=True)
    except Exception as error:  # noqa: BLE001 - documented degradation
        sys.stderr.write(f"sandbox server: prctl unavailable ({error})\n")
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    prctl(PR_SET_DUMPABLE, 0)


def preload():
    """Import now what every child would otherwise import after the fork (execvpe needs
    warnings; python mode needs io, types, atexit, traceback on errors), then freeze the heap
    so that the children's garbage collections do not copy its pages."""
    import atexit  # noqa: F401,E401
    import ctypes  # noqa: F401 - the seccomp filter is installed through it
    import gc

    gc.collect()
    gc.freeze()


def main(argv):
    config = json.loads(argv[0])
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    harden()
    preload()
    sock = socket.socket(fileno=int(config["socket_fd"]))
    Server(sock, config).serve()


if __name__ == "__main__":
    main(sys.argv[1:])
