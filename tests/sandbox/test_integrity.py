"""Reward integrity between pooled programs and whole-program limits (issue 13), and for
assert-style tests (issue 24); SPEC section 6.

Kept beside the attacker-style suite of test_adversarial.py. The channel tests follow one
pattern: program A leaves something behind in a one-worker pool, then program B, on that same
worker, must see none of it and score exactly as it does in a fresh sandbox. The limit tests
check that memory and CPU are counted for the whole program, whichever way it holds them. The
assert-style tests (last section) run programs written to pass MBPP and HumanEval rows without
solving them, one family of issue 24 each, against every row, beside the honest solutions.
"""

import json
import os
import platform
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from cascade_rl.rewards.code import score
from cascade_rl.sandbox import Limits, SandboxPool, cgroups, core, seccomp, server

pytestmark = pytest.mark.usefixtures("bwrap_only")

DOUBLE = {"inputs": ["21\n"], "outputs": ["42\n"]}


def program(code: str) -> str:
    return f"<think>let me try</think>\n```python\n{code}\n```"


def expect(text: str) -> dict:
    return {"inputs": ["\n"], "outputs": [text]}


def empty_tmp() -> str:
    """What ``print(sorted(os.listdir('/tmp')))`` prints in a sandbox no program wrote to: ``[]``,
    or, when the interpreter lives below /tmp (a checkout under /tmp), the first component of
    its path, which its bind mount needs (nothing more)."""
    roots = [Path(root) for root in core._python_roots() if root.startswith("/tmp/")]
    return str(sorted({root.relative_to("/tmp").parts[0] for root in roots}))


LIST_TMP = "import os\nprint(sorted(os.listdir('/tmp')))"


def after_a_in_fresh_and_used_pool(leaver: str, probe: str, tests: dict, **options) -> tuple:
    """(score of ``probe`` in a fresh sandbox, its score on a worker that just ran ``leaver``)."""
    with SandboxPool(1) as fresh:
        alone = score(program(probe), tests=tests, pool=fresh, **options)
    with SandboxPool(1) as used:
        score(program(leaver), tests=DOUBLE, pool=used, time_limit=20)
        after = score(program(probe), tests=tests, pool=used, **options)
    return alone, after


def features(pool: SandboxPool) -> dict:
    return pool.submit_job(lambda runner: getattr(runner._live_server(), "features", {})).result()


# ---------------------------------------------------------------------------------- channels

DEEP_TREE = """
import os
for _ in range(1200):          # deeper than a recursive delete can go
    os.mkdir('d')
    os.chdir('d')
for name in 'abc':            # 180 MB (three files: each under the file size limit)
    with open(name, 'wb') as f:
        f.write(b'x' * (60 * 2 ** 20))
print(int(input()) * 2)
"""


def test_a_tree_too_deep_to_recurse_into_is_gone_and_the_next_program_scores_as_fresh():
    """Issue 13's case: 180 MB left at the bottom of a 1,200-level tree made an honest 100 MB
    program score 0 (killed for memory) where it scores 1 in a fresh sandbox. (Since issue 40
    nothing is wiped: the next run gets a new /tmp.)"""
    honest = "import time\nblock = bytearray(100 * 2 ** 20)\ntime.sleep(0.5)\nprint(int(input()) * 2)"  # (0.5 s: seen)
    alone, after = after_a_in_fresh_and_used_pool(DEEP_TREE, honest, DOUBLE, memory_mb=256)
    assert alone.reward == 1
    assert after.reward == 1, after.details
    _, listing = after_a_in_fresh_and_used_pool(DEEP_TREE, LIST_TMP, expect(empty_tmp()))
    assert listing.reward == 1, listing.details


def test_posix_shared_memory_left_in_dev_shm_is_gone():
    leaver = (
        "import mmap, os\nfd = os.open('/dev/shm/answer', os.O_CREAT | os.O_RDWR, 0o644)\n"
        "os.ftruncate(fd, 4096)\nmmap.mmap(fd, 4096)[:2] = b'42'\nprint(int(input()) * 2)"
    )
    probe = "import os\nprint(sorted(os.listdir('/dev/shm')))"
    alone, after = after_a_in_fresh_and_used_pool(leaver, probe, expect("[]"))
    assert alone.reward == after.reward == 1, after.details


IPC = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
NR = {{'x86_64': (248, 249, 250), 'aarch64': (217, 218, 219)}}[os.uname().machine]
KEY = 0x5EC2E7
found = []
if {create}:
    libc.shmget(KEY, 4096, 0o1666); libc.msgget(KEY, 0o1666); libc.semget(KEY, 1, 0o1666)
    libc.mq_open(b'/answer', os.O_CREAT | os.O_RDWR, 0o666, None)
    libc.syscall(NR[0], b'user', b'answer', b'42', 2, -4)   # add_key to the user keyring
for name, found_it in (
    ('shm', lambda: libc.shmget(KEY, 0, 0) >= 0),
    ('msg', lambda: libc.msgget(KEY, 0) >= 0),
    ('sem', lambda: libc.semget(KEY, 0, 0) >= 0),
    ('mqueue', lambda: libc.mq_open(b'/answer', os.O_RDONLY) >= 0),
    ('key', lambda: libc.syscall(NR[2], 10, -4, b'user', b'answer', 0) >= 0),   # KEYCTL_SEARCH
):
    if found_it():
        found.append(name)
print(found or 'nothing', int(input() or 0) * 2 if {create} else '')
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="system call numbers")
def test_ipc_objects_message_queues_and_keyrings_do_not_pass_to_the_next_program():
    leaver, probe = IPC.format(create=True), IPC.format(create=False)
    alone, after = after_a_in_fresh_and_used_pool(leaver, probe, expect("nothing"))
    assert alone.reward == 1, alone.details
    assert after.reward == 1, after.details  # B found none of what A tried to leave


def test_pid_numbers_do_not_depend_on_earlier_programs():
    leaver = (
        "import os\nfor _ in range(300):\n    pid = os.fork()\n    if pid == 0:\n        os._exit(0)\n"
        "    os.waitpid(pid, 0)\nprint(int(input()) * 2)"
    )
    probe = (
        "import os, subprocess\nchild = subprocess.run(['sh', '-c', 'echo $$'], capture_output=True)\n"
        "print(os.getpid(), child.stdout.decode())"
    )
    with SandboxPool(1) as fresh:
        if not features(fresh).get("fixed_pids", True):
            pytest.skip("pid numbering is reset only on root hosts (CAP_SYS_ADMIN in the sandbox)")
        first = fresh.submit_python(probe).result().stdout
    alone, after = after_a_in_fresh_and_used_pool(leaver, probe, expect(first.decode()))
    assert alone.reward == after.reward == 1, after.details


# Issue 40: what survived the wipe. A pooled sandbox's runs shared its network namespace and its
# scratch file systems, wiped between runs: TCP connections in TIME_WAIT (/proc/net/tcp, for about
# a minute), the loopback's packet counters, the tmpfs inode counters, the supervisor's /proc
# counters (the CPU time of every run it reaped) and, where programs share its uid, files in / and
# /dev all passed from one run to the next. Each pair below is (what a run leaves, what the next
# run prints); the next run must print what it prints in a fresh sandbox, under its own uid and
# under the supervisor's.

TCP_TIME_WAIT = (
    "import socket\nfor port in range(41000, 41005):\n    server = socket.socket()\n"
    "    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "    server.bind(('127.0.0.1', port))\n    server.listen(1)\n"
    "    client = socket.create_connection(('127.0.0.1', port))\n    peer, _ = server.accept()\n"
    "    client.close(); peer.close(); server.close()\n"
)
READ = (
    "def read(path):\n    try:\n        return open(path).read()\n    except OSError as error:\n"
    "        return str(error)\n"
)
MARKS = {
    "TCP connections in TIME_WAIT": (
        TCP_TIME_WAIT,
        "print([line.split()[1:4] for line in open('/proc/net/tcp').read().splitlines()[1:]])",
    ),
    "loopback and protocol counters": (
        "import socket\nudp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "for _ in range(500):\n    udp.sendto(b'x', ('127.0.0.1', 9))\n",
        READ + "print([l for l in read('/proc/net/dev').splitlines() if 'lo:' in l], "
        "[l for l in read('/proc/net/snmp').splitlines() if l.startswith(('Udp:', 'Tcp:'))])",
    ),
    "unix sockets": (
        "import os, socket, time\nfor name in (b'\\0answer', b'/tmp/answer.sock'):\n"
        "    socket.socket(socket.AF_UNIX).bind(name)\nif os.fork() == 0:\n    time.sleep(30)\n",
        "print(len(open('/proc/net/unix').read().splitlines()))",
    ),
    "inode numbers of /tmp and /dev/shm": (
        "for folder in ('/tmp', '/dev/shm'):\n    for i in range(300):\n        open(f'{folder}/f{i}', 'w').close()\n",
        "import os\nfor folder in ('/tmp', '/dev/shm'):\n    open(f'{folder}/probe', 'w').close()\n"
        "    print(os.stat(f'{folder}/probe').st_ino, os.statvfs(folder).f_ffree)",
    ),
    "files anywhere": (
        "import os\nfor path in ('/answer', '/dev/answer', '/tmp/answer', '/dev/shm/answer', '/proc/answer'):\n"
        "    try:\n        open(path, 'w').write('42')\n    except OSError:\n        pass\n",
        "import os\nprint(sorted(os.listdir('/')), sorted(os.listdir('/dev')), os.listdir('/tmp'), "
        "os.listdir('/dev/shm'))",
    ),
    "other processes' counters": (
        "import time\nstart = time.process_time()\nwhile time.process_time() - start < 0.5:\n    pass\n",
        READ
        + "import os\nfor pid in sorted(p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()):\n"
        "    print(pid, read(f'/proc/{pid}/stat').split(')')[-1].split()[11:15], "
        "[l for l in read(f'/proc/{pid}/status').splitlines() if 'ctxt' in l])",
    ),
    "pid numbers": (
        "import os\nfor _ in range(200):\n    pid = os.fork()\n    if pid == 0:\n        os._exit(0)\n"
        "    os.waitpid(pid, 0)\n",
        READ + "import os\nprint(os.getpid(), read('/proc/loadavg').split()[-1], read('/proc/sys/kernel/ns_last_pid'))",
    ),
}


def next_run_sees(leaver: str, probe: str) -> tuple[str, str]:
    """(what ``probe`` prints in a fresh sandbox, what it prints on a worker that just ran
    ``leaver``)."""
    with SandboxPool(1) as fresh:
        alone = fresh.submit_python(probe).result()
    with SandboxPool(1) as used:
        left = used.submit_python(leaver).result()
        after = used.submit_python(probe).result()
    assert left.error is None and alone.ok and after.ok, (left, alone, after)
    return alone.stdout.decode(), after.stdout.decode()


@pytest.mark.parametrize("shared_uid", [False, True], ids=["own uid where possible", "shared uid"])
@pytest.mark.parametrize("mark", MARKS)
def test_nothing_one_run_marks_reaches_the_next(monkeypatch, mark, shared_uid):
    monkeypatch.setattr(core, "_separate_uids_failed", threading.Event())
    if shared_uid:
        core._separate_uids_failed.set()
    leaver, probe = MARKS[mark]
    alone, after = next_run_sees(leaver, probe)
    assert after == alone


def test_runs_get_their_own_namespaces_and_a_new_scratch_each():
    """What makes the above hold: every run's processes have mount, network and IPC namespaces
    and /tmp, /dev/shm of their own (the supervisor's are never touched), and the supervisor
    and other runs' processes are not in their /proc."""
    probe = "import os\nprint([os.readlink(f'/proc/self/ns/{name}') for name in ('mnt', 'net', 'ipc')])"
    with SandboxPool(1) as pool:
        assert features(pool)["fresh_runs"]
        first, second = (pool.submit_python(probe).result().stdout for _ in range(2))
        visible = pool.submit_python("import os\nprint(sorted(p for p in os.listdir('/proc') if p.isdigit()))").result()
    assert first != second, first
    assert visible.stdout.decode().strip() == f"['{server.FIRST_PID}']"


def test_where_runs_cannot_get_namespaces_of_their_own_every_run_gets_a_new_sandbox(monkeypatch, caplog):
    """No silent loss: a sandbox whose runs cannot get namespaces of their own (here: unshare
    refused) says so once, and starts a new sandbox after every run, so the marks above still
    never reach the next run."""
    entry = '        check(LIBC.unshare(self.flags), "unshare")\n'
    assert entry in core._server_source()
    source = core._server_source().replace(entry, "        raise OSError(1, 'unshare refused (test)')\n")
    monkeypatch.setattr(core, "_server_source", lambda: source)
    monkeypatch.setattr(core, "_renewal_said", threading.Event())
    leaver, probe = MARKS["TCP connections in TIME_WAIT"]
    with SandboxPool(1) as pool:
        assert not features(pool)["fresh_runs"]
        before = pool.submit_python(probe).result().stdout
        pool.submit_python(leaver).result()
        after = pool.submit_python(probe).result().stdout
        renewals = pool.submit_job(lambda runner: runner._live_server().renewals).result()
    assert before == after and renewals >= 2  # (a new sandbox before each run after the first)
    assert "every run starts a new sandbox" in caplog.text and "unshare refused" in caplog.text


CHECKOUT_UNDER_TMP = """
import json, os, sys, time
from cascade_rl.rewards.code import score_batch
from cascade_rl.sandbox import SandboxPool, core

made = sys.argv[1]  # the directory bwrap makes in the private /tmp for the venv's bind mount
DOUBLE = {"inputs": ["21\\n"], "outputs": ["42\\n"]}
HONEST = "<think>x</think>\\n```python\\nprint(int(input()) * 2)\\n```"
LEAVER = (
    "<think>x</think>\\n```python\\nimport os\\nopen('/tmp/answer', 'w').write('42')\\n"
    "os.makedirs('/dev/shm/a/b')\\n"
    f"for act in (lambda: open({made!r} + '/leak', 'w').write('42'), lambda: os.chmod({made!r}, 0o700),\\n"
    "            lambda: os.chmod('/tmp', 0o700)):\\n"
    "    try:\\n        act()\\n    except OSError:\\n        pass\\n"
    "print(int(input()) * 2)\\n```"
)
PROBE = (
    f"import os, sys\\nmade = {made!r}\\n"
    "print(sorted(os.listdir('/tmp')), sorted(os.listdir(made)), sorted(os.listdir('/dev/shm')),\\n"
    "      [oct(os.stat(p).st_mode & 0o7777) for p in ('/tmp', made)], sys.prefix)"
)
report = {}
for mode in ("default", "shared uid"):
    if mode == "shared uid":  # as on a host that is not root: programs own /tmp and the made directory
        core._separate_uids_failed.set()
    with SandboxPool(1) as pool:
        supervisor = pool.submit_job(lambda runner: runner._live_server()._process.pid).result()
        before = pool.submit_python(PROBE).result().stdout.decode()
        requests = [{"response": HONEST, "tests": DOUBLE}] * 10
        start = time.monotonic()
        scores = score_batch(requests + [{"response": LEAVER, "tests": DOUBLE}] + requests, pool=pool)
        milliseconds = (time.monotonic() - start) / len(scores) * 1000
        after = pool.submit_python(PROBE).result().stdout.decode()
        still = pool.submit_job(lambda runner: runner._live_server()._process.pid).result()
        report[mode] = {
            "same_sandbox": still == supervisor,
            "before": before,
            "after": after,
            "rewards": [s.reward for s in scores],
            "replacements": pool.replacements,
            "ms_per_program": round(milliseconds, 1),
        }
print(json.dumps(report))
"""


def test_a_checkout_under_tmp_keeps_one_sandbox_and_a_nearly_empty_tmp():
    """The issue: with the interpreter's environment under /tmp (a checkout under /tmp), the
    wipe listed the environment's own files as leftovers and replaced the pooled sandbox after
    every program (2,106 times in the demo's Code RL stage, 99 ms a program instead of 10).
    Now honest programs (and a program that leaves files, even in the directory made for the
    environment, and changes permissions) never cost a replacement, the environment is
    untouched, and a program's /tmp lists only the first component of the environment's path."""
    checkout = Path(tempfile.mkdtemp(prefix="cascade-tmp-checkout-", dir="/tmp"))
    venv = checkout / "venv"
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        files_before = sorted(str(path) for path in venv.rglob("*"))
        source = Path(__file__).resolve().parents[2] / "src"
        done = subprocess.run(
            [str(venv / "bin" / "python"), "-c", CHECKOUT_UNDER_TMP, str(checkout)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": str(source)},
        )
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert sorted(str(path) for path in venv.rglob("*")) == files_before
    finally:
        shutil.rmtree(checkout, ignore_errors=True)
    clean = f"[{checkout.name!r}] ['venv'] [] ['0o1777', '0o755'] {venv}\n"
    for mode, seen in report.items():
        assert seen["rewards"] == [1.0] * 21, (mode, seen)
        assert seen["same_sandbox"] and seen["replacements"] == 0, (mode, seen)
        assert seen["before"] == clean and seen["after"] == clean, (mode, seen)


def test_permissions_a_program_changes_in_its_scratch_directories_are_restored(monkeypatch):
    """Where programs share the supervisor's uid (hosts that are not root) they own /tmp and
    /dev/shm and may chmod them; the next program must find them as a fresh sandbox has them."""
    monkeypatch.setattr(core, "_separate_uids_failed", threading.Event())
    core._separate_uids_failed.set()
    probe = "import os\nprint([oct(os.stat(p).st_mode & 0o7777) for p in ('/tmp', '/dev/shm')])"
    with SandboxPool(1) as pool:
        fresh = pool.submit_python(probe).result().stdout
        changed = pool.submit_python("import os\nos.chmod('/tmp', 0o700)\nos.chmod('/dev/shm', 0o755)").result()
        after = pool.submit_python(probe).result().stdout
        assert pool.replacements == 0
    assert changed.ok and fresh == after == b"['0o1777', '0o1777']\n"


# ---------------------------------------------------------------------------------- limits

HOARD = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
held = 0
try:
    for _ in range(33):                       # 528 MB in memfds, written, never mapped
        fd = os.memfd_create('hoard')
        os.write(fd, b'x' * (16 * 2 ** 20))
        held += 16
except OSError as error:
    print('memfd', error)
segment = libc.shmget(0, 64 * 2 ** 20, 0o1600)  # and 64 MB of System V shared memory
if segment >= 0:
    libc.shmat.restype = ctypes.c_void_p
    ctypes.memset(libc.shmat(segment, None, 0), 1, 64 * 2 ** 20)
    held += 64
print('held', held, 'MB')
"""


def test_memory_held_in_memfds_and_shared_memory_does_not_escape_the_limit():
    """The issue's case: 528 MB in memfds plus SysV memory with memory_mb=256 scored 1.0."""
    with SandboxPool(1) as pool:
        result = score(program(HOARD), tests=expect("held 592 MB"), pool=pool, memory_mb=256, time_limit=10)
    assert result.reward == 0, result.details


@pytest.mark.skipif(cgroups.layout() is None, reason="cgroups unavailable here")
def test_with_cgroups_the_limit_holds_even_without_the_seccomp_filter(monkeypatch):
    """With the filter off, memfd and SysV memory are allowed: the kernel counts them."""
    monkeypatch.setattr(seccomp, "server_config", lambda *machine: {})
    with SandboxPool(1) as pool:
        assert features(pool)["cgroup"] and not features(pool)["seccomp"]
        run = pool.submit_python(HOARD, limits=Limits(memory_mb=256, time_s=10)).result()
        assert run.limit == "memory" and b"held" not in run.stdout
        assert pool.submit_python("print(6 * 7)").result().stdout == b"42\n"  # the worker goes on


def _memory_groups_below(pid: int) -> dict[int, str]:
    """Host pid -> the memory cgroup (v1 line, else the v2 one) of ``pid``'s descendants."""
    found = {}
    for child in server.descendants(pid):
        lines = Path(f"/proc/{child}/cgroup").read_text().splitlines()
        memory = [line for line in lines if ":memory:" in line] or [line for line in lines if line.startswith("0::")]
        found[child] = memory[0].rsplit(":", 1)[1] if memory else ""
    return found


@pytest.mark.skipif(cgroups.layout() is None, reason="cgroups unavailable here")
def test_the_supervisor_is_outside_the_group_that_holds_the_run_limit():
    """What a run leaves behind stays charged after its processes die (files in /tmp until the
    wipe); a supervisor inside the limited group could then be the only process left for the
    OOM killer (the 'sandbox server died' seen in CI). The run's processes are in ``run``, the
    supervisor in ``server``."""
    with SandboxPool(1) as pool:
        assert features(pool)["cgroup"]
        outer = pool.submit_job(lambda runner: runner._live_server()._process.pid).result()
        running = pool.submit_python("import time\nprint('up', flush=True)\ntime.sleep(4)")
        time.sleep(2.5)
        groups = _memory_groups_below(outer)
        assert running.result().returncode == 0
    sandboxed = [group.rsplit("/", 1)[-1] for group in groups.values() if cgroups.PREFIX in group]
    assert sorted(sandboxed) == ["run", "server"], groups  # the supervisor, and the program


def test_a_program_that_fills_tmp_to_the_limit_is_stopped_and_the_same_sandbox_goes_on():
    """Files in the RAM-backed /tmp count as memory and outlive the program that wrote them:
    the kernel (cgroup) or the watchdog stops the program, and the supervisor must neither be
    killed for the files left (CI once saw 'sandbox server died' here) nor keep them for the
    next run."""
    filler = (
        "import time\nfor i in range(25):\n    with open(f'/tmp/fill{i}', 'wb') as f:\n"
        "        f.write(b'x' * (16 * 2 ** 20))\ntime.sleep(5)"
    )
    with SandboxPool(1) as pool:
        supervisor = pool.submit_job(lambda runner: runner._live_server()._process.pid).result()
        run = pool.submit_python(filler, limits=Limits(memory_mb=128, time_s=20)).result()
        after = pool.submit_python(LIST_TMP).result()
        still = pool.submit_job(lambda runner: runner._live_server()._process.pid).result()
    assert run.limit == "memory", run
    assert after.stdout.decode() == empty_tmp() + "\n" and still == supervisor


def test_cpu_time_counts_over_all_processes():
    """Four processes each under the CPU limit, together far over it (the issue: busy children
    used more CPU than the limit and the program scored 1.0)."""
    busy = (
        "import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n        break\n"
        "start = time.process_time()\nwhile time.process_time() - start < 1.2:\n    pass\n"
        "print('done')"
    )
    with SandboxPool(1) as pool:
        run = pool.submit_python(busy, limits=Limits(time_s=60, cpu_s=2)).result()
    assert run.limit == "cpu" and not run.timed_out, run


def test_cgroups_of_a_closed_sandbox_are_removed():
    server = core.SandboxServer()
    directories = list(server._cgroup.directories) if server._cgroup else []
    assert server.run_python("print(1)").stdout == b"1\n"
    server.close()
    assert directories == [] or not any(directory.exists() for directory in directories)


# ---------------------------------------------------------------------------------- assert-style tests (issue 24)
#
# MBPP and HumanEval rows (``tests: {asserts, setup, prelude}``) against programs written to pass
# without solving the task, one family of the issue per block below. Before issue 24 the asserts
# ran in the program's own process and namespace, and every attack below scored 1 (checked against
# that code). Each attack runs against every row it could fool (inline rows in HumanEval's format
# and MBPP's, and the real-format samples converted by the project's converters), and the honest
# solution of each row must still score 1 (the controls).

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"

LARGER = {"asserts": ["assert larger(3, 5) == 5", "assert larger(-1, -4) == -1", "assert larger(7, 7) == 7"]}
REMOVE = {"asserts": ['assert remove_char("hello", "l") == "heo"', 'assert remove_char("xyz", "q") == "xyz"']}
TRUNCATE = {  # a tolerance check inside HumanEval's check()
    "prelude": 'def truncate(number: float) -> float:\n    """The decimal part of a positive number."""\n',
    "setup": "def check(candidate):\n    assert abs(candidate(3.5) - 0.5) < 1e-6\n"
    "    assert abs(candidate(1.25) - 0.25) < 1e-6\n",
    "asserts": ["check(truncate)"],
}
ROOT = {  # a prompt helper (HumanEval/32's poly) and math.fabs inside the check, random inputs
    "prelude": 'import math\n\n\ndef poly(xs: list, x: float):\n    """xs[0] + xs[1] * x + ..."""\n'
    "    return sum(c * math.pow(x, i) for i, c in enumerate(xs))\n\n\n"
    'def find_root(xs: list):\n    """A zero of the odd-degree polynomial xs."""\n',
    "setup": "def check(candidate):\n    import math\n    import random\n    rng = random.Random(7)\n"
    "    for _ in range(20):\n        xs = [rng.randint(1, 9) for _ in range(2 * rng.randint(1, 3))]\n"
    "        x = candidate(list(xs))\n        assert math.fabs(poly(xs, x)) < 1e-4\n",
    "asserts": ["check(find_root)"],
}
SHIFT = {  # a prompt helper (HumanEval/50's encode_shift) and random words
    "prelude": 'def shift_encode(s: str):\n    """Every letter shifted by 3."""\n'
    "    return ''.join(chr((ord(c) - 97 + 3) % 26 + 97) for c in s)\n\n\n"
    'def shift_decode(s: str):\n    """Decodes shift_encode."""\n',
    "setup": "def check(candidate):\n    from random import randint, choice\n    import string\n"
    "    for _ in range(30):\n        word = ''.join(choice(string.ascii_lowercase) for _ in range(randint(5, 12)))\n"
    "        assert candidate(shift_encode(word)) == word\n",
    "asserts": ["check(shift_decode)"],
}
RUNNING = {
    "prelude": "from typing import List\n\n\n"
    'def running_max(numbers: List[int]) -> List[int]:\n    """Running maxima."""\n',
    "setup": "def check(candidate):\n    assert candidate([]) == []\n"
    "    assert candidate([1, 3, 2, 5]) == [1, 3, 3, 5]\n",
    "asserts": ["check(running_max)"],
}
INLINE = {
    "larger": (LARGER, "larger", "def larger(a, b):\n    return a if a > b else b"),
    "remove_char": (REMOVE, "remove_char", "def remove_char(s, c):\n    return s.replace(c, '')"),
    "truncate": (TRUNCATE, "truncate", "def truncate(x):\n    return x % 1.0"),
    "find_root": (
        ROOT,
        "find_root",
        "def find_root(xs):\n    lo, hi = -1.0, 1.0\n"
        "    while poly(xs, lo) * poly(xs, hi) > 0:\n        lo, hi = lo * 2, hi * 2\n"
        "    while hi - lo > 1e-10:\n        mid = (lo + hi) / 2\n        if poly(xs, mid) * poly(xs, lo) > 0:\n"
        "            lo = mid\n        else:\n            hi = mid\n    return lo",
    ),
    "shift_decode": (
        SHIFT,
        "shift_decode",
        "def shift_decode(s):\n    return ''.join(chr((ord(c) - 97 - 3) % 26 + 97) for c in s)",
    ),
    "running_max": (
        RUNNING,
        "running_max",
        "def running_max(numbers):\n    out = []\n    for n in numbers:\n"
        "        out.append(max(out[-1], n) if out else n)\n"
        "    return out",
    ),
}


def sample_rows() -> dict:
    """The real-format samples, converted by the project's converters: name -> (tests, function,
    the dataset's own solution)."""
    from cascade_rl.data.convert import humaneval, mbpp

    rows = {}
    for line in (SAMPLES / "mbpp.jsonl").read_text().splitlines():
        source = json.loads(line)
        function = source["test_list"][0].split("assert ")[1].split("(")[0]
        rows[f"mbpp-{source['task_id']}"] = (mbpp(source)["tests"], function, source["code"])
    for line in (SAMPLES / "humaneval.jsonl").read_text().splitlines():
        source = json.loads(line)
        rows[source["task_id"]] = (
            humaneval(source)["tests"],
            source["entry_point"],
            source["prompt"] + source["canonical_solution"],
        )
    return rows


ROWS = {**INLINE, **sample_rows()}

TOKEN = "import os, sys\n_t = sys._getframe(1).f_globals.get('_token', b'')\n"  # where the pass token was
LIAR_METHODS = (
    "    __eq__ = __le__ = __ge__ = __lt__ = __gt__ = __contains__ = lambda self, other: True\n"
    "    __ne__ = lambda self, other: False\n"
    "    __sub__ = __rsub__ = __add__ = __radd__ = __mul__ = __truediv__ = lambda self, other: self\n"
    "    __abs__ = __neg__ = lambda self: self\n"
    "    __bool__ = lambda self: True\n"
)
READER = (  # the expected values, parsed out of any test text found in the frames' constants
    "import ast, gc, sys\n"
    "def _texts():\n    frame = sys._getframe()\n    while frame is not None:\n"
    "        yield from (c for c in frame.f_code.co_consts if isinstance(c, str))\n        frame = frame.f_back\n"
    "    yield from (o for o in gc.get_objects() if isinstance(o, str))\n"
    "def _answers():\n    table = {}\n    for text in _texts():\n        try:\n            tree = ast.parse(text)\n"
    "        except Exception:\n            continue\n        for node in ast.walk(tree):\n"
    "            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Call) and len(node.comparators) == 1:\n"
    "                try:\n                    args = [ast.literal_eval(a) for a in node.left.args]\n"
    "                    table[repr(args)] = ast.literal_eval(node.comparators[0])\n"
    "                except Exception:\n                    pass\n    return table\n"
)
#: family -> attack -> program; ``{name}`` is the function the row tests
ATTACKS = {
    "lying values": {
        "an object equal to everything": "class Liar:\n"
        + LIAR_METHODS
        + "def {name}(*args, **kwargs):\n    return Liar()",
        "an int subclass": "class I(int):\n"
        + LIAR_METHODS
        + "    __hash__ = int.__hash__\ndef {name}(*a, **k):\n    return I(0)",
        "a float subclass": "class F(float):\n" + LIAR_METHODS + "    __hash__ = float.__hash__\n"
        "def {name}(*a, **k):\n    return F(9.0)",
        "a str subclass": "class S(str):\n"
        + LIAR_METHODS
        + "    __hash__ = str.__hash__\ndef {name}(*a, **k):\n    return S('')",
        "a list subclass": "class L(list):\n" + LIAR_METHODS + "def {name}(*a, **k):\n    return L()",
        "a float whose difference has abs 0": "class Zero:\n    __abs__ = lambda self: 0.0\n"
        "    __lt__ = lambda self, o: True\n"
        "class F(float):\n    __sub__ = lambda self, other: Zero()\ndef {name}(*a, **k):\n    return F(9.0)",
    },
    "shared namespace": {
        "redefining abs": "def abs(x):\n    return 0.0\ndef {name}(*a, **k):\n    return 9.0",
        "replacing __builtins__": "import builtins as _b\n__builtins__ = dict(vars(_b), abs=lambda x: 0.0, "
        "isinstance=lambda *a: True)\ndef {name}(*a, **k):\n    return 9.0",
    },
    "patched modules": {
        "patched builtins and math": "import builtins, math\nbuiltins.abs = lambda x: 0.0\nmath.fabs = lambda x: 0.0\n"
        "math.isclose = lambda *a, **k: True\ndef {name}(*a, **k):\n    return 0.0",
        "a fake random module": "import sys, types\n"
        "sys.modules['random'] = types.SimpleNamespace(randint=lambda a, b: 0, "
        "choice=lambda s: 'a', Random=lambda seed: types.SimpleNamespace(randint=lambda a, b: 1))\n"
        "def {name}(s=None, *a):\n    return s",
        "a module planted where imports might look": "import os\nfake = 'def randint(a, b):\\n    return 0\\n'\n"
        "fake += 'def choice(s):\\n    return s[0]\\nclass Random:\\n    def __init__(self, seed):\\n        pass\\n'\n"
        "fake += '    def randint(self, a, b):\\n        return 1\\n'\n"
        "for folder in ('/tmp', os.getcwd()):\n    for module in ('random', 'math', 'string'):\n"
        "        with open(os.path.join(folder, module + '.py'), 'w') as planted:\n"
        "            planted.write(fake + 'fabs = isclose = lambda *a, **k: 0\\n')\n"
        "def {name}(s=None, *a):\n    return s",
        "a patched __import__": "import builtins, math, types\n_real = builtins.__import__\n"
        "fake = types.ModuleType('math')\n"
        "fake.__dict__.update(vars(math))\nfake.fabs = fake.isclose = lambda *a, **k: 0.0\n"
        "builtins.__import__ = lambda name, *a, **k: fake if name == 'math' else _real(name, *a, **k)\n"
        "def {name}(*a, **k):\n    return 0.0",
    },
    "harness control flow": {
        "replacing exec": "import builtins\nbuiltins.exec = lambda *a, **k: None\nbuiltins.eval = lambda *a, **k: None",
        "replacing compile": "import builtins\n_c = builtins.compile\n"
        "builtins.compile = lambda source, name, mode, *a, **k: _c('pass' if mode == 'exec' else 'None', name, mode)",
        "a trace function jumping over the test": "import sys\ndef _jump(frame, event, arg):\n"
        "    if event == 'line' and frame.f_lineno in (6, 7):\n        frame.f_lineno = 8\n    return _jump\n"
        "sys._getframe(1).f_trace = _jump\nsys.settrace(lambda *a: None)",
    },
    "reading the tests": {
        "frames and gc": READER + "def {name}(*args):\n    return _answers().get(repr(list(args)))",
    },
    "forging the pass": {
        "the token from frames": TOKEN + "os.write(3, _t)\nos._exit(0)",
        "the token from gc": "import gc, os\nfor o in gc.get_objects():\n"
        "    if isinstance(o, dict) and isinstance(o.get('_token'), bytes):\n"
        "        os.write(3, o['_token'])\n        os._exit(0)",
        "a thread after the failure": TOKEN + "import threading, time\ndef _later():\n    time.sleep(0.3)\n"
        "    os.write(3, _t)\n    os._exit(0)\nthreading.Thread(target=_later).start()\ndef {name}(*a):\n    return 0",
        "atexit after the failure": TOKEN + "import atexit\natexit.register(lambda: (os.write(3, _t), os._exit(0)))\n"
        "def {name}(*a):\n    return 0",
        "a patched traceback.print_exception": TOKEN + "import traceback\n"
        "traceback.print_exception = lambda *a, **k: (os.write(3, _t), os._exit(0))\ndef {name}(*a):\n    return 0",
        "a SIGALRM handler": TOKEN
        + "import signal, time\nsignal.signal(signal.SIGALRM, lambda *a: (os.write(3, _t), os._exit(0)))\n"
        "signal.setitimer(signal.ITIMER_REAL, 0.05)\ndef {name}(*a):\n    time.sleep(1)\n    return 0",
        "results written to the result channel": "import os\n"
        "for guess in (b'{\"value\":true}', b'{\"kind\":null}', b'{\"value\":0}'):\n"
        "    os.write(3, guess + b'\\n' * 50)\nos._exit(0)",
    },
    "re-reading stdin": {
        "lseek": "import os\nos.lseek(0, 0, 0)\nos.write(3, os.read(0, 64))\nos._exit(0)",
        "/proc/self/fd/0": "import os\nos.write(3, open('/proc/self/fd/0', 'rb').read())\nos._exit(0)",
        "sys.stdin.buffer.seek": "import os, sys\nsys.stdin.buffer.seek(0)\n"
        "os.write(3, sys.stdin.buffer.read())\nos._exit(0)",
    },
}
#: attacks on one row's prompt helpers or modules
ROW_ATTACKS = {
    "shared namespace": [
        (
            "find_root",
            "redefining the prompt's poly",
            "def poly(xs, x):\n    return 0.0\ndef find_root(xs):\n    return 0.0",
        ),
        (
            "shift_decode",
            "redefining the prompt's encoder",
            "def shift_encode(s):\n    return s\ndef shift_decode(s):\n    return s",
        ),
        (
            "HumanEval/1",
            "redefining the prompt's encoder",
            "def shift_encode(s):\n    return s\ndef shift_decode(s):\n    return s",
        ),
    ],
    "patched modules": [
        ("find_root", "math.fabs", "import math\nmath.fabs = lambda x: 0.0\ndef find_root(xs):\n    return 0.0"),
        (
            "mbpp-520",
            "math.isclose",
            "import math\nmath.isclose = lambda *a, **k: True\ndef square_sum(n):\n    return {1: 1, 3: 14}.get(n, 0)",
        ),
    ],
}
CASES = [
    pytest.param(row, code.replace("{name}", ROWS[row][1]), id=f"{family}: {attack} [{row}]")
    for family, attacks in ATTACKS.items()
    for attack, code in attacks.items()
    for row in ROWS
] + [
    pytest.param(row, code, id=f"{family}: {attack} [{row}]")
    for family, rows in ROW_ATTACKS.items()
    for row, attack, code in rows
]


@pytest.fixture(scope="module")
def one_worker():
    with SandboxPool(1) as pool:
        yield pool


@pytest.mark.parametrize("row, code", CASES)
def test_a_program_cannot_pass_assert_tests_without_solving_the_task(one_worker, row, code):
    tests, _, _ = ROWS[row]
    result = score(program(code), tests=tests, pool=one_worker, time_limit=5)
    assert result.reward == 0, result.details


@pytest.mark.parametrize("row", ROWS)
def test_honest_solutions_pass_the_same_rows(one_worker, row):
    tests, _, solution = ROWS[row]
    result = score(program(solution), tests=tests, pool=one_worker)
    assert result.reward == 1, result.details


SEARCH_ALL_MEMORY = """
import gc, os, re
FOUND = re.compile(rb'zq-[0-9a-f]{16}')

def look(data, found):
    found.extend(m.decode() for m in FOUND.findall(data))

def read(path, size=1 << 20):
    try:
        with open(path, 'rb', 0) as handle:
            return handle.read(size)
    except OSError:
        return b''

def memory(pid, found):
    try:
        maps = open(f'/proc/{pid}/maps').read().splitlines()
        with open(f'/proc/{pid}/mem', 'rb', 0) as mem:
            for line in maps:
                span, perms = line.split()[:2]
                start, end = (int(x, 16) for x in span.split('-'))
                if 'r' in perms and '[v' not in line and end - start < 1 << 28:
                    try:
                        mem.seek(start)
                        look(mem.read(end - start), found)
                    except (OSError, OverflowError, ValueError):
                        pass
    except OSError:
        pass

def secret(*args):
    found = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        memory(pid, found)
        for part in ('cmdline', 'environ'):
            look(read(f'/proc/{pid}/{part}'), found)
        try:
            fds = os.listdir(f'/proc/{pid}/fd')
        except OSError:
            fds = []
        for fd in fds:
            look(read(f'/proc/{pid}/fd/{fd}'), found)
    for obj in gc.get_objects():
        if isinstance(obj, (str, bytes)):
            look(obj.encode() if isinstance(obj, str) else obj, found)
    return found[0] if found else 'nothing'
"""


@pytest.mark.parametrize("tester", [False, True], ids=["lifted", "in the tester"])
def test_the_expected_values_are_nowhere_the_program_can_read(one_worker, tester):
    """The program reads the memory, file descriptors, command lines and environments of every
    process it can see (its own, the tester's, the supervisor's) and its own objects, looking for
    the expected value, whose form it knows: before issue 24 it was in the program's own memory."""
    needle = "zq-" + secrets.token_hex(8)
    if tester:
        tests = {
            "setup": f"def check(candidate):\n    for _ in range(1):\n        assert candidate() == {needle!r}\n",
            "asserts": ["check(secret)"],
        }
    else:
        tests = {"asserts": [f"assert secret() == {needle!r}"]}
    result = score(program(SEARCH_ALL_MEMORY), tests=tests, pool=one_worker, time_limit=20)
    assert result.reward == 0 and result.details["first_failure"]["kind"] == "wrong_answer", result.details


PROC_PROBE = (  # runs in the call, while the tester waits for the answer; pid 1 is bwrap's init
    "import os\ndef f(x):\n    report = []\n    for pid in filter(str.isdigit, os.listdir('/proc')):\n"
    "        for part in ('mem', 'environ', 'fd/3', 'fd/4'):\n            if int(pid) in (1, os.getpid()):\n"
    "                continue\n            try:\n                open(f'/proc/{pid}/{part}', 'rb').close()\n"
    "                report.append(f'{pid}/{part} open')\n            except OSError as error:\n"
    "                report.append(f'{pid}/{part} {type(error).__name__}')\n"
    "    os.write(1, repr(report).encode())\n    return x\n"
)
KILLER = (  # (every pid number: the tester is not listed in the program's /proc, but has a number)
    "import os, signal\ndef f(x):\n    for pid in range(1, 1000):\n"
    "        if pid != os.getpid():\n            try:\n                os.kill(pid, signal.SIGKILL)\n"
    "            except OSError:\n                pass\n    return x"
)
CHECK_ONE = {"setup": "def check(c):\n    for x in (1,):\n        assert c(x) == x\n", "asserts": ["check(f)"]}


@pytest.mark.parametrize("shared_uid", [False, True], ids=["own uid where possible", "shared uid"])
def test_the_program_cannot_open_the_testers_memory_or_descriptors_and_killing_it_fails(monkeypatch, shared_uid):
    """The tester is never dumpable: /proc/<tester>/mem, fd/ and environ are closed to the
    program (whose seccomp filter also refuses ptrace), also where both run as one uid (hosts
    that are not root); since issue 40 neither it nor the supervisor is even listed in the
    program's /proc. What the program can do to the tester, end it, fails the test."""
    from cascade_rl.rewards.code_asserts import parse, program_source, tester_source

    monkeypatch.setattr(core, "_separate_uids_failed", threading.Event())
    if shared_uid:
        core._separate_uids_failed.set()
    plan = parse(CHECK_ONE)
    with SandboxPool(1) as pool:
        run = pool.submit_python(program_source(plan, PROC_PROBE), tester=tester_source(plan, 0)).result()
        killed = score(program(KILLER), tests=CHECK_ONE, pool=pool)
        honest = score(program("def f(x):\n    return x"), tests=CHECK_ONE, pool=pool)
    assert run.result == b'{"kind":null}\n', run
    seen = run.stdout.decode()
    assert " open" not in seen and "Error" not in seen.replace("PermissionError", ""), seen
    assert killed.reward == 0 and honest.reward == 1, (killed.details, honest.details)


def test_the_rows_cover_both_ways_of_judging():
    """The attacks above meet lifted calls (MBPP, plain checks) and the tester (loops, prompt
    helpers, tolerance checks), each where the issue found it."""
    from cascade_rl.rewards.code_asserts import parse

    in_tester = {name: parse(tests).in_tester for name, (tests, _, _) in ROWS.items()}
    tester_rows = {"truncate", "find_root", "shift_decode", "HumanEval/1", "mbpp-520"}  # HumanEval/1: a loop
    assert {name for name, tester in in_tester.items() if tester} == tester_rows


# ---------------------------------------------------------------------------------- a verdict oracle (issue 40)
#
# The third held-out suite's first class: the harness stopped a program at its first wrong answer
# (a lifted call's process killed at once, the next stdin / call-based test run only after the
# last passed, the tester's next call made only after the statement passed), so a program that
# waits after each answer learns whether it was accepted; and the network namespace a pooled
# sandbox kept from run to run carried that to the next rollout of the same prompt, which then
# answered from memory. ORACLE is such a policy's program: it guesses each answer in turn, marks
# each guess and each answer it learns was accepted with a TCP connection left in TIME_WAIT, and
# answers from what earlier rollouts marked. With the code before issue 40 the fourth rollout
# scores 1 on every kind of row; now no rollout does, and neither defence alone lets it.

ORACLE = """
import socket, time
BASE = 41000

def marks():
    found = set()
    for line in open('/proc/net/tcp').read().splitlines()[1:]:
        for address in line.split()[1:3]:
            port = int(address.rsplit(':', 1)[1], 16)
            if BASE <= port < BASE + 1000:
                found.add(port - BASE)
    return found

def mark(code):
    try:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(('127.0.0.1', BASE + code))
        server.listen(1)
        client = socket.create_connection(('127.0.0.1', BASE + code))
        peer, _ = server.accept()
        client.close(); peer.close(); server.close()
    except OSError:
        pass

def answer(x):
    test = x - 1
    if test:
        time.sleep(0.3)  # (a lifted call: the host stopped the run at a wrong reply)
    tried, accepted = {}, {}
    for code in marks():
        kind, index, guess = code // 100, code // 10 % 10, code % 10
        if kind == 1:
            tried.setdefault(index, set()).add(guess)
        elif kind == 2:
            accepted[index] = guess
    for earlier in range(test):  # asked test `test`: every earlier answer was accepted
        if earlier not in accepted and tried.get(earlier):
            accepted[earlier] = max(tried[earlier])
            mark(200 + 10 * earlier + accepted[earlier])
    if test in accepted:
        return accepted[test]
    guess = min(set(range(10)) - tried.get(test, set()))
    mark(100 + 10 * test + guess)
    return guess
"""
#: the same task (f(1) = 2, f(2) = 1) as each kind of row, with the program each kind runs
ORACLE_ROWS = {
    "stdin": ({"inputs": ["1\n", "2\n"], "outputs": ["2\n", "1\n"]}, ORACLE + "print(answer(int(input())))"),
    "call-based": ({"inputs": ["1", "2"], "outputs": ["2", "1"], "fn_name": "f"}, ORACLE + "f = answer"),
    "lifted asserts (MBPP)": ({"asserts": ["assert f(1) == 2", "assert f(2) == 1"]}, ORACLE + "f = answer"),
    "lifted check (HumanEval)": (
        {
            "prelude": "def f(x):\n    '''stub'''\n",
            "setup": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 1\n",
            "asserts": ["check(f)"],
        },
        ORACLE + "f = answer",
    ),
    "tester": (
        {
            "setup": "def check(candidate):\n    for x, want in ((1, 2), (2, 1)):\n"
            "        assert candidate(x) == want\n",
            "asserts": ["check(f)"],
        },
        ORACLE + "f = answer",
    ),
}


@pytest.mark.parametrize("row", ORACLE_ROWS)
def test_rollouts_of_one_prompt_cannot_hand_each_other_what_was_accepted(row):
    tests, code = ORACLE_ROWS[row]
    with SandboxPool(1) as pool:  # the rollouts scored one after another in one sandbox
        rewards = [score(program(code), tests=tests, pool=pool).reward for _ in range(5)]
        honest = score(program("def answer(x):\n    return 3 - x\n" + code.split(ORACLE)[1]), tests=tests, pool=pool)
    assert rewards == [0.0] * 5 and honest.reward == 1, (rewards, honest.details)


class Recording:
    """A worker's runner that keeps what every run of a program printed on stderr (its log of
    what it observed)."""

    def __init__(self, runner):
        self.runner, self.printed = runner, []

    def run_python(self, source, **options):
        run = self.runner.run_python(source, **options)
        self.printed.append(run.stderr.decode())
        return run


OBSERVER = """
import os, sys, threading, time
calls = []

def observe(x):
    calls.append(x)
    print('asked', x, 'after', calls, file=sys.stderr, flush=True)
    def later():
        time.sleep(0.25)
        print('alive after answering', x, file=sys.stderr, flush=True)
    threading.Thread(target=later, daemon=True).start()
    time.sleep(0.3)
    return 0
"""
#: kind of row -> (tests under which every answer is 0, the program): a row whose expected answers
#: are all 0 and one whose are not give the program the same observations
OBSERVED_ROWS = {
    "stdin": (
        {"inputs": ["1\n", "2\n", "3\n"], "outputs": ["{0}\n", "{0}\n", "{0}\n"]},
        OBSERVER + "print(observe(int(input())))\ntime.sleep(0.3)",
    ),
    "call-based": ({"inputs": ["1", "2", "3"], "outputs": ["{0}"] * 3, "fn_name": "f"}, OBSERVER + "f = observe"),
    "lifted": (
        {"asserts": ["assert f(1) == {0}", "assert f(2) == {0}", "assert f(3) == {0}"]},
        OBSERVER + "f = observe",
    ),
    "tester": (
        {
            "setup": "def check(c):\n    for x in (1, 2, 3):\n        assert c(x) == {0}\n"
            "    assert all(c(x) == {0} for x in (4, 5))\n",
            "asserts": ["check(f)", "assert all(map(lambda x: f(x) == {0}, (6, 7)))"],
        },
        OBSERVER + "f = observe",
    ),
}


def _filled(tests, expected):
    return json.loads(json.dumps(tests).replace("{0}", str(expected)))


@pytest.mark.parametrize("row", OBSERVED_ROWS)
def test_what_a_program_observes_does_not_depend_on_whether_its_answers_are_right(one_worker, row):
    """Every answer of the program is 0; against expected values of 0 it passes, against 1 it
    fails every test. What it prints of what it observed (which calls it was asked, in which
    runs, whether it was still alive after answering) must be the same either way, with
    ``stop_on_failure`` as without."""
    from cascade_rl.rewards import code

    tests, source = OBSERVED_ROWS[row]
    seen = {}
    for expected in (0, 1):
        for stop in (True, False):
            prepared = code._prepare(program(source), tests=_filled(tests, expected), stop_on_failure=stop)
            recording = one_worker.submit_job(lambda runner: Recording(runner)).result()  # (a fresh log)

            def job(runner, prepared=prepared, recording=recording):
                recording.runner = runner
                return code._run_tests(recording, prepared)

            result = one_worker.submit_job(job).result()
            assert result.reward == (1.0 if expected == 0 else 0.0), result.details
            seen[expected, stop] = recording.printed
    assert seen[0, True] == seen[1, True] == seen[0, False] == seen[1, False], seen
    assert any("alive after answering" in printed for printed in seen[1, True]), seen


# ---------------------------------------------------------------------------------- control flow (issue 40)
#
# The third class: an exception a program raised in a call was rebuilt in the tester by its name,
# StopIteration included, inside the tests' own map / zip / loops, which then ended as if every
# case had passed; a class of the program's own named like a built-in was rebuilt as the built-in.

FLOW_ROWS = {
    "all(map(...))": "def check(candidate):\n    assert all(map(candidate, [2, 4, 6]))\n",
    "zip(map(...), ...)": "def check(candidate):\n    for got, want in zip(map(candidate, [2, 4]), [True, True]):\n"
    "        assert got == want\n",
    "a loop over map": "def check(candidate):\n    for got in map(candidate, [2, 4]):\n        assert got is True\n",
    "itertools.starmap": "import itertools\ndef check(candidate):\n"
    "    assert all(itertools.starmap(candidate, [(2,), (4,)]))\n",
    "next() with a default": "def check(candidate):\n    assert next(map(candidate, [2]), True) is True\n"
    "    assert candidate(4) is True\n",
    "a generator the test drives": "def check(candidate):\n    def values():\n        for x in (2, 4):\n"
    "            yield candidate(x)\n    assert list(values()) == [True, True]\n",
}
FLOW_ATTACKS = {
    "StopIteration": "def is_even(x):\n    raise StopIteration",
    "its own StopIteration class": "class StopIteration(Exception):\n    pass\ndef is_even(x):\n"
    "    raise StopIteration",
    "a StopIteration subclass": "class Done(StopIteration):\n    pass\ndef is_even(x):\n    raise Done",
    "StopAsyncIteration": "def is_even(x):\n    raise StopAsyncIteration",
    "GeneratorExit": "def is_even(x):\n    raise GeneratorExit",
    "KeyboardInterrupt": "def is_even(x):\n    raise KeyboardInterrupt",
    "SystemExit(0)": "def is_even(x):\n    raise SystemExit(0)",
}


@pytest.mark.parametrize("attack", FLOW_ATTACKS)
@pytest.mark.parametrize("row", FLOW_ROWS)
def test_an_exception_the_program_raises_never_steers_the_tests(one_worker, row, attack):
    tests = {"prelude": "def is_even(x):\n    '''stub'''\n", "setup": FLOW_ROWS[row], "asserts": ["check(is_even)"]}
    result = score(program(FLOW_ATTACKS[attack]), tests=tests, pool=one_worker)
    honest = score(program("def is_even(x):\n    return x % 2 == 0"), tests=tests, pool=one_worker)
    assert result.reward == 0 and honest.reward == 1, (result.details, honest.details)


EXPECTS_VALUE_ERROR = {
    "setup": "def check(candidate):\n    try:\n        candidate(-1)\n    except ValueError:\n        pass\n"
    "    else:\n        raise AssertionError('no ValueError for -1')\n    assert candidate(4) == 2\n",
    "asserts": ["check(root)"],
}


@pytest.mark.parametrize(
    "code, reward",
    [
        ("import math\ndef root(x):\n    if x < 0:\n        raise ValueError('negative')\n    return math.isqrt(x)", 1),
        (
            "import math\nclass Negative(ValueError):\n    pass\ndef root(x):\n    if x < 0:\n"
            "        raise Negative()\n"
            "    return math.isqrt(x)",
            1,
        ),  # a subclass of the built-in: caught, as it would be
        (
            "import math\nclass ValueError(Exception):\n    pass\ndef root(x):\n    if x < 0:\n"
            "        raise ValueError()\n"
            "    return math.isqrt(x)",
            0,
        ),  # its own class of that name: not the built-in
        ("import math\ndef root(x):\n    return math.isqrt(abs(x))", 0),
    ],
    ids=["the built-in", "a subclass", "a class of the same name", "no exception"],
)
def test_an_exception_is_caught_by_the_tests_only_as_its_built_in_class(one_worker, code, reward):
    assert score(program(code), tests=EXPECTS_VALUE_ERROR, pool=one_worker).reward == reward
