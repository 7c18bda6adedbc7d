"""Kernel confinement of a worker process: a Landlock ruleset, applied by the worker to itself.

Runs inside a worker only, at start-up, *before* its audit hook goes in (the hook refuses
``ctypes``, which the system calls need: Python has no binding for them). Once applied, the
kernel refuses the worker every file-system access except reading files and listing folders
under the Python installation, whatever code asks (the interpreter, or C code below the audit
hook: glibc loading a time zone or a locale, SQLite opening a database), and, where the kernel's
Landlock has them (ABI 4 and 6), TCP binds and connects, signals to processes outside the worker
and connections to abstract Unix sockets. A seccomp filter then makes ``socket(2)`` fail (UDP,
raw and Unix-domain sockets, which Landlock does not cover). Neither can be lifted, only
narrowed, and any child inherits both.

Where the kernel has no Landlock (older than 5.13, not enabled in its ``lsm=`` list, blocked by
a container's seccomp profile) or the architecture's system-call numbers are unknown here,
:func:`confine` applies nothing and says why; the provider reports that (``provider.isolation``)
and logs it, never claiming a boundary it does not have.
"""

from __future__ import annotations

import os
import platform
import struct
from typing import Any

__all__ = ["confine", "landlock_abi", "refuse_sockets"]

# System-call numbers: the same on every architecture that uses the generic table (Linux 5.13+).
_SYSCALLS: dict[str, tuple[int, int, int]] = dict.fromkeys(
    ("x86_64", "amd64", "aarch64", "arm64", "riscv64"), (444, 445, 446)
)
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_READ_FILE = 1 << 2
_READ_DIR = 1 << 3


def _handled_fs(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: execute, write, read, read_dir, remove_*, make_*
    if abi >= 2:
        rights |= 1 << 13  # refer (link or rename across folders)
    if abi >= 3:
        rights |= 1 << 14  # truncate
    if abi >= 5:
        rights |= 1 << 15  # ioctl on devices
    return rights


def _libc() -> Any:  # ctypes' CDLL: imported here only, before the audit hook
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _syscall(libc: Any, number: int, *args: Any) -> int:
    import ctypes

    result = int(libc.syscall(ctypes.c_long(number), *args))
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
    return result


# seccomp: (AUDIT_ARCH_*, the socket(2) system call's number) per architecture.
_SECCOMP_ARCH: dict[str, tuple[int, int]] = {
    "x86_64": (0xC000003E, 41),
    "amd64": (0xC000003E, 41),
    "aarch64": (0xC00000B7, 198),
    "arm64": (0xC00000B7, 198),
    "riscv64": (0xC00000F3, 198),
}
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_X32_SYSCALL_BIT = 0x40000000


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def refuse_sockets() -> str:
    """Install a seccomp filter under which ``socket(2)`` fails with ``EPERM`` (whatever code
    asks: Landlock does not cover UDP, raw or Unix-domain sockets). Needs ``no_new_privs`` (set
    by :func:`confine`). Returns ``""`` when installed, else why not."""
    numbers = _SECCOMP_ARCH.get(platform.machine().lower())
    if platform.system() != "Linux" or numbers is None:
        return f"no seccomp filter for {platform.system()} {platform.machine()}"
    import ctypes

    arch, socket_nr = numbers
    ld_w_abs, jeq_k, jge_k, ret_k = 0x20, 0x15, 0x35, 0x06
    allow, refuse = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    program = b"".join(
        (
            _bpf(ld_w_abs, 4),  # seccomp_data.arch
            _bpf(jeq_k, arch, 0, 4),  # another calling convention (i386 on x86_64): refused
            _bpf(ld_w_abs, 0),  # seccomp_data.nr
            _bpf(jge_k, _X32_SYSCALL_BIT, 2, 0),  # x32 system calls: refused
            _bpf(jeq_k, socket_nr, 1, 0),
            _bpf(ret_k, allow),
            _bpf(ret_k, refuse),
        )
    )
    filters = ctypes.create_string_buffer(program)
    fprog = ctypes.create_string_buffer(
        struct.pack("<HxxxxxxQ", len(program) // 8, ctypes.addressof(filters))
    )
    libc = _libc()
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, fprog, 0, 0) != 0:
        return f"seccomp: {os.strerror(ctypes.get_errno())}"
    return ""


def landlock_abi() -> tuple[int, str]:
    """The kernel's Landlock ABI version (0 if none) and, when 0, why."""
    if platform.system() != "Linux":
        return 0, f"Landlock is Linux-only (this is {platform.system()})"
    numbers = _SYSCALLS.get(platform.machine().lower())
    if numbers is None:
        return 0, f"Landlock system-call numbers unknown for {platform.machine()}"
    import ctypes

    try:
        libc = _libc()
        return _syscall(libc, numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(1)), ""
    except OSError as error:
        return 0, f"the kernel ({platform.release()}) has no Landlock: {error.strerror}"


def confine(readable_roots: tuple[str, ...]) -> dict[str, object]:
    """Restrict this process with Landlock to reading under ``readable_roots`` (folders or
    files). Returns what was applied: ``{"kernel": "landlock", "abi": n, ...}``, or
    ``{"kernel": None, "reason": ...}`` when the kernel cannot. Raises ``OSError`` when the
    kernel has Landlock but applying it failed (the worker then refuses to start)."""
    abi, reason = landlock_abi()
    if not abi:
        return {"kernel": None, "reason": reason}
    import ctypes

    create, add_rule, restrict = _SYSCALLS[platform.machine().lower()]
    libc = _libc()
    handled_fs = _handled_fs(abi)
    handled_net = 0b11 if abi >= 4 else 0  # bind and connect TCP
    scoped = 0b11 if abi >= 6 else 0  # abstract Unix sockets, signals
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    attr = ctypes.create_string_buffer(struct.pack("<QQQ", handled_fs, handled_net, scoped)[:size])
    ruleset = _syscall(libc, create, attr, ctypes.c_size_t(size), ctypes.c_uint32(0))
    try:
        for root in readable_roots:
            try:
                fd = os.open(root, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                allowed = _READ_FILE | (_READ_DIR if os.path.isdir(root) else 0)
                rule = ctypes.create_string_buffer(struct.pack("<Qi", allowed, fd))
                _syscall(
                    libc,
                    add_rule,
                    ctypes.c_int(ruleset),
                    ctypes.c_int(_RULE_PATH_BENEATH),
                    rule,
                    ctypes.c_uint32(0),
                )
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(error)}")
        _syscall(libc, restrict, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return {
        "kernel": "landlock",
        "abi": abi,
        "network": bool(handled_net),
        "signals": bool(scoped),
        "sockets": not refuse_sockets(),
    }
