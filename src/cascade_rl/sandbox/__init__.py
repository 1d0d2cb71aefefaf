"""Running untrusted programs: code-reward tests, SWE test suites (SPEC sections 6-7).

Every run goes through a supervisor process inside a **bubblewrap** sandbox
(:mod:`.server`), which forks one child per program, applies POSIX rlimits to it and kills
the whole process tree at the end. :func:`run` / :func:`run_python` start a sandbox for one
program; :class:`SandboxPool` keeps one sandbox per worker alive and runs many programs
through it (the fast path: a fork inside the sandbox per run instead of a bwrap and
interpreter start-up; python-mode runs skip the interpreter start-up too).

What the sandbox protects against (each property has an adversarial test in tests/sandbox/):

* **Filesystem**: the program sees a read-only /usr (and /bin, /lib*), a handful of /etc files
  (passwd, group, ld.so.*, localtime, alternatives, hosts, nsswitch.conf), the Python
  interpreter's prefixes (base installation and virtual environment, read-only: installed
  packages work), a private /tmp (tmpfs, size-capped) and a private /dev. It does **not** see
  the project directory, the home directory (except the interpreter's own prefix when it
  lives there, e.g. pyenv), the host's /tmp, or any other file; ``workdir`` is bound at its
  own path, read-write or read-only, when given.
* **Network**: none (a new network namespace holding only its own loopback; the host's
  127.0.0.1 is unreachable) unless ``network=True``.
* **Processes**: a new pid namespace (the host's processes are invisible and unreachable;
  /proc is the sandbox's own), new IPC and UTS namespaces, a new session (no terminal
  injection), no capabilities, no nested user namespaces, ``no_new_privs``. When the host runs
  as root and no ``workdir`` is bound, the supervisor keeps only CAP_SETUID/SETGID/KILL (uid 0
  of a user namespace that maps just 0 and 65534) and programs run as uid 65534 with no
  capabilities, so they cannot signal, ptrace or read the supervisor; otherwise supervisor and
  programs share uid 65534 (the supervisor is still not dumpable: no ptrace, no access to its
  file descriptors, but a program can kill it, which fails that run only). Every process of a
  run is killed when its main process exits, when a limit is hit, or when the host dies
  (``--die-with-parent``, and the supervisor exits when the host closes its socket).
* **Resources**, per process (rlimits set in the child before the program starts): CPU
  seconds, address space, file size, open files, no core dumps, and the number of processes
  (RLIMIT_NPROC, counted per user namespace); per run (a watchdog in the supervisor, every
  20 ms): wall-clock time, number of processes, total resident memory, and stdout / stderr
  size (the run is killed when a stream overflows). The kernel exempts real uid 0 from
  RLIMIT_NPROC, so on a root host with a bound ``workdir`` (programs keep kernel uid 0) only
  the watchdog bounds a fork bomb, which can exceed the cap by what it forks within one
  watchdog period before it is killed.
* **Results cannot be forged**: a program only ever gets its own input; expected outputs
  never enter the sandbox and are compared by the caller. Program data (stdin, source,
  outputs) travels in file descriptors passed to the supervisor, never through its memory, so
  a program forked from it cannot find another program's data; /tmp, /dev/shm and System V
  IPC objects are wiped between runs of a pooled sandbox.

What it does **not** protect against: kernel exploits (the sandbox shares the host kernel;
there is no seccomp filter), CPU side channels (Spectre-class) and timing, resource use within
the limits (a program may use its full CPU, memory and time budget and slow its neighbours),
host-wide limits the kernel shares (pid numbers, inotify instances), POSIX message queues and
kernel keyrings left by one program for the next in the same pooled sandbox, and a program
that reads the interpreter's installed packages (they are visible by design).

Without bubblewrap (or with ``CASCADE_SANDBOX=rlimits``) programs run with the rlimits (no
RLIMIT_NPROC: outside a user namespace it would count all the host user's processes) and the
watchdog only, and one warning says so: **no** filesystem, network or process isolation. A
process that escapes to a new session (setsid) is still found and killed (the supervisor is a
child subreaper), but the host's other processes and files are reachable.
"""

from cascade_rl.sandbox.core import (
    DEFAULT_LIMITS,
    Limits,
    RunResult,
    SandboxError,
    SandboxServer,
    available,
    isolation,
    run,
    run_python,
)
from cascade_rl.sandbox.pool import Runner, SandboxPool, shared_pool

__all__ = [
    "DEFAULT_LIMITS",
    "Limits",
    "RunResult",
    "Runner",
    "SandboxError",
    "SandboxPool",
    "SandboxServer",
    "available",
    "isolation",
    "run",
    "run_python",
    "shared_pool",
]
