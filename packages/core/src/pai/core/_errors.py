"""Every error PAI raises, under one root.

    PaiError
    ├── UserError                      (a caller's mistake: fix the code or the call)
    │   ├── DefinitionError            (ValueError: a tool, command, agent or capability is malformed)
    │   │   └── CapabilityConflictError      (one id, two facade types)
    │   ├── CapabilityBindingError     (ValueError: a binding record or a key option is wrong)
    │   │   └── ConfigError                  (configuration is malformed or cannot bind a capability)
    │   ├── UnknownCommandError        (LookupError: no command of that name)
    │   ├── UndeclaredCapabilityError  (KeyError: ctx.capabilities[token] for an undeclared token)
    │   ├── CommandInputError          (ValueError: command input fails its schema)
    │   ├── InvalidThreadIdError       (ValueError: a thread id that is not a non-empty str)
    │   ├── ToolCapabilitiesError      (TypeError: run_tool given the wrong capabilities)
    │   └── ModelConfigurationError    (ValueError: a model's options, API key or retry policy)
    ├── ThreadNotFoundError            (LookupError: no thread with that id in this scope)
    ├── ThreadExistsError              (ValueError: a thread id is already taken)
    ├── ThreadDeletedError             (RuntimeError: the thread was deleted while work ran)
    ├── ThreadBusyError                (RuntimeError: another run held the thread all the wait long)
    ├── RunLeaseLostError              (RuntimeError: a run's lease on its thread was taken over)
    ├── StorageError                   (RuntimeError: storage cannot be opened, is closed or corrupt)
    │   └── StorageFileError                 (a database file cannot be used; .path; left untouched)
    │       ├── StorageCorruptError                (damaged, truncated, or not a database)
    │       ├── StorageSchemaError                 (another program's tables, or a newer schema)
    │       └── StorageAccessError                 (read-only, no permission, locked, I/O error)
    ├── PluginError                    (a strict plugin load failed, a hook raised or returned junk)
    │   └── DuplicateRegistrationError       (also a UserError: two plugins register one name)
    ├── UnknownAgentError              (LookupError: create_pai has no agent of that id)
    ├── CapabilityAcquireError         (RuntimeError: a binding failed to acquire a facade)
    ├── StepLimitExceededError         (RuntimeError: an agent run hit its step limit)
    ├── RuntimeContextError            (RuntimeError: an agent's runtime_context or instructions raised)
    ├── DurabilityError                (RuntimeError: a durable run cannot start or go on)
    │   └── DurableReplayError               (a replay took another path than the recorded run)
    ├── ModelError                     (a model call failed; .retryable says if trying again can help)
    │   ├── RetryableModelError        (worth retrying after a pause; .retry_after when the server said)
    │   │   ├── ModelRateLimitError          (429: too many requests or tokens)
    │   │   ├── ModelOverloadedError         (5xx: the server failed or is overloaded)
    │   │   └── ModelConnectionError         (ConnectionError: refused, reset, a stream cut mid-way)
    │   │       └── ModelTimeoutError              (TimeoutError: no answer in time)
    │   └── FatalModelError            (retrying cannot help)
    │       ├── ModelBadRequestError         (ValueError: 400/422, the server refused the request)
    │       ├── ModelAuthenticationError     (PermissionError: 401/403, a wrong or unauthorised key)
    │       ├── ModelNotFoundError           (LookupError: 404, no such model or endpoint)
    │       └── ModelResponseError           (the answer could not be read: a malformed chunk or stream)
    └── RuntimeClosedError             (RuntimeError: the runtime was closed)

Every message says what was wrong, with the offending value, and what to do.
"""

from __future__ import annotations

from collections.abc import Sequence


class PaiError(Exception):
    """Root of every error PAI raises."""


class UserError(PaiError):
    """A mistake in the calling code: the message says how to fix it."""


class DefinitionError(UserError, ValueError):
    """A tool, command, agent or capability definition is malformed."""


class CapabilityConflictError(DefinitionError):
    """Two operations declare the same capability id with different facade types."""


class CapabilityBindingError(UserError, ValueError):
    """A capability binding record is wrong, or a key option cannot produce a key.

    ``ids`` lists every capability id at fault, so one error reports all of them.
    """

    def __init__(self, message: str, *, ids: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.ids: tuple[str, ...] = tuple(ids)


class ConfigError(CapabilityBindingError):
    """The configuration is malformed, names something not installed, or lacks a binding.

    A :class:`CapabilityBindingError`, so ``except CapabilityBindingError`` around runtime
    construction catches it whether a capability was left unbound in code or in configuration.
    Every message names the file (or environment variable), the key, and the fix.
    """


class UnknownCommandError(UserError, LookupError):
    """No command with that name exists on the agent."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        listing = ", ".join(repr(k) for k in sorted(known)) or "none"
        super().__init__(
            f"unknown command {name!r}; this agent's commands are: {listing}. "
            "Add it to define_agent(commands=...) or call one of those."
        )
        self.name = name
        self.known: tuple[str, ...] = tuple(sorted(known))

    def __str__(self) -> str:  # LookupError would otherwise quote the whole message
        return str(self.args[0])


class UndeclaredCapabilityError(UserError, KeyError):
    """``ctx.capabilities[token]`` names a capability the operation did not declare."""

    def __str__(self) -> str:  # KeyError would otherwise quote the whole message
        return str(self.args[0])


class CommandInputError(UserError, ValueError):
    """A command's input does not match its ``input`` model."""


class InvalidThreadIdError(UserError, ValueError):
    """A thread id given to the runtime is not a non-empty ``str``."""


class ToolCapabilitiesError(UserError, TypeError):
    """``run_tool`` was given capabilities that do not match what the tool declares."""


class PluginError(PaiError):
    """Plugins could not be loaded or conflict (a strict load failed, a hook failed)."""


class DuplicateRegistrationError(PluginError, UserError):
    """Two plugins register one name."""


class UnknownAgentError(PaiError, LookupError):
    """No agent is registered under that id."""

    def __str__(self) -> str:
        return str(self.args[0])


class ThreadNotFoundError(PaiError, LookupError):
    """No thread with that id exists in this scope."""

    def __init__(self, thread_id: str, scope_key: str | None = None) -> None:
        where = f" in scope {scope_key!r}" if scope_key is not None else ""
        super().__init__(
            f"thread {thread_id!r} does not exist{where}; create it with "
            "runtime.admin(identity=...).create_thread() or check the id"
        )
        self.thread_id = thread_id

    def __str__(self) -> str:
        return str(self.args[0])


class ThreadExistsError(PaiError, ValueError):
    """A thread with that id already exists."""


class ThreadDeletedError(PaiError, RuntimeError):
    """The thread was deleted while this operation ran; its work was cancelled."""


class ThreadBusyError(PaiError, RuntimeError):
    """Another run (in this process or another) held the thread for as long as this run could
    wait to start. ``thread_id`` names the thread and ``waited`` the seconds waited."""

    def __init__(self, message: str, *, thread_id: str, waited: float) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.waited = waited


class RunLeaseLostError(PaiError, RuntimeError):
    """A run lease is no longer its thread's current one: it was released, or another run took
    the thread over after the lease expired (its holder stalled past the lease's time to live).
    Nothing was written with it."""


class StorageError(PaiError, RuntimeError):
    """Storage failed: the database cannot be opened or has a newer schema, the storage was
    closed, or what it holds is corrupt. The message names the storage and what to do."""


class StorageFileError(StorageError):
    """A database file cannot be used as it is. ``path`` names it; PAI left it untouched
    (nothing is deleted, repaired or overwritten): move it aside, or use another path."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class StorageCorruptError(StorageFileError):
    """The database file is damaged, truncated, or not a database at all."""


class StorageSchemaError(StorageFileError):
    """The file is a database, but its tables are another program's or a newer version's."""


class StorageAccessError(StorageFileError):
    """The database cannot be read or written now: read-only, no permission, locked by another
    process past the busy timeout, or an I/O error."""


class CapabilityAcquireError(PaiError, RuntimeError):
    """A binding's ``acquire`` failed. ``__cause__`` holds the binding's own error."""

    def __init__(self, message: str, *, ids: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.ids: tuple[str, ...] = tuple(ids)


class StepLimitExceededError(PaiError, RuntimeError):
    """An agent run used every step it was allowed without finishing."""


class RuntimeContextError(PaiError, RuntimeError):
    """An agent's ``runtime_context`` or ``instructions`` function raised; the run did not start.

    ``__cause__`` holds the function's own error. The thread records it as an error message.
    """


class DurabilityError(PaiError, RuntimeError):
    """A durable run cannot start or go on: its engine refused it, its input cannot be recorded,
    or its thread changed under it. The message names the run and what to do."""


class DurableReplayError(DurabilityError):
    """A durable run, replayed after a restart, took another path than the one it recorded: an
    app function it runs again (an ``enabled`` predicate, ``runtime_context``) answered
    differently, or the agent's definition changed. The message names the run, the step and the
    function; recorded runs need the code that recorded them."""


class RuntimeClosedError(PaiError, RuntimeError):
    """The runtime was closed; create a new one to keep working."""


class ModelConfigurationError(UserError, ValueError):
    """A model cannot be built as configured: a bad option, no API key, a bad retry policy.

    The message names the option (or environment variable) and what to set.
    """


class ModelError(PaiError):
    """A model call failed. ``retryable`` says whether trying again later can succeed.

    ``model`` names the model (when known) and ``status_code`` is the HTTP status the server
    answered with (when there was one). ``__cause__`` holds the provider SDK's own error.
    """

    retryable: bool = False

    def __init__(
        self, message: str, *, model: str | None = None, status_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.model = model
        self.status_code = status_code

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class RetryableModelError(ModelError):
    """A failure that may pass: retry after ``retry_after`` seconds when the server said how long,
    else after a backoff (see :class:`~pai.core.RetryPolicy`)."""

    retryable: bool = True

    def __init__(
        self,
        message: str,
        *,
        model: str | None = None,
        status_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, model=model, status_code=status_code)
        self.retry_after = retry_after


class ModelRateLimitError(RetryableModelError):
    """The server refused the request for now: too many requests or tokens (HTTP 429)."""


class ModelOverloadedError(RetryableModelError):
    """The server failed or is overloaded (HTTP 5xx)."""


class ModelConnectionError(RetryableModelError, ConnectionError):
    """The connection failed: refused, reset, or cut while the answer streamed."""


class ModelTimeoutError(ModelConnectionError, TimeoutError):
    """The server did not answer within the model's timeout."""


class FatalModelError(ModelError):
    """A failure that retrying cannot fix: the request, the key or the model name is wrong."""


class ModelBadRequestError(FatalModelError, ValueError):
    """The server refused the request as malformed (HTTP 400 or 422)."""


class ModelAuthenticationError(FatalModelError, PermissionError):
    """The server refused the API key, or the key may not use this model (HTTP 401 or 403)."""


class ModelNotFoundError(FatalModelError, LookupError):
    """No such model or endpoint (HTTP 404): check the model name and the base URL."""


class ModelResponseError(FatalModelError):
    """The model's answer could not be read: a malformed chunk, or a stream out of order."""
