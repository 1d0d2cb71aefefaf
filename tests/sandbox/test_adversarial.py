"""Adversarial programs against the sandbox + code reward (SPEC section 6; DESIGN convention 7).

One property per test. Each program is scored through the code reward on a one-worker pool, so
it runs in the same sandbox as the program after it; each test asserts the reward (0, or the
honest result), that the host was not touched, and that the next, correct program still scores
1 in that pool.
"""

import os
import secrets
import socket
import time
from pathlib import Path

import pytest

import cascade_rl
from cascade_rl.rewards.code import score

pytestmark = pytest.mark.usefixtures("bwrap_only")

DOUBLE = {"inputs": ["21\n"], "outputs": ["42\n"]}
GOOD = "```python\nprint(int(input()) * 2)\n```"
PROJECT_ROOT = Path(cascade_rl.__file__).resolve().parents[2]


def program(code: str) -> str:
    return f"<think>let me try</think>\n```python\n{code}\n```"


def expect(text: str) -> dict:
    return {"inputs": ["\n"], "outputs": [text]}


def host_processes(marker: str) -> list[int]:
    """Host pids whose name (comm) or command line contains ``marker``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for entry in ("comm", "cmdline"):
            try:
                if marker.encode() in Path(f"/proc/{pid}/{entry}").read_bytes():
                    found.append(int(pid))
                    break
            except OSError:
                continue
    return found


def run_adversary(pool, code: str, tests: dict | None = None, **options):
    """Score ``code``; then check that the pool still scores a correct program 1."""
    result = score(program(code), tests=tests or DOUBLE, pool=pool, **{"time_limit": 1.0, **options})
    assert score(GOOD, tests=DOUBLE, pool=pool, time_limit=10).reward == 1.0
    return result


def kind(result) -> str:
    return result.details["first_failure"]["kind"]


def test_fork_bomb_is_stopped_and_leaves_no_process(pool):
    marker = "bomb" + secrets.token_hex(4)
    code = (
        f"import ctypes, os\nctypes.CDLL(None).prctl(15, b'{marker}', 0, 0, 0)\n"
        "while True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    )
    start = time.monotonic()
    result = run_adversary(pool, code)
    assert result.reward == 0 and kind(result) in ("runtime_error", "timeout")
    assert time.monotonic() - start < 10
    assert host_processes(marker) == []


def test_memory_bomb_hits_the_address_space_limit(pool):
    code = "blocks = []\nwhile True:\n    blocks.append(bytearray(10 ** 7))"
    result = run_adversary(pool, code, memory_mb=256, time_limit=10)  # ~0.3 s, but machines get busy
    assert result.reward == 0 and kind(result) == "memory"


def test_memory_spread_over_processes_hits_the_tree_limit(pool):
    code = (
        "import os, time\nfor _ in range(4):\n    if os.fork() == 0:\n        break\n"
        "block = bytearray(150 * 10 ** 6)\ntime.sleep(5)"
    )
    result = run_adversary(pool, code, memory_mb=256, time_limit=3)
    assert result.reward == 0 and kind(result) == "memory"


def test_infinite_loop_times_out(pool):
    start = time.monotonic()
    result = run_adversary(pool, "while True:\n    pass")
    assert result.reward == 0 and kind(result) == "timeout" and result.details["timeout"]
    assert time.monotonic() - start < 6


def test_sleep_times_out_on_wall_clock(pool):
    result = run_adversary(pool, "import time\ntime.sleep(100)")
    assert result.reward == 0 and kind(result) == "timeout"
    assert result.details["test_seconds"] < 3


def test_busy_threads_are_stopped(pool):
    code = (
        "import threading\ndef spin():\n    while True:\n        pass\n"
        "for _ in range(8):\n    threading.Thread(target=spin).start()"
    )
    start = time.monotonic()
    result = run_adversary(pool, code)
    assert result.reward == 0 and kind(result) == "timeout"
    assert time.monotonic() - start < 6


def test_huge_stdout_is_capped(pool):
    result = run_adversary(pool, "while True:\n    print('x' * 10 ** 6)", output_bytes=10**6, time_limit=5)
    assert result.reward == 0 and kind(result) == "output_limit"
    assert result.details["test_seconds"] < 4


def test_file_size_bomb_fails(pool):
    code = "with open('/tmp/big', 'wb') as f:\n    f.write(b'x' * (100 * 2 ** 20))\nprint(42)"
    result = run_adversary(pool, code)
    assert result.reward == 0 and kind(result) == "runtime_error"


def test_no_network_even_to_a_host_listener_on_localhost(pool):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    code = (
        f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), 1)\n"
        "    print('connected')\nexcept OSError as error:\n    print('refused', error)"
    )
    try:
        result = run_adversary(pool, code, tests=expect("connected"))
        listener.settimeout(0.2)
        with pytest.raises(socket.timeout):
            listener.accept()
    finally:
        listener.close()
    assert result.reward == 0 and kind(result) == "wrong_answer"


def test_writes_outside_tmp_do_not_reach_the_host(pool, tmp_path):
    targets = [
        tmp_path / "pwned.txt",
        PROJECT_ROOT / f"pwned-{secrets.token_hex(4)}.txt",
        Path.home() / f".pwned-{secrets.token_hex(4)}",
        Path("/usr/pwned"),
    ]
    code = (
        f"for path in {[str(t) for t in targets]!r}:\n    try:\n"
        "        open(path, 'w').write('x')\n        print('wrote')\n"
        "    except OSError:\n        pass"
    )
    result = run_adversary(pool, code, tests=expect("wrote\n" * len(targets)))
    assert result.reward == 0
    assert not any(target.exists() for target in targets)


def test_host_environment_and_processes_are_invisible(pool, monkeypatch):
    secret = secrets.token_hex(8)
    monkeypatch.setenv("CASCADE_SECRET_TOKEN", secret)
    code = (
        "import os\nfound = ''\nfor pid in os.listdir('/proc'):\n    if pid.isdigit():\n"
        "        for part in ('environ', 'cmdline'):\n            try:\n"
        "                data = open(f'/proc/{pid}/{part}', 'rb').read().decode()\n"
        "            except OSError:\n                continue\n"
        "            for item in data.split('\\0'):\n"
        "                if item.startswith('CASCADE_SECRET_TOKEN='):\n"
        "                    found = item.split('=', 1)[1]\n"
        "print(found or os.environ.get('CASCADE_SECRET_TOKEN', ''), len(os.listdir('/proc')))"
    )
    result = run_adversary(pool, code, tests=expect(secret))
    assert result.reward == 0 and kind(result) == "wrong_answer"


def test_project_and_home_files_are_invisible(pool):
    readme = (PROJECT_ROOT / "README.md").read_text().splitlines()[0]
    home_file = Path.home() / f".cascade-sandbox-probe-{secrets.token_hex(4)}"
    home_file.write_text("home secret\n")
    try:
        code = (
            f"for path in ({str(PROJECT_ROOT / 'README.md')!r}, {str(home_file)!r}):\n"
            "    try:\n        print(open(path).readline().rstrip())\n"
            "    except OSError:\n        print('unreadable')"
        )
        result = run_adversary(pool, code, tests=expect(f"{readme}\nhome secret\n"))
    finally:
        home_file.unlink()
    assert result.reward == 0 and kind(result) == "wrong_answer"


def test_killing_the_parent_scores_zero_and_the_pool_recovers(pool):
    result = run_adversary(pool, "import os\nos.kill(os.getppid(), 9)\nprint(42)")
    assert result.reward == 0 and kind(result) == "runtime_error"


def test_exit_before_flushing_loses_the_output_honestly(pool):
    result = run_adversary(pool, "import os\nprint(int(input()) * 2)\nos._exit(0)")
    assert result.reward == 0 and kind(result) == "wrong_answer"


SEARCH_EVERYWHERE = """
import gc, os, sys
found = []

def look(data):
    at = data.find(b'zq-')
    if at >= 0:
        found.append(data[at:at + 19].decode(errors='replace'))

def read(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            return os.read(fd, 1 << 20)
        finally:
            os.close(fd)
    except OSError:
        return b''

for pid in filter(str.isdigit, os.listdir('/proc')):
    for part in ('cmdline', 'environ'):
        look(read(f'/proc/{pid}/{part}'))
    try:
        fds = os.listdir(f'/proc/{pid}/fd')
    except OSError:
        fds = []
    for fd in fds:
        look(read(f'/proc/{pid}/fd/{fd}'))
interpreter = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)}  # visible by design
for root, directories, files in os.walk('/tmp'):  # (under /tmp when the checkout is)
    directories[:] = [d for d in directories if os.path.realpath(os.path.join(root, d)) not in interpreter]
    for name in files:
        look(read(os.path.join(root, name)))
for obj in gc.get_objects():
    if isinstance(obj, dict):
        for value in obj.values():
            if isinstance(value, str) and 'zq-' in value and len(value) > 3:
                look(value.encode())
print(found[0] if found else 'nothing')
"""


def test_expected_outputs_cannot_be_found_anywhere(pool):
    """The program looks in every readable /proc file, its file descriptors, /tmp and its own
    objects for the expected output (whose format it knows)."""
    needle = "zq-" + secrets.token_hex(8)
    result = run_adversary(pool, SEARCH_EVERYWHERE, tests=expect(needle), time_limit=5)
    assert result.reward == 0 and kind(result) == "wrong_answer"


def memory_scanner(token: str, copies: int) -> str:
    """A program that builds ``copies`` copies of ``token`` at run time (its source never holds
    it whole), reads its entire address space and prints 'seen' when it finds more than one."""
    return (
        f"parts = {[token[:8], token[8:]]!r}\n"
        f"mine = [''.join(parts).encode() for _ in range({copies})]\n"
        "me = open('/proc/self/mem', 'rb', 0)\nhits = 0\n"
        "for line in open('/proc/self/maps'):\n"
        "    span, perms = line.split()[:2]\n    if 'r' not in perms or '[v' in line:\n"
        "        continue\n    start, end = (int(x, 16) for x in span.split('-'))\n"
        "    try:\n        me.seek(start)\n        hits += me.read(end - start).count(mine[0])\n"
        "    except (OSError, OverflowError, ValueError):\n        pass\n"
        "print('seen' if hits > 1 else 'unseen')"
    )


def test_another_programs_data_is_not_in_the_inherited_memory(pool):
    token = secrets.token_hex(8)
    control = score(program(memory_scanner(token, 2)), tests=expect("seen"), pool=pool, time_limit=5)
    assert control.reward == 1  # the scanner does find a second copy in its own memory
    first = score(program(f"# {token}\nprint(int(input()) * 2)"), tests=DOUBLE, pool=pool)
    assert first.reward == 1  # an earlier program whose source holds the token
    result = run_adversary(pool, memory_scanner(token, 1), tests=expect("seen"), time_limit=5)
    assert result.reward == 0 and kind(result) == "wrong_answer"


def test_tmp_files_do_not_survive_into_the_next_program(pool):
    first = score(program("open('/tmp/answer', 'w').write('42')\nprint(42)"), tests=DOUBLE, pool=pool)
    assert first.reward == 1
    code = "try:\n    print(open('/tmp/answer').read())\nexcept OSError:\n    print('gone')"
    result = run_adversary(pool, code)
    assert result.reward == 0 and kind(result) == "wrong_answer"


def test_faking_success_with_patched_exit_and_markers_fails(pool):
    code = (
        "import builtins, os, sys\nsys.exit = lambda *a: None\n"
        "builtins.exit = builtins.quit = lambda *a: None\nos._exit = lambda *a: None\n"
        "print('All tests passed')\nprint('PASSED 1/1')\nsys.exit(0)\nos._exit(0)"
    )
    result = run_adversary(pool, code)
    assert result.reward == 0 and kind(result) == "wrong_answer"


def test_call_based_result_cannot_be_forged_through_stdout_or_the_channel(pool):
    tests = {"inputs": ["1\n2"], "outputs": ["3"], "fn_name": "add"}
    code = (
        "import os\nos.write(3, b'3')   # a forged result before the real one\n"
        "print('3')\ndef add(a, b):\n    return a - b"
    )
    result = run_adversary(pool, code, tests=tests)
    assert result.reward == 0 and kind(result) == "wrong_answer"


def test_a_daemon_child_that_outlives_its_parent_is_killed(pool):
    marker = "daemon" + secrets.token_hex(4)
    code = (
        "import subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', '{marker}'],"
        " start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(int(input()) * 2)"
    )
    result = run_adversary(pool, code)
    assert result.reward == 1  # the honest result: the program itself is correct
    assert host_processes(marker) == []


def test_closed_stdout_is_a_runtime_error(pool):
    result = run_adversary(pool, "import os\nos.close(1)\nprint(42)")
    assert result.reward == 0 and kind(result) == "runtime_error"


def test_no_capabilities_and_no_new_user_namespaces(pool):
    code = (
        "import ctypes, os\nstatus = open('/proc/self/status').read()\n"
        "eff = [l for l in status.splitlines() if l.startswith('CapEff')][0].split()[1]\n"
        "nested = 'yes' if ctypes.CDLL(None).unshare(0x10000000) == 0 else 'no'\n"
        "print(int(eff, 16), nested, os.getuid())"
    )  # 0x10000000 = CLONE_NEWUSER
    result = run_adversary(pool, code, tests=expect("0 no 65534"))
    assert result.reward == 1  # honest: the program reports what it sees


def test_host_pid_namespace_is_unreachable(pool):
    code = (
        "import os\nkilled = 0\nfor pid in range(1, 400):\n    try:\n"
        "        os.kill(pid, 0)\n        killed += 1\n    except OSError:\n        pass\n"
        "print('many' if killed > 5 else 'few')"
    )
    result = run_adversary(pool, code, tests=expect("many"))
    assert result.reward == 0 and kind(result) == "wrong_answer"


def test_filling_the_ram_backed_tmp_counts_as_memory(pool):
    code = (
        "import time\nfor i in range(6):\n    with open(f'/tmp/fill{i}', 'wb') as f:\n"
        "        f.write(b'x' * (60 * 2 ** 20))\ntime.sleep(5)\nprint(42)"
    )
    result = run_adversary(pool, code, memory_mb=256, time_limit=3)
    assert result.reward == 0 and kind(result) == "memory"
