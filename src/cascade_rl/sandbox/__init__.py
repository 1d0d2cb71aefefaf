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
  127.0.0.1 is unreachable; in a pooled sandbox a new one for every run) unless
  ``network=True``.
* **Processes**: a new pid namespace (the host's processes are invisible and unreachable;
  /proc is the sandbox's own) whose init is the supervisor itself (``--as-pid-1``: no signal
  from a program reaches it, SIGKILL included), new IPC and UTS namespaces, a new session (no
  terminal injection), no capabilities, no nested user namespaces, ``no_new_privs``. The
  supervisor runs in a user namespace the project makes (a small helper, as bwrap's own would
  nest a second one and leave it no capability over the sandbox), with the capabilities the
  per-run state below needs (CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_SYS_PTRACE), never passed on to
  a program. When the host runs as root and no ``workdir`` is bound, the supervisor is uid 0
  of a namespace that maps just 0 and 65534 (with CAP_SETUID/SETGID/KILL too) and programs run
  as uid 65534, so they cannot signal, ptrace or read it; otherwise supervisor and programs
  share uid 65534 (the supervisor is still not dumpable: no ptrace, no access to its file
  descriptors). /proc is mounted ``hidepid=ptraceable``: a program lists only the processes it
  could trace, its own, not the supervisor nor the undumpable tester (their counters, such as
  the CPU time of every run the supervisor reaped, would carry from run to run). Every process
  of a run is killed when its main process exits, when a limit is hit, or when the host dies
  (``--die-with-parent``, and the supervisor exits when the host closes its socket).
* **Resources**, per process (rlimits set in the child before the program starts): CPU
  seconds, address space, file size, open files, no core dumps, and the number of processes
  (RLIMIT_NPROC, counted per user namespace); per run (a watchdog in the supervisor, every
  20 ms): wall-clock time, number of processes, resident memory of the whole process tree
  plus what it stores in the RAM-backed /tmp and /dev/shm, CPU time of the whole tree (each
  process's own time plus that of the children it reaped, read from /proc; the limit is
  ``cpu_s`` rounded up to whole seconds, as RLIMIT_CPU), and stdout / stderr size (the run is
  killed when a stream overflows). The kernel exempts real uid 0 from RLIMIT_NPROC, so on a
  root host with a bound ``workdir`` (programs keep kernel uid 0) only the watchdog (and the
  pids cgroup, below) bounds a fork bomb.
* **Whole-program limits with cgroups** (:mod:`.cgroups`: cgroup v1 memory (+ pids)
  hierarchies, as on this project's development machine, or a delegated cgroup v2 subtree;
  used when this process may create groups, e.g. as root): each sandbox has its own group and
  every run's processes are born in it. The kernel then enforces ``memory_mb`` on **all**
  memory the run allocates, whatever it is: anonymous memory of every process, memfds (also
  written and never mapped), System V / POSIX shared memory, tmpfs files in /tmp and /dev/shm,
  page tables and other kernel memory, with no swapping out of the limit; going over it gets
  a process OOM-killed (always a program process: they run with the highest
  ``oom_score_adj``) and the run reported as ``limit="memory"``. ``processes`` is enforced on
  the group's task count (pids.max: threads included, even for uid 0).
* **Without cgroups** (not root, no delegation, ``CASCADE_SANDBOX_CGROUPS=off``): memory is
  what the watchdog sees (resident memory of the tree + /tmp and /dev/shm), checked every
  20 ms, so a fast allocation can overshoot by what it allocates within one period, and
  kernel memory is not counted; what it could not see is refused by the seccomp filter
  (memfds, System V and POSIX IPC objects), and /tmp and /dev/shm are capped by ``tmp_mb``.
  The CPU limit over all processes holds the same way in both cases (watchdog, from /proc).
* **System calls** (:mod:`.seccomp`, x86_64 and aarch64): a seccomp filter refuses what no
  solution needs and what would create state or memory outside the limits: memfd_create, System V
  IPC, POSIX message queues, keyrings, ptrace and process_vm_*, bpf, perf_event_open,
  userfaultfd, io_uring, mount and namespace calls, clone with namespace flags, modules, kexec,
  swap, reboot (EPERM; clone3 gets ENOSYS and the C library falls back to clone). Elsewhere
  programs run without a filter (System V and POSIX IPC objects then die with each run's IPC
  namespace; keyrings stay shared between the runs of a sandbox).
* **No run of a pooled sandbox can leave a mark for the next** (issue 40): nothing is wiped,
  everything is new. Each run's first process, before it drops the supervisor's capabilities,
  enters mount, IPC and (without ``network``) network namespaces of its own, with new
  RAM-backed /tmp and /dev/shm (new inode numbers, nothing of an earlier run), a loopback of
  its own (no earlier run's connections in TIME_WAIT in /proc/net/tcp, its own packet
  counters), / and /dev read-only (where programs share the supervisor's uid they own them),
  and an interpreter (a checkout's .venv) that lives under /tmp bound again at its own path (a
  program's /tmp lists the first component of that path and nothing else). All of it goes
  away with the run's last process. The pid numbering is reset before each run
  (``ns_last_pid``): the program is pid 100 and its children 101, 102, ... however many
  processes earlier runs forked; /proc shows no process of the sandbox but the run's (above).
  Checked by tests/sandbox/test_integrity.py, each under the programs' own uid and a shared
  one: files anywhere, tmpfs inode and free-inode counts, TCP connections in TIME_WAIT,
  loopback and SNMP counters, unix sockets (named and abstract), System V and POSIX IPC and
  keyrings, pid numbers (``getpid``, /proc/loadavg, ``ns_last_pid``) and other processes'
  counters. Where runs cannot get namespaces of their own (unprivileged user namespaces off,
  a setuid bwrap), the host says so once and starts a new sandbox after every run
  (``SandboxServer.renewals``): slower, never weaker.
* **Results cannot be forged**: a program only ever gets its own input; expected outputs
  never enter the sandbox and are compared by the caller. Program data (stdin, source,
  outputs) travels in file descriptors passed to the supervisor, never through its memory, so
  a program forked from it cannot find another program's data. stdin is a pipe the host
  writes as the program reads: read once, never rewound (no ``lseek``, no re-reading through
  /proc/self/fd/0 from the start).
* **A tester beside the program** (``run_python(tester=...)``): a second process of the run,
  trusted code the caller supplies, which alone holds the result channel and talks to the
  program through a socket. It runs under the run's limits, uid and seccomp filter, but is
  never dumpable, so the program cannot read its memory, environment or file descriptors
  through /proc (nor ptrace it: the filter refuses that), also where both share one uid (hosts
  that are not root); the program can only end it, which fails the run. The code reward's
  assert-style tests use it (:mod:`cascade_rl.rewards.code_asserts`). With ``result_lines``
  the run is judged line by line as it goes (each step within the time limit; the caller may
  stop it at any line).
* **Python mode** runs the program in a fork of the supervisor's interpreter with the standard
  streams CPython itself makes for pipes: stdout block-buffered (``print`` and
  ``sys.stdout.buffer.write`` interleave as they do under ``python3 prog.py | ...``; with
  ``PYTHONUNBUFFERED`` in the run's ``env``, write-through, as ``python3 -u``), no newline
  translation on stdin, and CPython's exit (threads joined, atexit, a closed ``sys.stdout``
  is not flushed, status 120 when flushing stdout fails).

What it does **not** protect against: kernel exploits (the sandbox shares the host kernel; the
seccomp filter narrows what is reachable), CPU side channels (Spectre-class; the filter is
installed without the kernel's speculation mitigations) and timing (when a run starts and ends,
how long the supervisor takes), resource use within the limits (a program may use its full
CPU, memory and time budget and slow its neighbours), state the whole host's kernel shares and
shows (counters in /proc such as /proc/stat, mount and socket inode numbers, the page cache,
inotify instances): a run can still mark these for a later one, so the code reward also makes
sure that no program learns anything worth passing on (no verdict it can observe:
:mod:`cascade_rl.rewards.code_asserts`). Nor a program that reads the interpreter's installed
packages (they are visible by design).

Without bubblewrap untrusted code is **refused** (:class:`IsolationUnavailable`, one line
saying why and what to do) unless the user opted into rlimits only: the recipe's
``runtime.sandbox: rlimits`` (:func:`allow_rlimits_only`, for where bubblewrap cannot run) or
``CASCADE_SANDBOX=rlimits`` (always); :func:`isolation_report` says which, for the run's
``machine.json`` and report. Programs then run with the rlimits (no RLIMIT_NPROC: outside a
user namespace it would count all the host user's processes), the watchdog, the seccomp filter
and (when available) the cgroup only, and one warning says so: **no** filesystem, network or
process isolation. A process that escapes to a new session (setsid) is still found and killed
(the supervisor is a child subreaper), but the host's other processes and files are
reachable.
"""

from cascade_rl.sandbox.core import (
    DEFAULT_LIMITS,
    IsolationUnavailable,
    Limits,
    RunResult,
    SandboxError,
    SandboxServer,
    allow_rlimits_only,
    available,
    isolation,
    isolation_report,
    run,
    run_python,
)
from cascade_rl.sandbox.pool import Runner, SandboxPool, shared_pool

__all__ = [
    "DEFAULT_LIMITS",
    "IsolationUnavailable",
    "Limits",
    "RunResult",
    "Runner",
    "SandboxError",
    "SandboxPool",
    "SandboxServer",
    "allow_rlimits_only",
    "available",
    "isolation",
    "isolation_report",
    "run",
    "run_python",
    "shared_pool",
]
