"""The supervisor that lives inside the sandbox and runs programs for the host (SPEC section 6).

Stdlib only and self-contained: :mod:`cascade_rl.sandbox.core` hands this file's source to the
sandboxed interpreter with ``python -I -c`` (the project directory is not visible inside), plus
one JSON argument ``{"socket_fd": int, "isolated": bool, "forget": bool, "run_uid": int|null}``
(``forget``: wipe the private /tmp between runs, for pooled sandboxes; ``run_uid``: the uid
programs run as when the supervisor may switch uids, see ``core._UserNamespace``).

Protocol (a ``SOCK_SEQPACKET`` unix socket; one message = one small JSON object):

* server -> host at start: ``{"ready": true, "pid": ...}``.
* host -> server: ``{"op": "run"}`` with file descriptors attached (SCM_RIGHTS), in this order:
  request (a memfd holding the JSON request: ``argv`` or ``python``, ``cwd``, ``env``,
  ``limits``, ``python_options``), stdin (a memfd), the write ends of the stdout and stderr
  pipes, then optionally the result pipe (``python_options.result_fd``) and the program source
  (a memfd, python mode). The host reads the pipes itself, so **program data never passes
  through this process's memory**: a later program forked from this server cannot find an
  earlier program's input, output or source in the memory it inherits.
* host -> server while a run is going: ``{"op": "kill", "reason": ...}`` (e.g. output cap hit).
* server -> host when the run is over: ``{"returncode", "signal", "timed_out", "limit",
  "seconds", "error"}``; by then every process of the run is dead.

One child per run: ``fork``, new session, rlimits, fds 0/1/2 (and the result fd) in place,
then either ``execvpe(argv)`` or, in *python mode*, the program is executed by the forked
interpreter itself as a fresh ``__main__`` (no interpreter start-up per run, the fast path of
the code reward). The server is a child subreaper and not dumpable (same-uid programs cannot
ptrace it or open its file descriptors through /proc); after the main child exits, a timeout, or
a limit, it kills every descendant it can find (``/proc`` parent links; inside the sandbox's pid
namespace that is every process but the namespace's init) and reaps them before answering.
"""

import array
import json
import os
import resource
import select
import signal
import socket
import stat
import sys
import time
from os import _exit as hard_exit  # bound now: a program may replace os._exit

MiB = 1024 * 1024
RESULT_FD = 3
TICK_ISOLATED_S = 0.02  # process / memory watchdog period inside a pid namespace (cheap /proc)
TICK_HOST_S = 0.1  # ... when /proc lists every process on the host (rlimits-only mode)
MAX_FDS_PER_MESSAGE = 8
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


# ----------------------------------------------------------------------------------------------
# process table helpers (work in both modes: inside the pid namespace /proc is small)


def process_parents():
    """{pid: parent pid} of every process visible in /proc (vanishing ones are skipped)."""
    parents = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and fields[0] != b"Z":  # zombies hold no resources
            parents[int(name)] = int(fields[1])
    return parents


def descendants(root):
    """Pids of every live process below ``root`` (children, grandchildren, ...)."""
    children = {}
    for pid, parent in process_parents().items():
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


def tmpfs_bytes():
    """Bytes stored in the sandbox's private /tmp and /dev/shm (both RAM-backed)."""
    total = 0
    for path in ("/tmp", "/dev/shm"):
        try:
            info = os.statvfs(path)
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


def forget_run(run_uid):
    """Remove what a run may leave for the next one in this sandbox: files in the private /tmp
    and /dev/shm, System V IPC objects. Used only for pooled sandboxes (no bound workdir), and
    never crosses into another filesystem (a bind mount below /tmp is left alone). Done as the
    programs' uid (their files are theirs to delete) in a short-lived child, and only when
    something is left."""
    leftovers = [os.path.join(d, name) for d in ("/tmp", "/dev/shm") for name in listdir(d)]
    ipc = sysv_ipc_ids()
    if not leftovers and not any(ipc.values()):
        return
    pid = os.fork()
    if pid == 0:
        try:
            if run_uid is not None:
                become(run_uid)
            for path in leftovers:
                remove_tree(path, os.lstat(os.path.dirname(path)).st_dev)
            remove_sysv_ipc(ipc)
        finally:
            hard_exit(0)
    os.waitpid(pid, 0)


def listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []


def remove_tree(path, device):
    """Delete ``path`` recursively if it lives on ``device``, making directories writable."""
    try:
        info = os.lstat(path)
        if info.st_dev != device:
            return
        if stat.S_ISDIR(info.st_mode):
            os.chmod(path, 0o700)
            for name in os.listdir(path):
                remove_tree(os.path.join(path, name), device)
            os.rmdir(path)
        else:
            os.unlink(path)
    except OSError:
        pass


def sysv_ipc_ids():
    """{table: [ids]} of the System V shared memory segments, message queues, semaphores."""
    ids = {}
    for table in ("shm", "msg", "sem"):
        try:
            with open(f"/proc/sysvipc/{table}") as handle:
                ids[table] = [int(line.split()[1]) for line in handle.readlines()[1:] if line.strip()]
        except (OSError, ValueError, IndexError):
            ids[table] = []
    return ids


def remove_sysv_ipc(ids):
    """IPC_RMID every object of ``ids`` (from :func:`sysv_ipc_ids`)."""
    if not any(ids.values()):
        return
    if LIBC is None:
        return
    for table, call in (("shm", "shmctl"), ("msg", "msgctl"), ("sem", "semctl")):
        for ipc_id in ids[table]:
            getattr(LIBC, call)(ipc_id, 0, 0, 0)  # 0 = IPC_RMID


# ----------------------------------------------------------------------------------------------
# the child: limits, file descriptors, then exec or python


def set_limit(which, value):
    """Set soft and hard limit to ``value`` (never above the current hard limit)."""
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def apply_limits(limits, isolated):
    cpu = max(1, int(-(-limits["cpu_s"] // 1)))
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


def place_fds(stdin_fd, stdout_fd, stderr_fd, result_fd):
    os.dup2(stdin_fd, 0)
    os.dup2(stdout_fd, 1)
    os.dup2(stderr_fd, 2)
    first_free = 3
    if result_fd is not None:
        os.dup2(result_fd, RESULT_FD)
        first_free = RESULT_FD + 1
    os.closerange(first_free, 1 << 20)


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


def finish_python(status, streams):
    """What the interpreter does at exit: join non-daemon threads, atexit, flush stdio."""
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
    for stream in (sys.stdout, sys.stderr, *streams):
        try:
            stream.flush()
        except Exception:
            if stream is sys.stdout or stream is streams[0]:
                status = status or 120  # CPython: stdout could not be flushed at exit
    return status


def run_python(source, options):
    """Execute ``source`` as the ``__main__`` program of this (forked) interpreter."""
    import builtins
    import io
    import types

    stdin = io.TextIOWrapper(
        io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8", errors="surrogateescape"
    )
    stdout = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8", errors="surrogateescape"
    )
    stderr = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )
    sys.stdin = sys.__stdin__ = stdin
    sys.stdout = sys.__stdout__ = stdout
    sys.stderr = sys.__stderr__ = stderr
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
    hard_exit(finish_python(status, (stdout, stderr)))


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


def child_main(request, fds, isolated, run_uid):
    """Runs in the forked child; never returns."""
    try:
        os.setsid()
        source = None
        if request.get("python") and fds.get("source") is not None:
            with os.fdopen(fds["source"], "rb") as handle:
                source = handle.read().decode("utf-8", "surrogateescape")
        place_fds(fds["stdin"], fds["stdout"], fds["stderr"], fds.get("result"))
        os.chdir(request.get("cwd") or "/tmp")
        apply_limits(request["limits"], isolated)
        if run_uid is not None:
            become(run_uid)
        prctl(PR_SET_DUMPABLE, 1)  # a normal process again (its own /proc files are its own)
        if source is not None:  # os.environ already holds the run's environment
            run_python(source, request.get("python_options") or {})
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
    def __init__(self, sock, isolated, forget, run_uid):
        self.sock = sock
        self.isolated = isolated
        self.forget = isolated and forget
        self.run_uid = run_uid
        self.tick = TICK_ISOLATED_S if isolated else TICK_HOST_S

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
        self.send({"ready": True, "pid": os.getpid(), "isolated": self.isolated})
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
        if len(fds) != len(names):
            raise ValueError(f"expected {len(names)} file descriptors, got {len(fds)}")
        named = dict(zip(names, fds))
        use_environment({str(k): str(v) for k, v in (request.get("env") or {}).items()})
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            child_main(request, named, self.isolated, self.run_uid)
        for fd in fds:  # the child owns them now: pipes reach EOF when the run's processes die
            os.close(fd)
        fds.clear()
        return self.supervise(pid, request["limits"], start)

    def supervise(self, pid, limits, start):
        """Wait for the child within the limits; kill every process of the run at the end."""
        deadline = start + float(limits["time_s"])
        status = {"returncode": None, "signal": None, "timed_out": False, "limit": None}
        poller, pidfd = select.poll(), None
        try:
            pidfd = os.pidfd_open(pid)
            poller.register(pidfd, select.POLLIN)
        except (AttributeError, OSError):
            pass  # no pidfd: notice the exit on the next watchdog tick
        poller.register(self.sock.fileno(), select.POLLIN)
        next_check = start + self.tick
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
                    status["limit"] = self.over_limit(limits)
                    if status["limit"]:
                        break
                timeout = max(0.0, min(deadline, next_check) - now)
                for fd, _ in poller.poll(timeout * 1000):
                    if fd == self.sock.fileno():
                        status["limit"] = self.host_request()
        finally:
            if pidfd is not None:
                os.close(pidfd)
        status["seconds"] = time.monotonic() - start
        if status["returncode"] is None and status["signal"] is None:
            os.kill(pid, signal.SIGKILL)
            _, wait_status = os.waitpid(pid, 0)
            self.decode(wait_status, status, killed_by_us=True)
        kill_descendants(self.isolated)  # survivors of the main process: daemons, forks, orphans
        if self.forget:
            forget_run(self.run_uid)
        return status

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

    def over_limit(self, limits):
        """'processes' or 'memory' when the run's process tree exceeds its budget (memory:
        resident memory plus, in the sandbox, files kept in the RAM-backed /tmp and /dev/shm)."""
        pids = descendants(os.getpid())
        if len(pids) > int(limits["processes"]):
            return "processes"
        used = resident_bytes(pids) + (tmpfs_bytes() if self.isolated else 0)
        if used > int(limits["memory_mb"]) * MiB:
            return "memory"
        return None


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
    import gc

    gc.collect()
    gc.freeze()


def main(argv):
    config = json.loads(argv[0])
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    harden()
    preload()
    sock = socket.socket(fileno=int(config["socket_fd"]))
    Server(sock, bool(config["isolated"]), bool(config.get("forget")), config.get("run_uid")).serve()


if __name__ == "__main__":
    main(sys.argv[1:])
