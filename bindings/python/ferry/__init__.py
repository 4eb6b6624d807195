"""ferry: peer-to-peer all-reduce over the WAN, for PyTorch and NumPy.

A thin layer over libferry's C API (``include/ferry/ferry.h``) through
ctypes. Every call into the library releases the GIL, so blocking calls
(connect, topology votes, all-reduces, waits) never stall other Python
threads.

    import ferry, torch
    with ferry.Communicator("10.0.0.1:48148") as comm:
        comm.connect()
        comm.wait_for_world(3)             # grow the ring to 3 peers
        grads = torch.ones(1024)
        comm.all_reduce(grads, op="avg")   # in place, zero-copy

See README.md next to this package for installation and the full API.
"""

from ._lib import library_path
from ._version import __version__
from .communicator import Communicator
from .dtypes import QUANT_NAMES, DType, ReduceOp
from .errors import (
    AuthError,
    ConnectError,
    FerryError,
    InternalError,
    InvalidArgumentError,
    InvalidUsageError,
    KickedError,
    LibraryNotFoundError,
    MasterLostError,
    MismatchError,
    PeerLostError,
    ProtocolError,
    ResourceError,
)
from .errors import TimeoutError as _FerryTimeoutError
from .handle import Handle, OpInfo
from .links import Link, LinkMatrix
from .master import Master
from .pinned_pool import set_pinned_pool_limit
from .shared_state import SyncInfo, SyncStrategy

# ferry.TimeoutError (a subclass of the builtin); not in __all__, so `from ferry import *` keeps the builtin.
TimeoutError = _FerryTimeoutError

__all__ = [
    "Master", "Communicator", "Handle", "OpInfo", "Link", "LinkMatrix", "SyncInfo", "SyncStrategy", "DType", "ReduceOp", "QUANT_NAMES",
    # TimeoutError is left out on purpose: `from ferry import *` must not shadow the builtin.
    "FerryError", "InvalidArgumentError", "InvalidUsageError", "PeerLostError",
    "MasterLostError", "ConnectError", "MismatchError", "KickedError", "ProtocolError", "AuthError",
    "ResourceError", "InternalError", "LibraryNotFoundError",
    "library_path", "library_version", "strerror", "set_pinned_pool_limit",
]


def library_version() -> str:
    """The loaded libferry's version, "MAJOR.MINOR.PATCH" (ferry_version())."""
    from . import _lib

    return _lib.lib().ferry_version().decode()


def strerror(code: int) -> str:
    """ferry_strerror(code): a short description of a ferry_result number."""
    from . import _lib

    return _lib.lib().ferry_strerror(int(code)).decode()
