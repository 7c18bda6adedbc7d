"""What a sandbox provider package needs from pai-sandbox: the public extension interface.

A provider package (``pai-sandbox-docker``, ``pai-sandbox-e2b``, yours) imports the interface
from here, the errors and values an application sees too (``Sandbox*Error``, :class:`DirEntry`,
:class:`InstanceInfo`, ...) from :mod:`pai.sandbox`, and the hook marker and
:func:`~pai.core.ext.lazy_exports` from :mod:`pai.core.ext`; never from ``pai.sandbox._*``. Each
member's contract is documented where it is defined:

- the protocols it implements: :class:`SandboxProvider` (create, find, destroy, list, close) and
  :class:`SandboxInstance` (run, files), with :class:`ProviderFeatures` saying what it supports;
- the values they exchange: :class:`RawCommandResult`, :class:`FileWrite`, :data:`OutputCallback`
  (and, from :mod:`pai.sandbox`, :class:`~pai.sandbox.DirEntry` / :data:`~pai.sandbox.EntryType`,
  :class:`~pai.sandbox.InstanceInfo`);
- the errors they raise (from :mod:`pai.sandbox`): a vanished instance is
  :class:`~pai.sandbox.SandboxVanishedError` (the facade then re-creates it, re-seeds it and says
  so), a backend failure :class:`~pai.sandbox.SandboxProviderError`, file errors the
  ``Sandbox*Error`` classes (each also the matching builtin ``OSError``);
- registration: :class:`SandboxProviderRegistration` returned from a ``pai_sandbox_providers``
  hook (:class:`SandboxHookSpecs`), with :func:`~pai.sandbox.build_provider` /
  :func:`~pai.sandbox.sandbox_providers` to look providers up and
  :class:`~pai.sandbox.UnknownProviderError` / :class:`~pai.sandbox.ProviderOptionsError` for
  configuration mistakes; :data:`KNOWN_PROVIDERS` names the provider packages PAI knows of;
- the optional ``async def probe(self) -> None`` (:class:`ProbingSandboxProvider`), which
  :func:`~pai.sandbox.probe_provider` runs: ``pai demo`` before its first step and ``pai config
  --check --probe`` call it to say, in one line, why the backend cannot be used.

Providers prove they keep the contract below with
:class:`pai.sandbox.testing.SandboxProviderConformance`.

Example::

    from pai.core.ext import hookimpl
    from pai.sandbox.provider import SandboxProviderRegistration

    @hookimpl
    def pai_sandbox_providers() -> list[SandboxProviderRegistration]:
        return [SandboxProviderRegistration(name="acme", factory=make, options=AcmeOptions)]

Contract
--------
Provider:

- ``create(key)`` makes a new, empty instance for ``key`` with ``/workspace`` as an existing, empty,
  writable folder and the working directory of commands. Two live instances never share a key; if
  one exists for ``key`` already, ``create`` replaces it.
- ``find(key)`` returns the live instance for ``key`` or ``None``. Compare keys exactly; never parse
  them. Where the backend keeps state outside this process (``features.cross_process``), a fresh
  provider object in another process finds instances created by this one. ``None`` for the key
  of a thread older than the session asking is reported to that thread as a reset (its earlier
  instance, if it had one, is gone), so ``find`` never makes up an instance it does not have.
- ``destroy(key)`` removes the instance and its state; destroying a missing key does nothing.
- ``list_instances()`` lists what this provider (its namespace) owns, with key and creation time.
- ``aclose()`` releases local resources (clients, threads). It never destroys instances.
- ``probe()`` (optional) checks, quickly and creating nothing, that the backend can be used as
  configured: the engine or API answers, credentials are accepted, the image or template is
  there. It raises :class:`~pai.sandbox.SandboxUnavailableError` whose one-line message names
  what was tried (socket, URL; passwords masked) and the fix (start the engine, ``docker pull
  IMAGE``, set the key). Leave it out when there is nothing to check. The conformance suite checks
  that it succeeds on a working backend.

Instance (every method may raise :class:`~pai.sandbox.SandboxVanishedError` when the backend
instance is gone; the facade then re-creates it). The facade has already checked every argument's
type and value (paths absolute and normalized, env names valid, limits positive), so an instance
does not check them again. Every command, path and size is hostile input.

Commands, ``run(command, *, cwd, env, stdin, timeout, output_limit, on_stdout, on_stderr)``:

- ``command`` runs with ``sh -c`` semantics (bash where available) in ``cwd`` with ``env`` added
  to the instance's environment. The result carries the exit code and both streams.
- **Output** is capped at ``output_limit`` bytes per stream *while streaming* (the host never
  holds more), with ``truncated`` set when a cap was hit. ``on_stdout`` / ``on_stderr`` receive
  chunks as they arrive (only the capped part). Apart from that cap nothing is cut silently: a
  command produces its full result (``seq 1 200000 | wc -l`` prints ``200000``) or, when the
  backend hits a limit of its own (memory, pipe size, ...), fails with a non-zero exit code and a
  message on stderr naming the limit.
- **Timeout**: at ``timeout`` seconds (``None``: no timeout) the command *and everything it
  started* are killed inside the sandbox: backgrounded jobs, processes that cleared their
  environment (``env -i``), double-forked or reparented ones, and those that did all of that in
  a session of their own (``setsid``). The whole tree is dead, and the
  call has returned, within ``timeout + 1`` second; nothing of it runs afterwards. The result
  has ``timed_out=True`` and exit code **124** (whatever signal did the killing). Output
  captured before the kill is returned where the backend can.
- **stdin**: ``None`` means the command reads an immediate end-of-file (never the host's stdin).
  Bytes given are fed unchanged; the bytes a command writes (``printf '\\377' > f``) are the
  bytes in the file, and a command's output reaches the result byte for byte (before capping).
- **cwd** that is missing or not a directory is a *result* with a non-zero exit code and a
  message on stderr, not an exception.
- **Concurrency**: several ``run`` calls (and file operations) on one instance may be in flight
  at once; each behaves as if it ran alone and nothing is lost: 100 concurrent
  ``echo $i >> log`` leave 100 lines.

Files (paths arrive absolute and normalized; failures raise the matching ``Sandbox*Error``:
``SandboxFileNotFoundError``, ``SandboxIsADirectoryError``, ``SandboxNotADirectoryError``,
``SandboxFileExistsError``, ``SandboxDirectoryNotEmptyError``, each carrying the path):

- ``read_file(path, *, max_bytes)`` returns the file's bytes. The size is checked *before* the
  transfer: a file over ``max_bytes`` raises :class:`~pai.sandbox.SandboxFileTooLargeError`
  (``path``, ``size``, ``limit=max_bytes``) and nothing of it is transferred, so the host never
  holds more than ``max_bytes`` (the facade's ``read_limit``, 64 MiB by default). A file of
  exactly ``max_bytes`` is read.
- ``write_files(files)`` writes all files in order, creating parent folders, in one round trip
  where the backend allows. Writes never destroy: writing where a folder exists (``/workspace``
  itself included) raises ``SandboxIsADirectoryError`` and leaves the folder and its contents
  untouched (the instance keeps working); a path through a file (``f.txt/x``) raises
  ``SandboxNotADirectoryError``. When an entry fails, the entries before it may have been
  written, but no data that existed before the call is lost except by an entry written over it.
- ``list_dir(path)`` lists the folder's entries (name, absolute path, type, size).
- ``remove(path, *, recursive)`` removes a file or an empty folder; a non-empty folder only with
  ``recursive`` (else ``SandboxDirectoryNotEmptyError``).
- ``make_dir(path, *, parents)``: ``SandboxFileExistsError`` if something exists there (with
  ``parents``, an existing folder is accepted); a missing parent is ``SandboxFileNotFoundError``
  unless ``parents``.
- ``exists(path)`` says whether anything is there.
- **Symlinks** (made by commands, e.g. ``ln -s``) are followed *inside the sandbox*, as a normal
  program would: reading or writing through a link reads or writes its target; ``exists``
  follows links (a dangling link is ``False``); ``list_dir`` reports the link itself (type
  ``"symlink"``); ``remove`` removes the link, never its target. No operation may follow a link
  (or anything else) to the host's files.
"""

from typing import TYPE_CHECKING

from pai.core.ext import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from pai.sandbox._provider import OutputCallback as OutputCallback
    from pai.sandbox._provider import ProbingSandboxProvider as ProbingSandboxProvider
    from pai.sandbox._provider import ProviderFeatures as ProviderFeatures
    from pai.sandbox._provider import SandboxInstance as SandboxInstance
    from pai.sandbox._provider import SandboxProvider as SandboxProvider
    from pai.sandbox._registry import KNOWN_PROVIDERS as KNOWN_PROVIDERS
    from pai.sandbox._registry import SandboxHookSpecs as SandboxHookSpecs
    from pai.sandbox._registry import SandboxProviderRegistration as SandboxProviderRegistration
    from pai.sandbox._types import FileWrite as FileWrite
    from pai.sandbox._types import RawCommandResult as RawCommandResult

_SOURCES: dict[str, str] = {
    "FileWrite": "pai.sandbox._types",
    "KNOWN_PROVIDERS": "pai.sandbox._registry",
    "OutputCallback": "pai.sandbox._provider",
    "ProbingSandboxProvider": "pai.sandbox._provider",
    "ProviderFeatures": "pai.sandbox._provider",
    "RawCommandResult": "pai.sandbox._types",
    "SandboxHookSpecs": "pai.sandbox._registry",
    "SandboxInstance": "pai.sandbox._provider",
    "SandboxProvider": "pai.sandbox._provider",
    "SandboxProviderRegistration": "pai.sandbox._registry",
}
"""The module that defines each public name: imported when the name is first used."""

__all__ = [
    "KNOWN_PROVIDERS",
    "FileWrite",
    "OutputCallback",
    "ProbingSandboxProvider",
    "ProviderFeatures",
    "RawCommandResult",
    "SandboxHookSpecs",
    "SandboxInstance",
    "SandboxProvider",
    "SandboxProviderRegistration",
]

if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    __getattr__, __dir__ = _lazy_exports(__name__, _SOURCES)
