"""The E2B sandbox provider: one E2B sandbox (a Firecracker microVM) per instance key.

Everything goes through the real ``e2b`` SDK (``AsyncSandbox``), called in
:mod:`pai.sandbox_e2b._sdk` alone, which is asyncio-only: use this provider from asyncio code (the
SDK's own tasks and timers need an asyncio loop). This module is the lifecycle (create, find,
destroy, list, probe, close) and the control-plane policy around it; one sandbox's commands and
files are :mod:`pai.sandbox_e2b._instance`'s.

- Sandboxes carry metadata ``pai.namespace``, ``pai.key-sha256``, ``pai.key-b64`` (the exact key),
  ``pai.key`` (readable, shortened), ``pai.capability`` (``sandbox``), ``pai.created`` and
  ``pai.provider-version``; :meth:`E2BSandboxProvider.find` lists sandboxes by metadata, so a
  provider in another process finds them, and connects with the configured ``timeout`` (a connect
  without one can shorten a sandbox's life).
- A sandbox in use is kept alive: an operation that starts when half of ``timeout`` or more has
  passed since the sandbox was last given time gives it ``timeout`` more (a connect, made while
  the operation runs), never past ``max_lifetime`` (see :mod:`pai.sandbox_e2b._lifetime`).
- A sandbox reported gone (expired, killed: E2B's "was not found") is connected to again (a
  paused sandbox comes back as it was); only when E2B's API confirms it no longer exists does the
  instance raise :class:`~pai.sandbox.SandboxVanishedError`, and the facade re-create it with
  its seed files. A sandbox the API says still runs is retried, never re-created.
- E2B's failures (429, 502, 503, 409, 400, 401, an unknown template) become
  :class:`~pai.sandbox_e2b.E2BError` subclasses naming the cause and the fix, after bounded
  retries where retrying helps (see :mod:`pai.sandbox_e2b._failures`).
- Commands run in ``bash -l``; a timeout kills the command inside the sandbox (the SDK does not
  enforce it on the client): the command's whole tree is found and stopped, then killed (see
  :mod:`pai.sandbox_e2b._instance`), envd's signal to the command follows, and envd's own
  deadline (the timeout plus 5 s) backs that up.
- Internet access is off unless ``allow_internet_access=True``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import os
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

import anyio
from pydantic import ValidationError

from pai.sandbox import InstanceInfo, SandboxInputError, SandboxProviderError
from pai.sandbox.provider import ProviderFeatures, SandboxInstance
from pai.sandbox_e2b import _lifetime
from pai.sandbox_e2b._errors import (
    E2BApiKeyMissingError,
    E2BError,
    E2BSandboxBusyError,
    E2BTimeoutLimitError,
    E2BUnreachableError,
)
from pai.sandbox_e2b._failures import (
    api_error,
    api_retryable,
    envd_error,
    envd_retryable,
    retrying,
)
from pai.sandbox_e2b._instance import E2BSandboxInstance
from pai.sandbox_e2b._lifetime import SandboxLifetime
from pai.sandbox_e2b._options import E2BOptions
from pai.sandbox_e2b._sdk import (
    AsyncSandbox,
    CommandExitException,
    NotFoundException,
    SandboxNotFoundException,
    SandboxNotRunningException,
    TimeoutException,
    TransportError,
    connect_sandbox,
    create_sandbox,
    kill_sandbox,
    list_sandboxes,
    on_this_machine,
    register_exit_grace,
    run_command,
    sandbox_info,
)

T = TypeVar("T")

_log = logging.getLogger("pai.sandbox_e2b")

META_NAMESPACE = "pai.namespace"
META_KEY = "pai.key"
META_KEY_B64 = "pai.key-b64"
META_KEY_HASH = "pai.key-sha256"
META_CAPABILITY = "pai.capability"
META_CREATED = "pai.created"
META_VERSION = "pai.provider-version"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("pai-sandbox-e2b")
    except Exception:  # pragma: no cover - not installed as a distribution
        return "0"


PROVIDER_VERSION = _version()


def _checked_options(**values: object) -> E2BOptions:
    """The constructor's arguments checked by the model of ``[capabilities.sandbox.e2b]``: a
    bad value is one :class:`~pai.sandbox.SandboxInputError` naming every offending option."""
    for name in ("metadata", "env"):
        value = values[name]
        if value is None or isinstance(value, Mapping):
            values[name] = dict(cast("Mapping[object, object]", value or {}))
    try:
        return E2BOptions.model_validate(values)
    except ValidationError as error:
        problems = "; ".join(
            f"option {'.'.join(str(part) for part in item['loc'])}: "
            f"{str(item['msg']).removeprefix('Value error, ')}, got {item['input']!r} "
            f"({E2BOptions.model_fields[str(item['loc'][0])].description})"
            for item in error.errors()
        )
        raise SandboxInputError(f"E2BSandboxProvider: {problems}") from None


def _key_bytes(key: str) -> bytes:
    return key.encode("utf-8", "surrogatepass")


def key_hash(key: str) -> str:
    """The SHA-256 of the key: sandboxes are listed by it, then the exact key is compared."""
    return hashlib.sha256(_key_bytes(key)).hexdigest()


def _metadata_key(metadata: Mapping[str, str]) -> str | None:
    encoded = metadata.get(META_KEY_B64)
    if encoded is None:
        return None
    try:
        return base64.b64decode(encoded).decode("utf-8", "surrogatepass")
    except ValueError:
        return None


def _age(metadata: Mapping[str, str], started_at: datetime) -> float:
    """Seconds since the sandbox was created: by its ``pai.created`` metadata (which a resume
    does not change), else by when E2B started it."""
    created = started_at
    stamp = metadata.get(META_CREATED)
    if stamp is not None:
        with contextlib.suppress(ValueError):
            created = datetime.fromisoformat(stamp)
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return max((datetime.now(UTC) - created).total_seconds(), 0.0)


def _require_asyncio() -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise SandboxProviderError(
            "the e2b SDK runs on asyncio only: use the e2b sandbox provider under asyncio "
            "(e.g. anyio.run(main) or anyio.run(main, backend='asyncio')), not trio"
        ) from None


class E2BSandboxProvider:
    """Sandboxes on E2B, one per instance key, found again by metadata from any process.

    ``template`` (default ``"base"``) is the E2B template; ``timeout`` (seconds, default 300) is
    how long a sandbox lives after its last use: it is given at create and connect (a connect
    never shortens a live sandbox), and again while the sandbox is used, once half of it has
    passed. ``max_lifetime`` (seconds since creation, default ``None``: unbounded) is how long a
    sandbox is kept alive at most, however busy. ``api_key`` defaults to ``E2B_API_KEY``;
    ``domain``, ``api_url`` and ``sandbox_url`` default to the SDK's (``E2B_DOMAIN``,
    ``E2B_API_URL``, ``E2B_SANDBOX_URL``; point the URLs at
    :class:`~pai.sandbox_e2b.testing.E2BEmulator` for offline tests). ``metadata`` is added to
    every sandbox's metadata; ``namespace`` separates the sandboxes of different applications
    (``pai sandbox ls/prune`` see one namespace). ``env`` is set in every sandbox.
    ``allow_internet_access`` is ``False`` by default: commands cannot reach the internet.
    ``user`` is the sandbox user commands and files use. ``request_timeout`` bounds every API
    and envd request, so an unreachable API is an error within that time. Every argument is
    checked by :class:`~pai.sandbox_e2b.E2BOptions` (the model of
    ``[capabilities.sandbox.e2b]``): a bad one raises :class:`~pai.sandbox.SandboxInputError`
    naming the option.

    The SDK is asyncio-only, so is this provider.

    Example::

        provider = E2BSandboxProvider(template="base", timeout=600)
        capability = sandbox_capability(provider=provider)
    """

    def __init__(
        self,
        *,
        template: str = "base",
        timeout: int = 300,
        max_lifetime: int | None = None,
        api_key: str | None = None,
        domain: str | None = None,
        api_url: str | None = None,
        sandbox_url: str | None = None,
        metadata: Mapping[str, str] | None = None,
        namespace: str = "pai",
        env: Mapping[str, str] | None = None,
        allow_internet_access: bool = False,
        user: str = "user",
        request_timeout: float = 30.0,
    ) -> None:
        checked = _checked_options(
            template=template,
            timeout=timeout,
            max_lifetime=max_lifetime,
            api_key=api_key,
            domain=domain,
            api_url=api_url,
            sandbox_url=sandbox_url,
            metadata=metadata,
            namespace=namespace,
            env=env,
            allow_internet_access=allow_internet_access,
            user=user,
            request_timeout=request_timeout,
        )
        key = checked.api_key or os.environ.get("E2B_API_KEY")
        if not key:
            raise E2BApiKeyMissingError(
                "no E2B API key: set the E2B_API_KEY environment variable (or pass api_key=...); "
                "get a key at https://e2b.dev/dashboard?tab=keys, or point api_url/sandbox_url "
                "at pai.sandbox_e2b.testing.E2BEmulator (which prints its key) for offline tests"
            )
        register_exit_grace()
        domain, sandbox_url = checked.domain, checked.sandbox_url
        self.template: str = checked.template
        self.timeout: int = checked.timeout
        self.max_lifetime: int | None = checked.max_lifetime
        self.domain: str | None = domain
        self.api_url: str = (
            checked.api_url
            or os.environ.get("E2B_API_URL")
            or f"https://api.{domain or os.environ.get('E2B_DOMAIN') or 'e2b.app'}"
        )
        self.sandbox_url: str | None = sandbox_url
        if on_this_machine(self.api_url) and not (sandbox_url or os.environ.get("E2B_SANDBOX_URL")):
            raise SandboxInputError(
                f"api_url {self.api_url} is on this machine (an emulator?) but sandbox_url is "
                "not set, so commands and files would go to E2B's cloud; set sandbox_url (or "
                "E2B_SANDBOX_URL) too, e.g. to the same URL for E2BEmulator"
            )
        self.metadata: dict[str, str] = checked.metadata
        self.namespace: str = checked.namespace
        self.env: dict[str, str] = checked.env
        self.allow_internet_access: bool = checked.allow_internet_access
        self.user: str = checked.user
        self.request_timeout: float = float(checked.request_timeout)
        options: dict[str, Any] = {
            "api_key": key,
            "api_url": self.api_url,
            "request_timeout": self.request_timeout,
        }
        if domain is not None:
            options["domain"] = domain
        if sandbox_url is not None:
            options["sandbox_url"] = sandbox_url
        self._options = options
        self._features = ProviderFeatures(cross_process=True, durable=True, processes=True)
        # One lifetime per sandbox, shared by this provider's instances of it (held by them).
        self._lifetimes: weakref.WeakValueDictionary[str, SandboxLifetime] = (
            weakref.WeakValueDictionary()
        )

    @property
    def name(self) -> str:
        """``"e2b"``."""
        return "e2b"

    @property
    def features(self) -> ProviderFeatures:
        """Cross-process, durable, processes."""
        return self._features

    def __repr__(self) -> str:
        return (
            f"E2BSandboxProvider(template={self.template!r}, namespace={self.namespace!r}, "
            f"api_url={self.api_url!r})"
        )

    # -- talking to the API -------------------------------------------------------------------

    async def _api(
        self, what: str, call: Callable[[], Awaitable[T]], *, template: str | None = None
    ) -> T:
        """One control-plane call, bounded in time, retried where that helps (see
        :mod:`pai.sandbox_e2b._failures`), its failures made E2BError subclasses that say
        what to do. The SDK's ``SandboxNotFoundException`` (404 for a sandbox) passes through:
        callers decide what a missing sandbox means."""
        _require_asyncio()
        try:
            return await retrying(
                lambda: self._bounded(what, call),
                api_retryable,
                request_timeout=self.request_timeout,
            )
        except (SandboxNotFoundException, SandboxProviderError):
            raise
        except Exception as error:
            raise api_error(
                error, what=what, api_url=self.api_url, timeout=self.timeout, template=template
            ) from error

    async def _bounded(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        try:
            with anyio.fail_after(self.request_timeout + 5):
                return await call()
        except TimeoutError:
            raise E2BUnreachableError(
                f"the E2B API at {self.api_url} did not answer {what} within "
                f"{self.request_timeout + 5:.0f} s; check api_url / E2B_API_URL and the network"
            ) from None
        except (TransportError, OSError) as error:
            raise E2BUnreachableError(
                f"could not reach the E2B API at {self.api_url} ({what}): {error}; check "
                "api_url / E2B_API_URL / E2B_DOMAIN and the network"
            ) from error
        except TimeoutException as error:
            if isinstance(error, SandboxNotRunningException):
                raise
            raise E2BUnreachableError(
                f"the E2B API at {self.api_url} timed out ({what}): {error}"
            ) from error

    def unreachable_sandbox(self, sandbox: AsyncSandbox, error: BaseException) -> E2BError:
        """The error for a sandbox whose envd did not answer."""
        return E2BUnreachableError(
            f"E2B sandbox {sandbox.sandbox_id} did not answer at {sandbox.envd_api_url} within "
            f"request_timeout ({self.request_timeout:g} s): {error}; check sandbox_url / "
            "E2B_SANDBOX_URL / E2B_DOMAIN and the network"
        )

    async def envd(self, sandbox: AsyncSandbox, operation: Callable[[], Awaitable[T]]) -> T:
        """``operation`` on the sandbox's envd, retried where the answer proves it was not
        carried out (the proxy's 429, 409, 502 "port is not open", 503); a sandbox that does
        not answer, and those answers once the retries are spent, become E2BError subclasses
        naming the sandbox and the fix. E2B's "not found" for the sandbox, and envd's own
        answers about files, pass through as the SDK's exceptions."""
        try:
            return await retrying(operation, envd_retryable, request_timeout=self.request_timeout)
        except (SandboxNotRunningException, SandboxNotFoundException):
            raise
        except (TimeoutException, TransportError) as error:
            mapped = envd_error(error, sandbox_id=sandbox.sandbox_id)
            raise (mapped or self.unreachable_sandbox(sandbox, error)) from error
        except Exception as error:
            mapped = envd_error(error, sandbox_id=sandbox.sandbox_id)
            if mapped is None:
                raise
            raise mapped from error

    # -- lifetimes ----------------------------------------------------------------------------

    def lifetime(self, sandbox_id: str) -> SandboxLifetime:
        """The lifetime of the sandbox as this provider tracks it (one that starts now when
        none is tracked): what :class:`E2BSandboxInstance` extends while it is used."""
        held = self._lifetimes.get(sandbox_id)
        if held is None:
            held = SandboxLifetime(self.timeout, self.max_lifetime)
            held.granted(_lifetime.clock(), self.timeout)
            self._lifetimes[sandbox_id] = held
        return held

    async def connect(self, sandbox_id: str) -> AsyncSandbox:
        """Connect to a sandbox by id, passing the configured timeout (resumes a paused one);
        a sandbox past ``max_lifetime`` is not connected to (``SandboxNotFoundException``)."""
        lifetime = self.lifetime(sandbox_id)
        seconds = lifetime.grant()
        if seconds is None:
            raise SandboxNotFoundException(
                f"sandbox {sandbox_id} is past max_lifetime ({self.max_lifetime} s)"
            )
        sent = _lifetime.clock()
        sandbox = await self._api(
            f"connecting to sandbox {sandbox_id}",
            lambda: connect_sandbox(sandbox_id, timeout=seconds, options=self._options),
        )
        lifetime.granted(sent, seconds)
        return sandbox

    def keep_alive(self, sandbox_id: str) -> None:
        """Give the sandbox ``timeout`` more seconds when that is due (see
        :class:`SandboxLifetime`): a request made by a task of its own, which the operation
        that called this does not wait for; nothing at all when no extension is due. A failed
        extension is logged as a warning and tried again by the next operation (the sandbox
        still has half of ``timeout`` or more to live when it is first due)."""
        lifetime = self.lifetime(sandbox_id)
        seconds = lifetime.due()
        if seconds is None:
            return
        _require_asyncio()
        task = asyncio.get_running_loop().create_task(self._extend(sandbox_id, lifetime, seconds))
        lifetime.extension = task  # held: the event loop keeps only a weak reference to tasks
        task.add_done_callback(lifetime.settled)

    async def _extend(self, sandbox_id: str, lifetime: SandboxLifetime, seconds: int) -> None:
        sent = _lifetime.clock()
        try:
            # A connect, not set-timeout: it never shortens a life another process lengthened.
            await self._api(
                f"extending the life of sandbox {sandbox_id}",
                lambda: connect_sandbox(sandbox_id, timeout=seconds, options=self._options),
            )
        except SandboxNotFoundException:
            pass  # gone: the operation finds that out, and what to do
        except E2BTimeoutLimitError as error:
            lifetime.exhausted = True
            _log.warning("E2B sandbox %s is no longer kept alive: %s", sandbox_id, error)
        except SandboxProviderError as error:
            _log.warning(
                "could not extend the life of E2B sandbox %s (the next operation tries again): %s",
                sandbox_id,
                error,
            )
        else:
            lifetime.granted(sent, seconds)

    async def state(self, sandbox_id: str) -> str | None:
        """What E2B's API says of the sandbox: ``"running"``, ``"paused"``, or ``None`` when it
        no longer exists (or is being killed). Raises :class:`E2BError` when the API does not
        say (:class:`E2BUnreachableError` when it does not answer)."""
        try:
            info = await self._api(
                f"asking E2B about sandbox {sandbox_id}",
                lambda: sandbox_info(sandbox_id, options=self._options),
            )
        except SandboxNotFoundException:
            return None
        return str(getattr(info.state, "value", info.state))

    def _metadata(self, key: str) -> dict[str, str]:
        readable = _key_bytes(key).decode("utf-8", "backslashreplace")
        if len(readable) > 200:
            readable = readable[:200] + "..."
        return {
            **self.metadata,
            META_NAMESPACE: self.namespace,
            META_KEY: readable,
            META_KEY_B64: base64.b64encode(_key_bytes(key)).decode(),
            META_KEY_HASH: key_hash(key),
            META_CAPABILITY: "sandbox",
            META_CREATED: datetime.now(UTC).isoformat(),
            META_VERSION: PROVIDER_VERSION,
        }

    async def _list(self, key: str | None = None) -> list[tuple[str, Any]]:
        """(key, listing) of every sandbox of this namespace (of ``key`` only, when given),
        every page; the metadata is checked again here, the query narrows by hash only."""
        query = {META_NAMESPACE: self.namespace}
        if key is not None:
            query[META_KEY_HASH] = key_hash(key)
        paginator = list_sandboxes(query, limit=100, options=self._options)
        found: list[tuple[str, Any]] = []
        while paginator.has_next:
            for info in await self._api("listing sandboxes", paginator.next_items):
                listed_key = _metadata_key(info.metadata)
                if (
                    listed_key is not None
                    and info.metadata.get(META_NAMESPACE) == self.namespace
                    and (key is None or listed_key == key)
                ):
                    found.append((listed_key, info))
            if not paginator.next_token:
                break
        return found

    # -- the provider protocol ----------------------------------------------------------------

    async def create(self, key: str) -> SandboxInstance:
        """A new sandbox for ``key`` (any old one killed), with ``/workspace`` made."""
        await self.destroy(key)
        lifetime = SandboxLifetime(self.timeout, self.max_lifetime)
        seconds = lifetime.grant() or 1
        sent = _lifetime.clock()
        sandbox = await self._api(
            "creating a sandbox",
            lambda: create_sandbox(
                template=self.template,
                timeout=seconds,
                metadata=self._metadata(key),
                envs=self.env or None,
                allow_internet_access=self.allow_internet_access,
                options=self._options,
            ),
            template=self.template,
        )
        lifetime.granted(sent, seconds)
        self._lifetimes[sandbox.sandbox_id] = lifetime
        try:
            await self.envd(
                sandbox,
                lambda: run_command(
                    sandbox,
                    'mkdir -p -- /workspace && { chown "$PAI_USER:" /workspace 2>/dev/null '
                    "|| true; }",
                    envs={"PAI_USER": self.user},
                    user="root",
                    timeout=60,
                ),
            )
        except BaseException as error:
            with anyio.CancelScope(shield=True):
                await self._kill(sandbox.sandbox_id)
            if isinstance(error, CommandExitException):
                raise SandboxProviderError(
                    f"could not make /workspace in the new E2B sandbox: {error}"
                ) from error
            if isinstance(error, SandboxNotRunningException):
                raise E2BError(
                    f"the new E2B sandbox {sandbox.sandbox_id} ended before it could be used "
                    f"({error}); try again, and check E2B's status (https://status.e2b.dev)"
                ) from error
            raise
        return E2BSandboxInstance(self, key, sandbox)

    async def find(self, key: str) -> SandboxInstance | None:
        """The sandbox for ``key`` (listed by metadata, connected with the timeout), or
        ``None``; a sandbox past ``max_lifetime`` is not returned."""
        matches = sorted(await self._list(key), key=lambda m: m[1].started_at, reverse=True)
        for _, info in matches:
            lifetime = self._lifetimes.get(info.sandbox_id) or SandboxLifetime(
                self.timeout, self.max_lifetime, age=_age(info.metadata, info.started_at)
            )
            self._lifetimes[info.sandbox_id] = lifetime
            try:
                sandbox = await self.connect(info.sandbox_id)
            except (NotFoundException, E2BSandboxBusyError):
                continue  # gone (or being killed) between the list and the connect
            return E2BSandboxInstance(self, key, sandbox)
        return None

    async def _kill(self, sandbox_id: str) -> None:
        try:
            await self._api(
                f"killing sandbox {sandbox_id}",
                lambda: kill_sandbox(sandbox_id, options=self._options),
            )
        except NotFoundException:
            pass
        except E2BSandboxBusyError as error:
            if "being killed" not in str(error):
                raise

    async def destroy(self, key: str) -> None:
        """Kill every sandbox of ``key`` in this namespace; nothing there is not an error."""
        for _, info in await self._list(key):
            await self._kill(info.sandbox_id)

    async def list_instances(self) -> Sequence[InstanceInfo]:
        """Every sandbox of this namespace (running and paused), oldest first."""
        infos: list[InstanceInfo] = []
        for key, info in await self._list():
            infos.append(
                InstanceInfo(
                    key=key,
                    instance_id=info.sandbox_id,
                    created_at=info.started_at,
                    provider=self.name,
                    details={
                        "state": str(getattr(info.state, "value", info.state)),
                        "template": str(info.template_id),
                        "end_at": info.end_at.isoformat(),
                        "namespace": self.namespace,
                    },
                )
            )
        return sorted(infos, key=lambda i: i.created_at)

    async def probe(self) -> None:
        """Check the E2B API answers at :attr:`api_url` and accepts the key: one listing
        request, creating nothing. Raises :class:`~pai.sandbox_e2b.E2BError` naming the URL
        (:class:`~pai.sandbox_e2b.E2BUnreachableError` when nothing answers) and the fix."""
        paginator = list_sandboxes({META_NAMESPACE: self.namespace}, limit=1, options=self._options)
        try:
            await self._api("listing sandboxes, to check the API answers", paginator.next_items)
        except E2BError:
            raise
        except Exception as error:
            raise E2BError(
                f"the E2B API at {self.api_url} did not accept a listing request "
                f"({type(error).__name__}: {error}); check api_url / E2B_API_URL and E2B_API_KEY"
            ) from error

    async def aclose(self) -> None:
        """Nothing to release: the SDK's connection pools are shared; sandboxes stay."""
