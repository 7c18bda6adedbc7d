"""The public surface of ``pai.sandbox``: ``__all__``, the token and the error hierarchy."""

from __future__ import annotations

import errno
import pickle
import re
from types import ModuleType

import pytest

import pai.sandbox
from pai.core import Capability, PaiError
from pai.sandbox import (
    Sandbox,
    SandboxClosedError,
    SandboxDirectoryNotEmptyError,
    SandboxError,
    SandboxFileExistsError,
    SandboxFileNotFoundError,
    SandboxFileTooLargeError,
    SandboxInputError,
    SandboxIsADirectoryError,
    SandboxNotADirectoryError,
    SandboxPathError,
    SandboxProviderError,
    SandboxVanishedError,
    SeedPathError,
    sandbox,
)


def _isort_style(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps ``__all__`` in: CONSTANTS, then Classes, then functions."""
    if name.isupper():
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def _public_names(module: ModuleType) -> set[str]:
    # dir() includes what the package exports lazily (each name's module is imported on use).
    return {
        name
        for name in dir(module)
        if not name.startswith("_")
        and name != "TYPE_CHECKING"
        and not isinstance(getattr(module, name), ModuleType)
    }


def test_all_lists_every_public_name_and_nothing_else() -> None:
    assert set(pai.sandbox.__all__) == _public_names(pai.sandbox)
    assert len(pai.sandbox.__all__) == len(set(pai.sandbox.__all__))


def test_all_is_sorted() -> None:
    assert pai.sandbox.__all__ == sorted(pai.sandbox.__all__, key=_isort_style)


def test_every_name_in_all_resolves() -> None:
    for name in pai.sandbox.__all__:
        assert getattr(pai.sandbox, name) is not None, name


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from pai.sandbox import *", namespace)
    namespace.pop("__builtins__")
    assert set(namespace) == set(pai.sandbox.__all__)


def test_the_sandbox_token() -> None:
    assert isinstance(sandbox, Capability)
    assert sandbox.id == "sandbox"
    assert sandbox.facade is Sandbox
    assert sandbox.description


ERRORS: list[tuple[type[SandboxError], tuple[type[BaseException], ...]]] = [
    (SandboxInputError, (ValueError,)),
    (SandboxPathError, (ValueError,)),
    (SeedPathError, (SandboxPathError, ValueError)),
    (SandboxFileNotFoundError, (FileNotFoundError, OSError)),
    (SandboxIsADirectoryError, (IsADirectoryError, OSError)),
    (SandboxNotADirectoryError, (NotADirectoryError, OSError)),
    (SandboxFileExistsError, (FileExistsError, OSError)),
    (SandboxDirectoryNotEmptyError, (OSError,)),
    (SandboxFileTooLargeError, (OSError,)),
    (SandboxVanishedError, ()),
    (SandboxClosedError, (RuntimeError,)),
    (SandboxProviderError, (RuntimeError,)),
]


@pytest.mark.parametrize(("error", "bases"), ERRORS, ids=[error.__name__ for error, _ in ERRORS])
def test_errors_subclass_sandbox_error_and_the_matching_builtins(
    error: type[SandboxError], bases: tuple[type[BaseException], ...]
) -> None:
    assert issubclass(error, SandboxError)
    assert issubclass(error, PaiError)
    for base in bases:
        assert issubclass(error, base), f"{error.__name__} is not a {base.__name__}"


FILE_ERRORS: list[tuple[type[OSError], int]] = [
    (SandboxFileNotFoundError, errno.ENOENT),
    (SandboxIsADirectoryError, errno.EISDIR),
    (SandboxNotADirectoryError, errno.ENOTDIR),
    (SandboxFileExistsError, errno.EEXIST),
    (SandboxDirectoryNotEmptyError, errno.ENOTEMPTY),
]


@pytest.mark.parametrize(
    ("error", "code"), FILE_ERRORS, ids=[error.__name__ for error, _ in FILE_ERRORS]
)
def test_file_errors_carry_the_path_and_errno(error: type[OSError], code: int) -> None:
    raised = error("/workspace/some file.txt")
    assert raised.filename == "/workspace/some file.txt"
    assert raised.errno == code
    assert "'/workspace/some file.txt'" in str(raised)
    assert "[Errno" not in str(raised)


def test_file_errors_can_add_a_detail() -> None:
    raised = SandboxFileNotFoundError("/workspace/a", "the parent folder is missing")
    assert str(raised).endswith("(the parent folder is missing)")
    assert raised.filename == "/workspace/a"


def test_the_file_too_large_error_carries_path_size_and_limit_and_names_the_option() -> None:
    raised = SandboxFileTooLargeError("/workspace/big.bin", size=2049, limit=2048)
    assert (raised.path, raised.filename, raised.size, raised.limit) == (
        "/workspace/big.bin",
        "/workspace/big.bin",
        2049,
        2048,
    )
    assert raised.errno == errno.EFBIG
    message = str(raised)
    for part in ("'/workspace/big.bin'", "2049 bytes", "2048 bytes", "read_limit"):
        assert part in message
    assert "[Errno" not in message


def test_the_file_too_large_error_survives_pickling() -> None:
    raised = pickle.loads(
        pickle.dumps(SandboxFileTooLargeError("/workspace/big.bin", size=2, limit=1))
    )
    assert isinstance(raised, SandboxFileTooLargeError)
    assert (raised.path, raised.size, raised.limit) == ("/workspace/big.bin", 2, 1)


def test_the_error_tree_drawn_in_the_errors_module_names_every_error() -> None:
    import pai.sandbox._errors as errors

    drawn = set(re.findall(r"(?:└──|├──) (\w+)", errors.__doc__ or ""))
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, SandboxError) and name[0] != "_"
    }
    assert defined == drawn


def test_except_file_not_found_error_catches_the_sandbox_error() -> None:
    with pytest.raises(FileNotFoundError):
        raise SandboxFileNotFoundError("/workspace/missing")


def test_the_provider_extension_module_lists_every_public_name_sorted() -> None:
    import pai.sandbox.provider as provider

    assert set(provider.__all__) == _public_names(provider)
    assert provider.__all__ == sorted(provider.__all__, key=_isort_style)
    for name in provider.__all__:
        assert getattr(provider, name) is not None, name


def test_the_provider_extension_module_and_the_package_share_no_name() -> None:
    # One public home per name: an application's names in pai.sandbox, a provider's only in
    # pai.sandbox.provider (a provider imports the errors from pai.sandbox).
    import pai.sandbox.provider as provider

    assert not set(provider.__all__) & set(pai.sandbox.__all__)
