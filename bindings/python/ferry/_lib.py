"""Finds and loads libferry, and declares the C API to ctypes.

Where libferry comes from, first match wins:

1. ``$FERRY_LIBRARY`` -- a path to ``libferry.so``. When set it is the only
   candidate: a broken path is an error, never a silent fallback.
2. A copy bundled inside the installed package (``ferry/_bundled/libferry.so``,
   put there by ``pip install`` when it found a built library; see README.md).
3. The repository's CMake build, when the package runs from a source checkout:
   ``<repo>/build/capi/libferry.so``.
4. The system's library search (``libferry.so.0`` after ``cmake --install``,
   or on ``LD_LIBRARY_PATH``).

If nothing loads, :class:`~ferry.errors.LibraryNotFoundError` lists every
place tried and why it failed.

The library is loaded with :class:`ctypes.CDLL`, so **every foreign call
releases the GIL** for its whole duration: a blocking all-reduce, connect or
topology vote never stops the other Python threads. (``ctypes.PyDLL`` would
keep the GIL; it is not used.)

Parameter structs are versioned by their leading ``struct_size`` (ferry.h):
:func:`defaults` lets the library fill its own defaults into a scratch block
larger than any struct, then copies the fields this binding knows, so a newer
or older libferry never writes past a Python-side struct.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import threading
from pathlib import Path
from typing import List, Optional, Tuple, Type, TypeVar

from ._version import __version__
from .errors import LibraryNotFoundError, error_for_code

__all__ = ["lib", "library_path", "check", "defaults", "last_error", "version_problem"]

# The libferry this binding needs: the package's own version (see version_problem).
BINDING_VERSION = __version__

_PACKAGE_DIR = Path(__file__).resolve().parent
BUNDLED_PATH = _PACKAGE_DIR / "_bundled" / "libferry.so"


# --------------------------------------------------------------------------
# C types (ferry.h, section by section)
# --------------------------------------------------------------------------

c_result = ctypes.c_int


class Master(ctypes.Structure):
    """Opaque ``ferry_master``."""


class Comm(ctypes.Structure):
    """Opaque ``ferry_comm``."""


class Op(ctypes.Structure):
    """Opaque ``ferry_op``."""


class Gathered(ctypes.Structure):
    """Opaque ``ferry_gathered``."""


MasterPtr = ctypes.POINTER(Master)
GatheredPtr = ctypes.POINTER(Gathered)
CommPtr = ctypes.POINTER(Comm)
OpPtr = ctypes.POINTER(Op)


class MasterParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("listen_address", ctypes.c_char_p),
        ("peer_timeout_ms", ctypes.c_uint32),
        ("secret_file", ctypes.c_char_p),
        ("tls_cert_file", ctypes.c_char_p),
        ("tls_key_file", ctypes.c_char_p),
        ("tls_ca_file", ctypes.c_char_p),
        ("link_max_age_ms", ctypes.c_uint32),
        ("http_address", ctypes.c_char_p),
        ("punch", ctypes.c_uint32),
    ]


class CommParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("master_address", ctypes.c_char_p),
        ("peer_group", ctypes.c_uint32),
        ("p2p_connections", ctypes.c_uint32),
        ("p2p_listen_host", ctypes.c_char_p),
        ("p2p_port_min", ctypes.c_uint16),
        ("p2p_port_max", ctypes.c_uint16),
        ("advertised_host", ctypes.c_char_p),
        ("advertised_port", ctypes.c_uint16),
        ("timeout_ms", ctypes.c_uint32),
        ("progress_timeout_ms", ctypes.c_uint32),
        ("heartbeat_timeout_ms", ctypes.c_uint32),
        ("io_threads", ctypes.c_uint32),
        ("max_chunk_bytes", ctypes.c_uint32),
        ("congestion_control", ctypes.c_char_p),
        ("secret_file", ctypes.c_char_p),
        ("tls_cert_file", ctypes.c_char_p),
        ("tls_key_file", ctypes.c_char_p),
        ("tls_ca_file", ctypes.c_char_p),
        ("shared_memory", ctypes.c_uint32),
        ("master_reconnect_timeout_ms", ctypes.c_uint32),
        ("master_connect_timeout_ms", ctypes.c_uint32),
        ("dial_out_only", ctypes.c_uint32),
        ("refuse_relay", ctypes.c_uint32),
    ]


class LinkInfoC(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("shared_memory", ctypes.c_uint32),
        ("from_peer", ctypes.c_uint64),
        ("to_peer", ctypes.c_uint64),
        ("goodput_bytes_per_s", ctypes.c_double),
        ("delivery_rate_bytes_per_s", ctypes.c_double),
        ("rtt_ms", ctypes.c_double),
        ("retransmit_ratio", ctypes.c_double),
        ("bytes", ctypes.c_uint64),
        ("age_s", ctypes.c_double),
        ("connections", ctypes.c_uint32),
    ]


class AllreduceDesc(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("dtype", ctypes.c_int),  # ferry_dtype (a C enum: int-sized)
        ("op", ctypes.c_int),  # ferry_reduce_op
        ("tag", ctypes.c_uint64),
        ("quant", ctypes.c_int),  # ferry_quant
        ("quant_block", ctypes.c_uint32),
        ("device", ctypes.c_int),
        ("device_index", ctypes.c_int),
        ("cuda_stream", ctypes.c_void_p),
    ]


class OpInfoC(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("world_size", ctypes.c_uint32),
        ("bytes_sent", ctypes.c_uint64),
        ("bytes_received", ctypes.c_uint64),
        ("duration_s", ctypes.c_double),
        ("start_s", ctypes.c_double),
        ("longest_stall_s", ctypes.c_double),
        ("commit_s", ctypes.c_double),
        ("quant_agreement_s", ctypes.c_double),
    ]

    @classmethod
    def empty(cls) -> "OpInfoC":
        info = cls()
        info.struct_size = ctypes.sizeof(cls)
        return info


class AllGatherDesc(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("tag", ctypes.c_uint64),
    ]


class SparseSpecC(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("chunk", ctypes.c_uint32),
        ("k", ctypes.c_uint32),
        ("bits", ctypes.c_uint32),
    ]


class AllreduceJob(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("send", ctypes.c_void_p),
        ("recv", ctypes.c_void_p),
        ("count", ctypes.c_size_t),
        ("desc", AllreduceDesc),
    ]


class Tensor(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("name", ctypes.c_char_p),
        ("data", ctypes.c_void_p),
        ("count", ctypes.c_size_t),
        ("dtype", ctypes.c_int),  # ferry_dtype
        ("device", ctypes.c_int),  # ferry_device
        ("allow_content_inequality", ctypes.c_int),
        ("changed", ctypes.c_int),
        ("device_index", ctypes.c_int),
    ]


class SharedState(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("revision", ctypes.c_uint64),
        ("tensors", ctypes.POINTER(Tensor)),
        ("count", ctypes.c_size_t),
        ("compression_level", ctypes.c_uint32),
        ("cuda_stream", ctypes.c_void_p),
    ]


class SyncInfoC(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("bytes_sent", ctypes.c_uint64),
        ("bytes_received", ctypes.c_uint64),
        ("tensors_changed", ctypes.c_uint32),
        ("revision", ctypes.c_uint64),
        ("duration_s", ctypes.c_double),
    ]

    @classmethod
    def empty(cls) -> "SyncInfoC":
        info = cls()
        info.struct_size = ctypes.sizeof(cls)
        return info


_R = ctypes.c_int  # ferry_result
_SIGNATURES = {
    # name: (restype, argtypes)
    "ferry_version": (ctypes.c_char_p, []),
    "ferry_version_number": (ctypes.c_uint32, []),
    "ferry_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "ferry_last_error": (ctypes.c_char_p, []),
    "ferry_result_is_retryable": (ctypes.c_int, [ctypes.c_int]),
    "ferry_dtype_size": (ctypes.c_size_t, [ctypes.c_int]),
    "ferry_master_params_init": (None, [ctypes.c_void_p]),
    "ferry_master_params_init_sized": (None, [ctypes.c_void_p, ctypes.c_uint32]),
    "ferry_master_create": (_R, [ctypes.c_char_p, ctypes.POINTER(MasterPtr)]),
    "ferry_master_create_with": (_R, [ctypes.POINTER(MasterParams), ctypes.POINTER(MasterPtr)]),
    "ferry_master_run": (_R, [MasterPtr]),
    "ferry_master_port": (_R, [MasterPtr, ctypes.POINTER(ctypes.c_uint16)]),
    "ferry_master_http_port": (_R, [MasterPtr, ctypes.POINTER(ctypes.c_uint16)]),
    "ferry_master_stop": (_R, [MasterPtr]),
    "ferry_master_stop_for_restart": (_R, [MasterPtr]),
    "ferry_master_destroy": (None, [MasterPtr]),
    "ferry_comm_params_init": (None, [ctypes.c_void_p]),
    "ferry_comm_params_init_sized": (None, [ctypes.c_void_p, ctypes.c_uint32]),
    "ferry_comm_create": (_R, [ctypes.POINTER(CommParams), ctypes.POINTER(CommPtr)]),
    "ferry_connect": (_R, [CommPtr]),
    "ferry_update_topology": (_R, [CommPtr]),
    "ferry_optimize_topology": (_R, [CommPtr]),
    "ferry_wait_for_world": (_R, [CommPtr, ctypes.c_uint32, ctypes.c_uint32]),
    "ferry_peers_pending": (_R, [CommPtr, ctypes.POINTER(ctypes.c_uint32)]),
    "ferry_comm_get_attribute": (_R, [CommPtr, ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]),
    "ferry_comm_ring": (_R, [CommPtr, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
                             ctypes.POINTER(ctypes.c_size_t)]),
    "ferry_comm_link_matrix": (_R, [CommPtr, ctypes.POINTER(LinkInfoC), ctypes.c_size_t,
                                    ctypes.POINTER(ctypes.c_size_t)]),
    "ferry_comm_abort": (_R, [CommPtr]),
    "ferry_comm_set_label": (_R, [CommPtr, ctypes.c_char_p]),
    "ferry_comm_destroy": (None, [CommPtr]),
    "ferry_allreduce_desc_init": (None, [ctypes.c_void_p]),
    "ferry_allreduce_desc_init_sized": (None, [ctypes.c_void_p, ctypes.c_uint32]),
    "ferry_allreduce": (_R, [CommPtr, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                             ctypes.POINTER(AllreduceDesc), ctypes.POINTER(OpInfoC)]),
    "ferry_barrier": (_R, [CommPtr]),
    "ferry_broadcast": (_R, [CommPtr, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.POINTER(OpInfoC)]),
    "ferry_allreduce_async": (_R, [CommPtr, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                   ctypes.POINTER(AllreduceDesc), ctypes.POINTER(OpPtr)]),
    "ferry_all_gather_desc_init": (None, [ctypes.c_void_p]),
    "ferry_all_gather_desc_init_sized": (None, [ctypes.c_void_p, ctypes.c_uint32]),
    "ferry_all_gather": (_R, [CommPtr, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(AllGatherDesc),
                              ctypes.POINTER(GatheredPtr), ctypes.POINTER(OpInfoC)]),
    "ferry_all_gather_async": (_R, [CommPtr, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(AllGatherDesc),
                                    ctypes.POINTER(GatheredPtr), ctypes.POINTER(OpPtr)]),
    "ferry_gathered_layout": (_R, [GatheredPtr, ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_void_p),
                                   ctypes.POINTER(ctypes.c_size_t)]),
    "ferry_gathered_part": (_R, [GatheredPtr, ctypes.c_uint32, ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.POINTER(ctypes.c_size_t)]),
    "ferry_gathered_destroy": (None, [GatheredPtr]),
    "ferry_sparse_spec_init": (None, [ctypes.c_void_p]),
    "ferry_sparse_spec_init_sized": (None, [ctypes.c_void_p, ctypes.c_uint32]),
    "ferry_sparse_k_for_density": (ctypes.c_uint32, [ctypes.c_uint32, ctypes.c_double]),
    "ferry_sparse_max_bytes": (_R, [ctypes.POINTER(SparseSpecC), ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
    "ferry_sparse_encode": (_R, [ctypes.POINTER(SparseSpecC), ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                                 ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p]),
    "ferry_sparse_decode_sum": (_R, [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint32,
                                     ctypes.c_void_p, ctypes.c_size_t]),
    "ferry_op_test": (_R, [OpPtr, ctypes.POINTER(ctypes.c_int)]),
    "ferry_op_wait": (_R, [OpPtr, ctypes.POINTER(OpInfoC)]),
    "ferry_allreduce_job_init": (None, [ctypes.c_void_p]),
    "ferry_allreduce_job_init_sized": (None, [ctypes.c_void_p, ctypes.c_uint32]),
    "ferry_allreduce_multiple_with_retry": (_R, [CommPtr, ctypes.POINTER(AllreduceJob), ctypes.c_size_t,
                                                 ctypes.c_uint32, ctypes.POINTER(OpInfoC)]),
    "ferry_tensor_init": (None, [ctypes.c_void_p]),
    "ferry_tensor_init_sized": (None, [ctypes.c_void_p, ctypes.c_uint32]),
    "ferry_shared_state_init": (None, [ctypes.c_void_p]),
    "ferry_shared_state_init_sized": (None, [ctypes.c_void_p, ctypes.c_uint32]),
    "ferry_sync_shared_state": (_R, [CommPtr, ctypes.POINTER(SharedState), ctypes.c_int,
                                     ctypes.POINTER(SyncInfoC)]),
}


# --------------------------------------------------------------------------
# Locating and loading
# --------------------------------------------------------------------------

def _repo_root() -> Optional[Path]:
    """The source checkout this package sits in (bindings/python/ferry), if any."""
    root = _PACKAGE_DIR.parent.parent.parent
    return root if (root / "include" / "ferry" / "ferry.h").is_file() else None


def candidates() -> List[Tuple[str, str]]:
    """(where, path-or-name) pairs in search order; see the module docstring."""
    env = os.environ.get("FERRY_LIBRARY")
    if env:
        return [("$FERRY_LIBRARY", env)]
    found = [("bundled with the package", str(BUNDLED_PATH))]
    root = _repo_root()
    if root is not None:
        found.append(("repository build", str(root / "build" / "capi" / "libferry.so")))
    system = ctypes.util.find_library("ferry")
    found.append(("system library search", system or "libferry.so.0"))
    return found


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_path: Optional[str] = None


def _major_minor(version: str) -> Tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def version_problem(library: str, binding: str) -> Optional[str]:
    """Why libferry ``library`` cannot serve a binding of version ``binding``; None if it can.

    ferry.h's stability promise holds within a major version (the soname's), where a
    minor version only adds (append-only enums, structs grown at the end): so the
    library must have the binding's major version and at least its minor one, which
    brings every function and field the binding declares.
    """
    try:
        have, need = _major_minor(library), _major_minor(binding)
    except ValueError:
        return f"its version {library!r} is not MAJOR.MINOR.PATCH"
    if have[0] != need[0] or have[1] < need[1]:
        return (f"it is libferry {library}, but this ferry package ({binding}) needs libferry "
                f"{need[0]}.{need[1]} or a later {need[0]}.x; install the matching library or package")
    return None


def _declare(handle: ctypes.CDLL) -> None:
    # The version first: an older library lacks functions, and its version says why.
    handle.ferry_version.restype = ctypes.c_char_p
    handle.ferry_version.argtypes = []
    found = handle.ferry_version().decode("utf-8", "replace")
    problem = version_problem(found, BINDING_VERSION)
    if problem is not None:
        raise LibraryNotFoundError(problem)
    for name, (restype, argtypes) in _SIGNATURES.items():
        try:
            fn = getattr(handle, name)
        except AttributeError:
            raise LibraryNotFoundError(
                f"it lacks {name}() although it says it is libferry {found}; rebuild libferry") from None
        fn.restype = restype
        fn.argtypes = argtypes


def lib() -> ctypes.CDLL:
    """The loaded libferry (loaded on first use, then cached). Thread-safe.

    Raises LibraryNotFoundError listing every candidate and why it failed.
    """
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for where, path in candidates():
            is_path = os.sep in path
            if is_path and not os.path.exists(path):
                tried.append(f"  {where}: {path}: no such file")
                continue
            try:
                handle = ctypes.CDLL(path)
                _declare(handle)
            except (OSError, LibraryNotFoundError) as e:
                tried.append(f"  {where}: {path}: {e}")
                if where == "$FERRY_LIBRARY":
                    break
                continue
            _lib, _path = handle, (os.path.abspath(path) if is_path else path)
            return handle
        raise LibraryNotFoundError(
            "could not load libferry. Build it (ninja -C build ferry), then set FERRY_LIBRARY=/path/to/"
            "libferry.so or reinstall the package so it bundles the library. Tried, in order:\n"
            + "\n".join(tried))


def library_path() -> str:
    """The path (or system name) of the libferry that was loaded; loads it if needed."""
    lib()
    assert _path is not None
    return _path


# --------------------------------------------------------------------------
# Errors and defaults
# --------------------------------------------------------------------------

def last_error() -> str:
    """``ferry_last_error()`` of the calling thread."""
    return lib().ferry_last_error().decode("utf-8", "replace")


# The C calls library messages name, and what a Python user calls instead.
_PYTHON_NAMES = {
    "ferry_connect": "comm.connect()",
    "ferry_update_topology": "comm.update_topology()",
    "ferry_optimize_topology": "comm.optimize_topology()",
    "ferry_peers_pending": "comm.peers_pending()",
    "ferry_wait_for_world": "comm.wait_for_world()",
    "ferry_allreduce": "comm.all_reduce()",
    "ferry_barrier": "comm.barrier()",
    "ferry_broadcast": "comm.broadcast()",
    "ferry_allreduce_async": "comm.all_reduce_async()",
    "ferry_all_gather": "comm.all_gather()",
    "ferry_all_gather_async": "comm.all_gather_async()",
    "ferry_allreduce_multiple_with_retry": "comm.all_reduce_many()",
    "ferry_sync_shared_state": "comm.sync_shared_state()",
    "ferry_comm_destroy": "comm.close()",
    "ferry_comm_abort": "an interrupted call on the main thread (Ctrl-C)",
    "ferry_comm_set_label": "comm.set_label()",
    "ferry_master_stop": "Master.stop()",
    "ferry_master_stop_for_restart": "Master.stop(restart=True)",
    "ferry_master_destroy": "Master.close()",
}
_C_NAME = re.compile(r"\bferry_[a-z_]+\b")


def python_names(message: str) -> str:
    """``message`` with the C calls it names replaced by their Python spelling."""
    return _C_NAME.sub(lambda m: _PYTHON_NAMES.get(m.group(0), m.group(0)), message)


def check(code: int, what: str) -> None:
    """Raises the exception for a failed ferry_result, with this thread's ferry_last_error().

    Must run on the thread that made the call, right after it (the message is thread-local).
    """
    if code == 0:
        return
    message = python_names(last_error())
    brief = lib().ferry_strerror(code).decode("utf-8", "replace")
    raise error_for_code(code, f"{what}: {brief}: {message}" if message else f"{what}: {brief}")


S = TypeVar("S", bound=ctypes.Structure)

# Larger than any parameter struct a future libferry could plausibly have (the C side refuses > 64 KiB).
_SCRATCH_BYTES = 4096


def defaults(cls: Type[S], init_name: str) -> S:
    """A ``cls`` filled by the library's ``*_init`` function (its ``_sized`` form, given
    our sizeof, so it writes only our bytes), with struct_size set to ours."""
    out = cls()
    getattr(lib(), init_name + "_sized")(ctypes.byref(out), ctypes.sizeof(cls))
    out.struct_size = ctypes.sizeof(cls)
    return out


def library_struct_size(init_name: str) -> int:
    """The library's sizeof of that struct: what its ``*_init_sized`` sets struct_size to
    in a block larger than the struct."""
    scratch = (ctypes.c_uint64 * (_SCRATCH_BYTES // 8))()
    getattr(lib(), init_name + "_sized")(ctypes.cast(scratch, ctypes.c_void_p), _SCRATCH_BYTES)
    return int(ctypes.c_uint32.from_buffer(scratch).value)

