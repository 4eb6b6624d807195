"""Exceptions: one class per ``ferry_result`` code, all under :class:`FerryError`.

Every failed C call becomes an exception whose message is the library's
``ferry_last_error()`` text, read on the same thread right after the call.
The classes keep ferry's two families apart, as the C header does:

* "the world changed, try again" -- :class:`TimeoutError`, :class:`PeerLostError`
  (``is_retryable`` is True: call ``Communicator.update_topology()``, then retry);
* "you called it wrong" -- :class:`InvalidArgumentError` (also a ``ValueError``),
  :class:`InvalidUsageError`.

This module is pure Python: it does not load libferry.
"""

from __future__ import annotations

import builtins
from typing import Dict, Optional, Type

__all__ = [
    "FerryError",
    "InvalidArgumentError",
    "InvalidUsageError",
    "TimeoutError",
    "PeerLostError",
    "MasterLostError",
    "ConnectError",
    "MismatchError",
    "KickedError",
    "ProtocolError",
    "AuthError",
    "ResourceError",
    "InternalError",
    "LibraryNotFoundError",
    "error_for_code",
]


class FerryError(RuntimeError):
    """Base of every error reported by ferry. A ``RuntimeError``, so handlers written for
    torch.distributed's errors catch it too.

    Attributes:
        code: the ``ferry_result`` number (stable, append-only in ferry.h).
        message: the precise message (``ferry_last_error()`` for C failures).
        is_retryable: True when the world changed and the operation can be
            retried after ``Communicator.update_topology()``.
    """

    code: int = -1
    is_retryable: bool = False

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return self.message


class InvalidArgumentError(FerryError, ValueError):
    """FERRY_ERR_INVALID_ARGUMENT: a bad value (address, range, dtype, buffer). Nothing changed."""

    code = 1


class InvalidUsageError(FerryError):
    """FERRY_ERR_INVALID_USAGE: a call at the wrong time (before connect, after close, ops in flight)."""

    code = 2


class TimeoutError(FerryError, builtins.TimeoutError):  # noqa: A001 - ferry.TimeoutError by design
    """FERRY_ERR_TIMEOUT: a deadline passed. Retryable: update_topology(), then retry."""

    code = 3
    is_retryable = True


class PeerLostError(FerryError):
    """FERRY_ERR_PEER_LOST: a peer of the operation's world died or left.

    Retryable: every survivor calls update_topology(), then retries in the smaller world.
    """

    code = 4
    is_retryable = True


class MasterLostError(FerryError):
    """FERRY_ERR_MASTER_LOST: the master is gone. The communicator is unusable; close it."""

    code = 5


class ConnectError(FerryError):
    """FERRY_ERR_CONNECT: could not reach or bind an address (master down, port in use)."""

    code = 6


class MismatchError(FerryError):
    """FERRY_ERR_MISMATCH: peers issued different collectives at the same position.

    The operation failed on every peer; the communicator stays usable.
    """

    code = 7


class KickedError(FerryError):
    """FERRY_ERR_KICKED: the master removed this peer. The communicator is unusable; close it."""

    code = 8


class ProtocolError(FerryError):
    """FERRY_ERR_PROTOCOL: a malformed, unexpected or corrupted message arrived."""

    code = 9


class AuthError(FerryError):
    """FERRY_ERR_AUTH: authentication failed (wrong or missing run secret)."""

    code = 10


class ResourceError(FerryError):
    """FERRY_ERR_SYSTEM: an operating-system resource failed (memory, threads, sockets).

    Named ResourceError so that it does not shadow Python's builtin SystemError.
    """

    code = 11


class InternalError(FerryError):
    """FERRY_ERR_INTERNAL: a bug in ferry; please report it with the message."""

    code = 12


class LibraryNotFoundError(ImportError):
    """libferry could not be loaded; the message lists every place that was tried."""


_BY_CODE: Dict[int, Type[FerryError]] = {
    cls.code: cls
    for cls in (
        InvalidArgumentError,
        InvalidUsageError,
        TimeoutError,
        PeerLostError,
        MasterLostError,
        ConnectError,
        MismatchError,
        KickedError,
        ProtocolError,
        AuthError,
        ResourceError,
        InternalError,
    )
}


def error_for_code(code: int, message: str) -> FerryError:
    """The exception for a ``ferry_result`` code; unknown (newer) codes give a plain FerryError."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return FerryError(message, code)
    return cls(message)
