"""The seccomp filter every process of a local sandbox runs under: a second wall behind the
namespaces.

It refuses what a program in a sandbox never needs and what widens the kernel surface an escape
would use: new namespaces (``unshare``, ``setns``, ``clone`` with a namespace flag), mounting
(``mount``, the new mount API, ``pivot_root``), ``ptrace`` and reaching into other processes
(their memory, ``pidfd_getfd``, ``process_madvise``, ``kcmp``),
the kernel keyrings, kernel modules, ``bpf``, ``perf_event_open``, ``userfaultfd``, handles to
files by number (``open_by_handle_at``), rebooting, swap, clock setting, accounting and
``syslog``. Each fails with ``EPERM``, as for a user without the privilege, except ``clone3``,
whose flags a filter cannot read: it fails with ``ENOSYS`` so that the C library falls back to
``clone``, whose flags it can. A call made in another calling convention (i386 or x32 on
x86-64) is refused too.

The program is classic BPF in the form ``bwrap --seccomp FD`` reads (what libseccomp's
``seccomp_export_bpf`` writes): an array of ``struct sock_filter``.
"""

from __future__ import annotations

import errno
import platform
import struct

# (AUDIT_ARCH_*, {name: number}) per architecture; numbers from the kernel's unistd headers.
_X86_64 = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "mount": 165,
    "umount2": 166, "pivot_root": 155, "unshare": 272, "setns": 308, "keyctl": 250,
    "add_key": 248, "request_key": 249, "init_module": 175, "finit_module": 313,
    "delete_module": 176, "bpf": 321, "perf_event_open": 298, "kexec_load": 246,
    "kexec_file_load": 320, "reboot": 169, "swapon": 167, "swapoff": 168,
    "open_by_handle_at": 304, "name_to_handle_at": 303, "userfaultfd": 323, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "move_mount": 429, "open_tree": 428, "fspick": 433,
    "mount_setattr": 442, "acct": 163, "settimeofday": 164, "clock_settime": 227,
    "adjtimex": 159, "clock_adjtime": 305, "syslog": 103, "quotactl": 179,
    "lookup_dcookie": 212, "vhangup": 153, "iopl": 172, "ioperm": 173, "uselib": 134,
    "pidfd_getfd": 438, "process_madvise": 440, "kcmp": 312,
}  # fmt: skip
_GENERIC = {
    "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "mount": 40,
    "umount2": 39, "pivot_root": 41, "unshare": 97, "setns": 268, "keyctl": 219,
    "add_key": 217, "request_key": 218, "init_module": 105, "finit_module": 273,
    "delete_module": 106, "bpf": 280, "perf_event_open": 241, "kexec_load": 104,
    "kexec_file_load": 294, "reboot": 142, "swapon": 224, "swapoff": 225,
    "open_by_handle_at": 265, "name_to_handle_at": 264, "userfaultfd": 282, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "move_mount": 429, "open_tree": 428, "fspick": 433,
    "mount_setattr": 442, "acct": 89, "settimeofday": 170, "clock_settime": 112,
    "adjtimex": 171, "clock_adjtime": 266, "syslog": 116, "quotactl": 60,
    "lookup_dcookie": 18, "vhangup": 58, "pidfd_getfd": 438, "process_madvise": 440,
    "kcmp": 272,
}  # fmt: skip
_ARCHES: dict[str, tuple[int, dict[str, int], int, int]] = {
    # machine: (AUDIT_ARCH_*, refused calls, clone, clone3)
    "x86_64": (0xC000003E, _X86_64, 56, 435),
    "amd64": (0xC000003E, _X86_64, 56, 435),
    "aarch64": (0xC00000B7, _GENERIC, 220, 435),
    "arm64": (0xC00000B7, _GENERIC, 220, 435),
    "riscv64": (0xC00000F3, _GENERIC, 220, 435),
}

NAMESPACE_FLAGS = 0x7E020080
"""CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET and NEWTIME."""

_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_X32_SYSCALL_BIT = 0x40000000
_ARG0_LOW = 16  # offsetof(struct seccomp_data, args[0]), the low word on a little-endian CPU


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def refused_calls() -> dict[str, int]:
    """The system calls the filter refuses with ``EPERM`` on this machine, by name."""
    machine = platform.machine().lower()
    if machine not in _ARCHES:
        return {}
    return dict(_ARCHES[machine][1])


def filter_program() -> bytes | None:
    """The compiled filter for this machine; ``None`` where its numbers are not known."""
    machine = platform.machine().lower()
    if platform.system() != "Linux" or machine not in _ARCHES:
        return None
    arch, calls, clone, clone3 = _ARCHES[machine]
    numbers = sorted(set(calls.values()))
    # Layout: header, one test per refused call, the clone tests, then the returns.
    head = [
        _op(_LD_W_ABS, 4),  # seccomp_data.arch
        None,  # jump to "refuse" for another calling convention (filled below)
        _op(_LD_W_ABS, 0),  # seccomp_data.nr
        None,  # x32 calls (x86-64 only; harmless elsewhere)
    ]
    tests_at = len(head)
    clone_at = tests_at + len(numbers)
    # clone tests: nr == clone3 -> enosys; nr != clone -> allow; flags & NS -> refuse; allow
    allow_at = clone_at + 5
    refuse_at = allow_at + 1
    enosys_at = refuse_at + 1
    program: list[bytes] = []
    head[1] = _op(_JEQ_K, arch, 0, refuse_at - 2)
    head[3] = _op(_JGE_K, _X32_SYSCALL_BIT, refuse_at - 4, 0)
    program.extend(op for op in head if op is not None)
    for index, number in enumerate(numbers):
        at = tests_at + index
        program.append(_op(_JEQ_K, number, refuse_at - at - 1, 0))
    program.append(_op(_JEQ_K, clone3, enosys_at - clone_at - 1, 0))
    program.append(_op(_JEQ_K, clone, 0, allow_at - (clone_at + 1) - 1))
    program.append(_op(_LD_W_ABS, _ARG0_LOW))
    program.append(_op(_JSET_K, NAMESPACE_FLAGS, refuse_at - (clone_at + 3) - 1, 0))
    program.append(_op(_RET_K, _ALLOW))  # clone_at + 4: clone without a namespace flag
    program.append(_op(_RET_K, _ALLOW))  # allow_at
    program.append(_op(_RET_K, _ERRNO | errno.EPERM))  # refuse_at
    program.append(_op(_RET_K, _ERRNO | errno.ENOSYS))  # enosys_at
    if enosys_at > 255:  # pragma: no cover - a bug: a jump offset is one byte
        raise AssertionError("the seccomp program's jumps do not fit in one byte")
    return b"".join(program)


__all__ = ["NAMESPACE_FLAGS", "filter_program", "refused_calls"]
