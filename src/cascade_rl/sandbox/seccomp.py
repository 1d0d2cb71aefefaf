"""The seccomp filter of sandboxed programs: system calls a solution never needs (SPEC section 6).

A classic BPF program, assembled here in pure Python (no libseccomp), that the supervisor
installs in every program's process just before the program starts (after the run's
namespaces, cgroups, rlimits and uid are in place; it survives ``execve`` and is inherited by
every child). What it refuses, with ``EPERM``:

* **memory the watchdog cannot see and state that outlives a process**: ``memfd_create``,
  ``memfd_secret``, System V shared memory, message queues and semaphores, POSIX message
  queues (``mq_*``), kernel keyrings (``add_key``, ``request_key``, ``keyctl``);
* **reaching other processes**: ``ptrace``, ``process_vm_readv/writev``, ``process_madvise``,
  ``pidfd_getfd``, ``kcmp``;
* **kernel attack surface** no solution uses: ``bpf``, ``perf_event_open``, ``userfaultfd``,
  ``io_uring_*`` (its operations would bypass this filter), ``open_by_handle_at``,
  ``fanotify_init``, ``lookup_dcookie``, ``syslog``, ``uselib``, ``iopl``/``ioperm``;
* **changing the sandbox**: ``mount`` and the new mount API, ``umount2``, ``pivot_root``,
  ``chroot``, ``unshare``, ``setns``, ``clone`` with any ``CLONE_NEW*`` flag; and what only
  an administrator does (modules, kexec, swap, reboot, accounting, quotas, ``vhangup``).

``clone3`` returns ``ENOSYS`` (its flags live in memory a filter cannot read): the C library
then falls back to ``clone``, whose flags are checked. System calls of another ABI (x32,
i386 through ``int 0x80``) return ``ENOSYS``. Only x86_64 and aarch64 are known; elsewhere
:func:`program_filter` returns None and programs run without a filter (the sandbox docstring
says what that leaves open).
"""

from __future__ import annotations

import errno
import platform
import struct

# BPF opcodes (linux/bpf_common.h)
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_RET_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_RET_ERRNO = 0x00050000  # SECCOMP_RET_ERRNO | errno
# offsets in struct seccomp_data
_NR, _ARCH, _ARG0_LOW = 0, 4, 16
_X32_BIT = 0x40000000
#: CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME
CLONE_NEW_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80

#: system calls refused with EPERM (see the module docstring)
REFUSED = (
    "memfd_create memfd_secret shmget shmat shmdt shmctl msgget msgsnd msgrcv msgctl semget semop "
    "semtimedop semctl mq_open mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr add_key "
    "request_key keyctl ptrace process_vm_readv process_vm_writev process_madvise pidfd_getfd kcmp bpf "
    "perf_event_open userfaultfd io_uring_setup io_uring_enter io_uring_register open_by_handle_at "
    "name_to_handle_at fanotify_init lookup_dcookie syslog uselib iopl ioperm mount umount2 pivot_root "
    "chroot move_mount open_tree fsopen fsconfig fsmount fspick mount_setattr unshare setns init_module "
    "finit_module delete_module kexec_load kexec_file_load swapon swapoff reboot acct quotactl quotactl_fd "
    "vhangup"
).split()

# (AUDIT_ARCH_*, system call numbers) per machine; from the kernel's unistd tables
_X86_64 = {
    "memfd_create": 319, "memfd_secret": 447, "shmget": 29, "shmat": 30, "shmdt": 67, "shmctl": 31,
    "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "semget": 64, "semop": 65, "semtimedop": 220,
    "semctl": 66, "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243,
    "mq_notify": 244, "mq_getsetattr": 245, "add_key": 248, "request_key": 249, "keyctl": 250, "ptrace": 101,
    "process_vm_readv": 310, "process_vm_writev": 311, "process_madvise": 440, "pidfd_getfd": 438, "kcmp": 312,
    "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_by_handle_at": 304, "name_to_handle_at": 303, "fanotify_init": 300,
    "lookup_dcookie": 212, "syslog": 103, "uselib": 134, "iopl": 172, "ioperm": 173, "mount": 165,
    "umount2": 166, "pivot_root": 155, "chroot": 161, "move_mount": 429, "open_tree": 428, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "unshare": 272, "setns": 308,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320,
    "swapon": 167, "swapoff": 168, "reboot": 169, "acct": 163, "quotactl": 179, "quotactl_fd": 443,
    "vhangup": 153, "clone": 56, "clone3": 435,
}  # fmt: skip
_AARCH64 = {
    "memfd_create": 279, "memfd_secret": 447, "shmget": 194, "shmat": 196, "shmdt": 197, "shmctl": 195,
    "msgget": 186, "msgsnd": 189, "msgrcv": 188, "msgctl": 187, "semget": 190, "semop": 193, "semtimedop": 192,
    "semctl": 191, "mq_open": 180, "mq_unlink": 181, "mq_timedsend": 182, "mq_timedreceive": 183,
    "mq_notify": 184, "mq_getsetattr": 185, "add_key": 217, "request_key": 218, "keyctl": 219, "ptrace": 117,
    "process_vm_readv": 270, "process_vm_writev": 271, "process_madvise": 440, "pidfd_getfd": 438, "kcmp": 272,
    "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_by_handle_at": 265, "name_to_handle_at": 264, "fanotify_init": 262,
    "lookup_dcookie": 18, "syslog": 116, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
    "move_mount": 429, "open_tree": 428, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "unshare": 97, "setns": 268, "init_module": 105, "finit_module": 273,
    "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294, "swapon": 224, "swapoff": 225,
    "reboot": 142, "acct": 89, "quotactl": 60, "quotactl_fd": 443, "vhangup": 58, "clone": 220, "clone3": 435,
}  # fmt: skip
ARCHITECTURES = {"x86_64": (0xC000003E, _X86_64), "aarch64": (0xC00000B7, _AARCH64)}
#: the seccomp(2) system call, which installs a filter with flags (prctl cannot)
SECCOMP_SYSCALL = {"x86_64": 317, "aarch64": 277}


def _assemble(lines: list) -> bytes:
    """``struct sock_filter`` instructions from ``(code, k, jump_true, jump_false)`` tuples, where a
    jump names a label (a str in ``lines``) or is None (the next instruction)."""
    labels, instructions = {}, []
    for line in lines:
        if isinstance(line, str):
            labels[line] = len(instructions)
        else:
            instructions.append(line)
    out = []
    for index, (code, k, jump_true, jump_false) in enumerate(instructions):
        offsets = [0 if target is None else labels[target] - index - 1 for target in (jump_true, jump_false)]
        if not all(0 <= offset <= 255 for offset in offsets):
            raise ValueError(f"seccomp: jump out of range at instruction {index}")
        out.append(struct.pack("=HBBI", code, offsets[0], offsets[1], k))
    return b"".join(out)


def server_config(machine: str | None = None) -> dict:
    """What the supervisor needs to install the filter: ``{"filter": hex, "syscall": number}``,
    or ``{}`` where the machine is not known here."""
    machine = machine or platform.machine()
    program = program_filter(machine)
    return {"filter": program.hex(), "syscall": SECCOMP_SYSCALL[machine]} if program else {}


def program_filter(machine: str | None = None) -> bytes | None:
    """The filter as ``struct sock_filter`` instructions (native byte order), or None on a
    machine whose system call table is not known here."""
    machine = machine or platform.machine()
    if machine not in ARCHITECTURES:
        return None
    audit_arch, numbers = ARCHITECTURES[machine]
    lines: list = [
        (_LD_W_ABS, _ARCH, None, None),
        (_JEQ_K, audit_arch, None, "no such call"),
        (_LD_W_ABS, _NR, None, None),
    ]
    if machine == "x86_64":
        lines.append((_JGE_K, _X32_BIT, "no such call", None))
    lines += [
        (_JEQ_K, number, "refuse", None) for number in sorted({numbers[name] for name in REFUSED if name in numbers})
    ]
    lines += [
        (_JEQ_K, numbers["clone"], "clone", None),
        (_JEQ_K, numbers["clone3"], "no such call", None),
        (_RET_K, _RET_ALLOW, None, None),
        "clone",
        (_LD_W_ABS, _ARG0_LOW, None, None),
        (_JSET_K, CLONE_NEW_FLAGS, "refuse", None),
        (_RET_K, _RET_ALLOW, None, None),
        "refuse",
        (_RET_K, _RET_ERRNO | errno.EPERM, None, None),
        "no such call",
        (_RET_K, _RET_ERRNO | errno.ENOSYS, None, None),
    ]
    return _assemble(lines)
