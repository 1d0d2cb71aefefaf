"""One-shot runs through bwrap (sandbox/core.py, SPEC sections 6-7): results, limits, binds,
environment, the python fast path and the rlimits-only fallback."""

import logging
import os
import shutil
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

from cascade_rl import sandbox
from cascade_rl.sandbox import Limits, cgroups, core, seccomp
from cascade_rl.sandbox.core import SandboxServer, isolation

SHORT = Limits(time_s=1.0)


def test_run_passes_stdin_and_returns_output_and_status():
    result = sandbox.run(
        [
            "python",
            "-c",
            "import sys; d = sys.stdin.read(); print(d.upper()); print('err', file=sys.stderr); sys.exit(3)",
        ],
        stdin=b"abc",
    )
    assert (result.stdout, result.stderr, result.returncode) == (b"ABC\n", b"err\n", 3)
    assert not result.timed_out and not result.output_truncated and result.limit is None
    assert result.stdout_text == "ABC\n" and not result.ok


def test_missing_program_is_a_clear_failure():
    result = sandbox.run(["no-such-program-xyz"])
    assert result.returncode == 127 and b"cannot start the program" in result.stderr


@pytest.mark.parametrize("argv", [[], "python -c pass", [1, 2]])
def test_bad_argv_is_rejected(argv):
    with pytest.raises(ValueError, match="argv"):
        sandbox.run(argv)


@pytest.mark.parametrize(
    "field, value", [("time_s", 0), ("memory_mb", -1), ("processes", "8"), ("output_bytes", True), ("open_files", 3)]
)
def test_bad_limits_name_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        Limits(**{field: value})


def test_cpu_limit_defaults_to_time_plus_one():
    assert Limits(time_s=2).effective_cpu_s == 3 and Limits(time_s=2, cpu_s=1).effective_cpu_s == 1


def test_timeout_kills_the_whole_process_group_quickly():
    start = time.monotonic()
    result = sandbox.run(["sh", "-c", "sleep 30 & sleep 30"], limits=SHORT)
    assert result.timed_out and result.limit == "time" and result.returncode is None
    assert result.killed_by_signal == 9
    assert time.monotonic() - start < 8


def test_cpu_limit_stops_a_busy_program():
    result = sandbox.run(
        ["python", "-c", "while True: pass"], limits=Limits(time_s=60, cpu_s=1)
    )  # the CPU limit comes first
    assert result.limit == "cpu" and result.returncode is not None and result.returncode < 0
    assert not result.timed_out


def test_output_cap_truncates_and_stops_the_program():
    result = sandbox.run(
        ["python", "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"],
        limits=Limits(time_s=5, output_bytes=100_000),
    )
    assert result.output_truncated and result.limit == "output"
    assert len(result.stdout) == 100_000 and result.seconds < 4


def test_environment_is_minimal_plus_what_the_caller_adds(monkeypatch):
    monkeypatch.setenv("CASCADE_TEST_SECRET", "hunter2")
    result = sandbox.run(["python", "-c", "import os; print(sorted(os.environ.items()))"], env={"EXTRA": "yes"})
    assert b"hunter2" not in result.stdout and b"('EXTRA', 'yes')" in result.stdout
    assert b"('HOME', '/tmp')" in result.stdout


@pytest.mark.usefixtures("bwrap_only")
def test_workdir_is_bound_writable_or_read_only(tmp_path):
    (tmp_path / "data.txt").write_text("42\n")
    script = "cat data.txt; echo written > out.txt"
    result = sandbox.run(["sh", "-c", script], workdir=tmp_path)
    assert result.stdout == b"42\n" and (tmp_path / "out.txt").read_text() == "written\n"
    (tmp_path / "out.txt").unlink()
    result = sandbox.run(["sh", "-c", script], workdir=tmp_path, writable_workdir=False)
    assert result.stdout == b"42\n" and result.returncode != 0
    assert not (tmp_path / "out.txt").exists()


@pytest.mark.usefixtures("bwrap_only")
def test_installed_packages_work_inside():
    result = sandbox.run(["python", "-c", "import hypothesis, json; print('ok')"])
    assert result.stdout == b"ok\n", result.stderr


def test_run_python_has_a_normal_stdio_and_argv():
    source = (
        "import sys\nname = input()\nsys.stdout.buffer.write(b'raw ')\nsys.stdout.flush()\n"
        "print('hello', name, sys.argv, __name__)"
    )
    result = sandbox.run_python(source, stdin=b"bob\n", filename="solution.py")
    assert result.stdout == b"raw hello bob ['solution.py'] __main__\n", result.stderr


def test_run_python_result_channel_and_exit_codes():
    result = sandbox.run_python("import os, sys\nos.write(3, b'[1, 2]')\nsys.exit(4)", result_channel=True)
    assert result.result == b"[1, 2]" and result.returncode == 4
    crashed = sandbox.run_python("def f():\n    raise KeyError('boom')\nf()")
    assert crashed.returncode == 1 and b"KeyError: 'boom'" in crashed.stderr
    assert b'File "main.py", line 3' in crashed.stderr


def test_stdin_is_a_pipe_read_once_in_full_and_never_rewound():
    """Issue 24: stdin was a memfd the program could rewind (lseek, /proc/self/fd/0)."""
    data = bytes(range(256)) * 4096  # 1 MiB: more than a pipe holds, written as the program reads
    source = (
        "import os, sys\ndata = sys.stdin.buffer.read()\n"
        "print(len(data), hash(data) == hash(bytes(range(256)) * 4096))\n"
        "for rewind in (lambda: os.lseek(0, 0, 0), lambda: sys.stdin.buffer.seek(0)):\n    try:\n"
        "        rewind()\n        print('rewound')\n    except OSError as error:\n"
        "        print(type(error).__name__)\n"
        "print(os.read(0, 10), os.fstat(0).st_mode & 0o170000 == 0o010000)"
    )
    result = sandbox.run_python(source, stdin=data)
    assert result.stdout == b"1048576 True\nOSError\nUnsupportedOperation\nb'' True\n", result.stderr
    unread = sandbox.run_python("print('done')", stdin=data)  # a program that never reads its stdin
    assert unread.stdout == b"done\n" and unread.returncode == 0


def test_a_run_of_steps_gives_each_line_the_time_limit_and_stops_when_told():
    """``result_lines``: each line on the result channel within ``time_s`` of the one before;
    ``on_line`` sees each line and may stop the run; the run ends when the last line is in."""
    steps = "import os, time\nfor delay in (0.6, 0.6, 0.6, 30):\n    time.sleep(delay)\n    os.write(3, b'line\\n')"
    limits = Limits(time_s=1.0)
    with SandboxServer() as server:
        start = time.monotonic()
        run = server.run_python(steps, result_lines=4, limits=limits)  # 1.8 s in all: over 1 s, each step under
        assert run.result == b"line\nline\nline\n" and run.limit == "time" and run.timed_out
        assert time.monotonic() - start < 5
        seen = []
        run = server.run_python(steps, result_lines=4, limits=limits, on_line=lambda line: seen.append(line) or True)
        assert seen == [b"line"] and run.result == b"line\n" and run.limit is None
        hanging = "import os, time\nos.write(3, b'a\\nb\\n')\ntime.sleep(30)"
        start = time.monotonic()
        run = server.run_python(hanging, result_lines=2, limits=limits)
        assert run.result == b"a\nb\n" and run.limit is None and time.monotonic() - start < 1
        with pytest.raises(ValueError, match="result_lines"):
            server.run_python("pass", result_lines=0)


@pytest.mark.usefixtures("bwrap_only")
def test_a_tester_drives_the_program_and_alone_holds_the_result_channel():
    """``tester``: a second process of the run, joined to the program by a socket (the
    program's fd 3, the tester's fd 4); its fd 3 is the result channel; the run is the
    tester's, and the program's process ends with it."""
    program = (
        "import os, socket\nchannel = socket.socket(fileno=3)\nos.write(1, b'program ')\n"
        "for line in channel.makefile('rb'):\n    channel.sendall(str(int(line) * 2).encode() + b'\\n')\n"
    )
    tester = (
        "import os, socket, sys\nchannel = socket.socket(fileno=4)\nreplies = channel.makefile('rb')\n"
        "for n in (1, 2, 3):\n    channel.sendall(b'%d\\n' % n)\n    os.write(3, replies.readline())\n"
        "status = open('/proc/self/status').read()\n"
        "os.write(1, b'tester stdin %r ' % sys.stdin.read())\n"
    )
    with SandboxServer() as server:
        run = server.run_python(program, tester=tester, result_lines=3, stdin=b"for the program")
        assert run.result == b"2\n4\n6\n", run
        alone = server.run_python("import os\nos.write(3, b'forged\\n')", tester="import time\ntime.sleep(0.3)")
        assert alone.result == b"" and alone.returncode == 0  # the program's fd 3 is the socket, not the channel
        dumpable = server.run_python("pass", tester="import os\nos.write(3, open('/proc/self/status').read().encode())")
        assert b"\nUid:" in dumpable.result
        orphan = server.run_python("import time\ntime.sleep(30)", tester="pass", limits=SHORT)
        assert orphan.limit is None and orphan.seconds < 1  # the program does not outlive the tester


def test_run_python_waits_for_threads_and_runs_atexit():
    source = (
        "import atexit, threading, time\natexit.register(lambda: print('bye'))\n"
        "def work():\n    time.sleep(0.2)\n    print('thread done')\n"
        "threading.Thread(target=work).start()"
    )
    assert sandbox.run_python(source).stdout == b"thread done\nbye\n"


def test_rlimits_fallback_warns_exactly_once_and_still_kills_timeouts(monkeypatch, caplog):
    monkeypatch.setenv("CASCADE_SANDBOX", "rlimits")
    isolation.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
            warnings.simplefilter("always")
            for _ in range(2):
                with SandboxServer() as server:
                    assert server.mode == "rlimits"
                    result = server.run_python("import time\ntime.sleep(30)", limits=SHORT)
                    assert result.timed_out and result.seconds < 3
            assert sandbox.run(["sh", "-c", "while :; do :; done"], limits=SHORT).timed_out
        messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert len(messages) == 1 and "NO filesystem, network or process isolation" in messages[0]
        assert sum("rlimits only" in r.getMessage() for r in caplog.records) == 1
    finally:
        monkeypatch.delenv("CASCADE_SANDBOX")
        isolation.cache_clear()


def test_unknown_isolation_setting_is_an_error(monkeypatch):
    monkeypatch.setenv("CASCADE_SANDBOX", "docker")
    isolation.cache_clear()
    try:
        with pytest.raises(sandbox.SandboxError, match="CASCADE_SANDBOX"):
            isolation()
    finally:
        monkeypatch.delenv("CASCADE_SANDBOX")
        isolation.cache_clear()


@pytest.mark.usefixtures("bwrap_only")
def test_isolation_reports_bwrap_here():
    assert sandbox.isolation() == "bwrap" and sandbox.available()


@pytest.mark.usefixtures("bwrap_only")
def test_root_hosts_run_programs_under_their_own_uid_or_fall_back(monkeypatch):
    with SandboxServer() as server:
        uid = server.run(["id", "-u"]).stdout
        assert server.separate_uids == (os.geteuid() == 0)
        assert uid == b"65534\n"
    if os.geteuid() != 0:
        return

    def only_shared(separate):
        if separate:
            raise sandbox.SandboxError("no second uid here")
        return namespace(separate)

    def broken(separate):
        raise sandbox.SandboxError("no user namespaces here")

    namespace = core._UserNamespace
    for maker in (only_shared, broken):
        monkeypatch.setattr(core, "_UserNamespace", maker)
        monkeypatch.setattr(core, "_separate_uids_failed", threading.Event())
        monkeypatch.setattr(core, "_userns_failed", threading.Event())
        with SandboxServer() as server:  # falls back to one shared uid, still isolated
            assert not server.separate_uids and server.run(["id", "-u"]).stdout == b"65534\n"
            # with a namespace of the project's own, runs still get namespaces of their own
            assert server.features["fresh_runs"] is (maker is only_shared), server.features


@pytest.mark.usefixtures("bwrap_only")
def test_an_interpreter_under_tmp_still_runs_in_the_sandbox():
    """A checkout (and its .venv) under /tmp: the sandbox's private /tmp must not hide it."""
    venv = Path("/tmp") / f"cascade-venv-{os.getpid()}"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True, timeout=120
    )
    try:
        source = Path(__file__).resolve().parents[2] / "src"
        script = (
            "from cascade_rl import sandbox\n"
            "with sandbox.SandboxServer() as server:\n"
            "    print(server.run_python('print(6 * 7)').stdout.decode().strip())\n"
            "print(sandbox.isolation())\n"
        )
        result = subprocess.run(
            [str(venv / "bin" / "python"), "-c", script],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(source)},
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.split() == ["42", "bwrap"] and "does not work here" not in result.stderr
    finally:
        shutil.rmtree(venv, ignore_errors=True)


@pytest.mark.usefixtures("bwrap_only")
def test_a_venv_reached_through_a_symbolic_link_runs_isolated(tmp_path):
    """Issue 40's reproduction, as a new user meets it: a venv under a linked directory. bwrap
    was handed the linked path of the interpreter, which the sandbox did not have (`execvp
    .../.venv/bin/python: No such file or directory`), and every program ran with rlimits only.
    Now the linked path is bound too: the same interpreter, the venv's packages, isolated."""
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    link.symlink_to(real)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(real / "venv")], check=True, timeout=120)
    (real / "venv" / "lib" / "marker.pth").write_text("")  # (a file only the venv has)
    source = Path(__file__).resolve().parents[2] / "src"
    script = (
        "import sys\nfrom cascade_rl import sandbox\nprint(sandbox.isolation())\n"
        "probe = 'import sys, os\\nprint(sys.prefix, os.path.exists(sys.prefix + \"/lib/marker.pth\"))'\n"
        "run = sandbox.run_python(probe)\n"
        "print(run.stdout.decode().strip(), run.error)\n"
    )
    result = subprocess.run(
        [str(link / "venv" / "bin" / "python"), "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(source)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["bwrap", str(link / "venv"), "True", "None"], (result.stdout, result.stderr)
    assert "rlimits" not in result.stderr


def test_without_isolation_untrusted_code_is_refused_unless_the_user_opted_in(monkeypatch):
    """Where bubblewrap cannot run, scoring untrusted code stops with one line saying why and
    what to do (issue 40), until the user opts into rlimits only (the recipe's
    ``runtime.sandbox: rlimits``, or ``CASCADE_SANDBOX=rlimits``), which is then reported."""
    from cascade_rl.rewards.code import score_batch

    monkeypatch.setattr(core, "_bwrap_problem", lambda: "bubblewrap (bwrap) is not installed")
    monkeypatch.setattr(core, "_rlimits_allowed_by", None)
    monkeypatch.delenv("CASCADE_SANDBOX", raising=False)
    isolation.cache_clear()
    request = {"response": "```python\nprint(int(input()) * 2)\n```", "tests": {"inputs": ["2"], "outputs": ["4"]}}
    try:
        with pytest.raises(sandbox.IsolationUnavailable) as refused:
            score_batch([request])
        message = str(refused.value)
        assert "\n" not in message and "not installed" in message and "runtime.sandbox: rlimits" in message
        assert "CASCADE_SANDBOX=rlimits" in message and not sandbox.available()
        assert sandbox.isolation_report() == {
            "isolation": "unavailable",
            "reason": "bubblewrap (bwrap) is not installed",
            "opted_in": None,
        }
        with pytest.warns(RuntimeWarning, match="NO filesystem"):
            sandbox.allow_rlimits_only("runtime.sandbox: rlimits")
            assert sandbox.isolation() == "rlimits"
        with sandbox.SandboxPool(1) as pool:
            [result] = score_batch([request], pool=pool)
        assert result.reward == 1 and result.details["isolation"] == "rlimits"
        assert sandbox.isolation_report()["opted_in"] == "runtime.sandbox: rlimits"
        monkeypatch.setenv("CASCADE_SANDBOX", "bwrap")  # refuses any opt-in
        isolation.cache_clear()
        with pytest.raises(sandbox.IsolationUnavailable, match="CASCADE_SANDBOX=bwrap but"):
            isolation()
    finally:
        monkeypatch.setattr(core, "_rlimits_allowed_by", None)
        monkeypatch.undo()
        isolation.cache_clear()


# ---------------------------------------------------------------------------------- python mode as CPython

MIXED_STREAMS = (
    "import sys\nprint('a')\nsys.stdout.buffer.write(b'b\\n')\nprint('c', end='')\n"
    "sys.stdout.write('d\\n')\nsys.stdout.buffer.write(b'e\\n')\nsys.stdout.flush()\nprint('f' * 9000)\n"
    "sys.stdout.buffer.write(b'g\\n')\nprint(repr(input()), repr(sys.stdin.readline()))"
)


@pytest.mark.parametrize("env", [{}, {"PYTHONUNBUFFERED": "1"}], ids=["buffered", "unbuffered"])
def test_python_mode_orders_output_and_reads_input_as_cpython(env):
    """Python mode must produce what ``python -c`` produces on the same pipes: stdout
    block-buffered (``print`` text waits while ``buffer.write`` bytes go first), write-through
    under PYTHONUNBUFFERED, and stdin lines with their ``\\r`` (no newline translation)."""
    stdin = b"one\r\ntwo\r\n"
    cpython = sandbox.run(["python", "-c", MIXED_STREAMS], stdin=stdin, env=env)
    forked = sandbox.run_python(MIXED_STREAMS, stdin=stdin, env=env)
    assert cpython.ok and forked.ok, (cpython.stderr, forked.stderr)
    assert forked.stdout == cpython.stdout
    assert cpython.stdout.endswith(b"'one\\r' 'two\\r\\n'\n")


def test_closing_stdout_after_printing_keeps_the_output_and_exits_zero():
    source = "import sys\nprint(42)\nsys.stdout.close()"
    cpython = sandbox.run(["python", "-c", source])
    forked = sandbox.run_python(source)
    assert (forked.returncode, forked.stdout) == (cpython.returncode, cpython.stdout) == (0, b"42\n")


def test_a_stdout_that_cannot_be_flushed_at_exit_is_status_120_as_in_cpython():
    source = "import os\nprint(42)\nos.close(1)"
    assert sandbox.run_python(source).returncode == sandbox.run(["python", "-c", source]).returncode == 120


# ---------------------------------------------------------------------------------- seccomp, features


def test_the_seccomp_filter_assembles_for_known_machines_only():
    for machine in seccomp.ARCHITECTURES:
        program = seccomp.program_filter(machine)
        assert program and len(program) % 8 == 0
        assert seccomp.server_config(machine)["syscall"] == seccomp.SECCOMP_SYSCALL[machine]
    assert seccomp.program_filter("riscv64") is None and seccomp.server_config("riscv64") == {}


REFUSED_PROBE = """
import ctypes, errno, os, subprocess, threading, multiprocessing
libc = ctypes.CDLL(None, use_errno=True)
def refused(call):
    result = call()
    return result == -1 and ctypes.get_errno() == errno.EPERM
checks = {
    'memfd': refused(lambda: libc.memfd_create(b'x', 0)),
    'shmget': refused(lambda: libc.shmget(0, 4096, 0o1600)),
    'msgget': refused(lambda: libc.msgget(0, 0o1600)),
    'mq_open': refused(lambda: libc.mq_open(b'/q', os.O_CREAT | os.O_RDWR, 0o600, None)),
    'ptrace': refused(lambda: libc.ptrace(16, os.getppid(), None, None)),
    'unshare': refused(lambda: libc.unshare(0x10000000)),
}
worked = []
thread = threading.Thread(target=worked.append, args=('thread',)); thread.start(); thread.join()
worked.append(subprocess.run(['echo', 'subprocess'], capture_output=True, text=True).stdout.strip())
with multiprocessing.Pool(2) as pool:
    worked.append('pool' if pool.map(abs, [-1, -2]) == [1, 2] else 'no pool')
print(sorted(name for name, ok in checks.items() if not ok), worked)
"""


@pytest.mark.skipif(seccomp.program_filter() is None, reason="no seccomp filter for this machine")
def test_refused_system_calls_fail_with_eperm_and_threads_processes_still_work():
    with SandboxServer() as server:
        assert server.features["seccomp"]
        result = server.run_python(REFUSED_PROBE, limits=Limits(time_s=30))
    assert result.stdout == b"[] ['thread', 'subprocess', 'pool']\n", result.stderr


@pytest.mark.usefixtures("bwrap_only")
def test_a_root_host_gets_every_feature_it_can_have():
    with SandboxServer() as server:
        features = server.features
    assert features["fixed_pids"] == (os.geteuid() == 0)
    assert features["cgroup"] == (cgroups.layout() is not None)
    assert features["seccomp"] == (seccomp.program_filter() is not None)
