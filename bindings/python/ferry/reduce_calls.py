"""The all-reduces of :class:`ferry.Communicator` (blocking, async, several with retries) and
the collectives built on them (barrier, broadcast).

Mixed into Communicator (as gather.GatherCalls is): the calls go through its CallGate
(``_gate``), its blocking-call machinery (``_blocking``) and its async issue path
(``_start_async``); Communicator documents the threads, deadlines and Ctrl-C rules.
"""

from __future__ import annotations

import ctypes
from typing import List, Optional, Sequence, TypeVar, Union

from . import _lib
from .dtypes import DType, ReduceOp, parse_op, parse_quant
from .errors import InvalidArgumentError
from .handle import Handle, OpInfo
from .legacy import legacy_call
from .params import uint
from .tensors import plan_allreduce, plan_many

__all__ = ["ReduceCalls", "Op"]

Op = Union[str, ReduceOp]

#: The caller's tensor type (torch.Tensor, numpy.ndarray): the all-reduces return what they were given.
T = TypeVar("T")


class ReduceCalls:
    """The all-reduce calls of :class:`ferry.Communicator` (mixed in)."""

    @legacy_call(positional=("op", "tag", "out", "quant"))
    def all_reduce(self, tensor: T, *, op: Op = "sum", tag: int = 0, out: Optional[T] = None,
                   quant: Optional[str] = None) -> T:
        """Collective: reduces ``tensor`` element-wise over the group and returns the result.

        In place when ``out`` is None: the result is written into ``tensor``'s own
        memory (zero-copy) and ``tensor`` is returned. With ``out`` (same dtype and
        shape) the result goes to ``out``, which is returned, and ``tensor`` is
        only read. Every peer gets bit-identical results.

        Args:
            tensor: a contiguous torch.Tensor (CPU, or CUDA staged through host memory)
                or C-contiguous numpy.ndarray of a supported dtype.
            op: "sum" (the default, as in ferry.h and torch.distributed), "avg" (the sum
                divided by the group's world size: pass it for gradients and DiLoCo
                pseudo-gradients), "prod", "min", "max", any case, or a ReduceOp.
            tag: names the operation; must match on every peer (0..2**64-1).
            out: optional output tensor/array.
            quant: None (full precision, default) or the wire quantization: "u8", "i8",
                "u4" (affine min-max per 256-element block, re-encoded at every hop),
                "f16", "bf16"; or the integer-domain modes "i8h", "i4h" (a scale shared
                per block, integers summed exactly; sum and avg only; error grows as N,
                not N^2; the result does not depend on the ring order) and "i8h-sr",
                "i4h-sr" (the same with unbiased stochastic rounding). Lossy, float
                dtypes only (f16/bf16 wire: f32/f64 data only; else InvalidArgumentError),
                must match on every peer; results stay bit-identical on every peer.
                Error bounds: ferry.h, ``ferry_quant``.

        Blocks until the master commits or aborts (at most timeout to start,
        progress_timeout without progress, 2 x timeout to commit); the GIL is
        released meanwhile. The buffers are borrowed only during the call.
        On failure ``tensor`` (in place) or ``out`` holds unspecified values,
        possibly partial sums; with ``out`` the input is intact and the call can
        be retried as is. Raises InvalidArgumentError, InvalidUsageError (not
        connected, closed), MismatchError, PeerLostError, TimeoutError,
        MasterLostError, KickedError, ProtocolError.
        """
        plan = plan_allreduce(tensor, out)
        desc = _lib.AllreduceDesc.from_buffer_copy(self._desc)
        self._fill_desc(desc, plan.dtype, op, tag, quant)
        info = _lib.OpInfoC.empty()
        plan.wait_copied()  # a CUDA input: ferry's copy to host memory, not the caller's stream
        # The closure holds plan, desc and info: an interrupted call still borrows them.
        self._blocking("all_reduce", lambda ptr: _lib.check(_lib.lib().ferry_allreduce(
            ptr, plan.send_ptr, plan.recv_ptr, plan.count, ctypes.byref(desc), ctypes.byref(info)), "all_reduce"))
        self._local.info = OpInfo.from_c(info)
        return plan.finish()

    def barrier(self) -> None:
        """Collective: returns once every peer of the group has called it.

        Agreed through the master like an all-reduce (all-or-nothing, the same deadlines);
        a peer calling something else here is a MismatchError on every peer. Raises
        InvalidUsageError (not connected, closed), MismatchError, PeerLostError,
        TimeoutError, MasterLostError, KickedError.
        """
        self._blocking("barrier", lambda ptr: _lib.check(_lib.lib().ferry_barrier(ptr), "barrier"))

    @legacy_call(positional=("root",))
    def broadcast(self, tensor: T, *, root: int = 0) -> T:
        """Collective: ``tensor``'s bytes on the peer of rank ``root`` arrive in ``tensor``
        on every peer, bit for bit (in place), and ``tensor`` is returned.

        Every peer passes a tensor of the same size in bytes and the same ``root`` (else
        MismatchError on every peer). It runs as an all-reduce with the same guarantees
        and deadlines (ferry.h, ferry_broadcast); on failure the root's tensor is intact
        and the others' hold unspecified values. ``tensor``: a contiguous torch.Tensor
        (CPU, or CUDA staged through host memory) or C-contiguous, writable numpy.ndarray.
        Raises InvalidArgumentError (root not a rank, a bad tensor), InvalidUsageError,
        MismatchError, PeerLostError, TimeoutError, MasterLostError, KickedError.
        """
        plan = plan_allreduce(tensor)
        root = uint("root", root, 32)
        info = _lib.OpInfoC.empty()
        plan.wait_copied()
        # The closure holds plan and info: an interrupted call still borrows them.
        self._blocking("broadcast", lambda ptr: _lib.check(_lib.lib().ferry_broadcast(
            ptr, plan.recv_ptr, plan.count * plan.dtype.itemsize, root, ctypes.byref(info)), "broadcast"))
        self._local.info = OpInfo.from_c(info)
        return plan.finish()

    @legacy_call(positional=("op", "tag", "out", "quant"))
    def all_reduce_async(self, tensor: T, *, op: Op = "sum", tag: int = 0,
                         out: Optional[T] = None, quant: Optional[str] = None) -> Handle[T]:
        """Issues the all-reduce described for :meth:`all_reduce` (``op`` defaults to "sum")
        and returns at once.

        It progresses on the library's threads; ``handle.wait()`` returns its OpInfo
        (``handle.output`` is the result tensor). The library borrows ``tensor`` and
        ``out`` until the handle is waited: do not touch them before. The handle (and
        the communicator, until then) keeps them alive. Issue async ops in the same
        order on every peer. update_topology() is refused while ops are in flight.
        Raises at once only InvalidArgumentError, InvalidUsageError, MasterLostError,
        KickedError; everything else is raised by ``wait()``.

        CUDA tensors: returns without waiting for the device. ferry copies the input on its
        own stream after the work already enqueued on the caller's current stream, and its
        issue thread issues the C op once the copy has landed (errors of that issue,
        including those listed above, are then raised by ``wait()``); ``wait()`` makes the
        caller's current stream wait for the result's copy back. See ferry.cuda_stage.
        """
        plan = plan_allreduce(tensor, out)
        desc = _lib.AllreduceDesc.from_buffer_copy(self._desc)
        self._fill_desc(desc, plan.dtype, op, tag, quant)
        return self._start_async("all_reduce_async", plan, lambda ptr, op_ptr: _lib.lib().ferry_allreduce_async(
            ptr, plan.send_ptr, plan.recv_ptr, plan.count, ctypes.byref(desc), ctypes.byref(op_ptr)),
            watch=plan.on_device)

    @legacy_call(positional=("op", "tag", "outs", "max_in_flight", "quant"))
    def all_reduce_many(self, tensors: Sequence[T], *, op: Op = "sum", tag: int = 0,
                        outs: Optional[Sequence[Optional[T]]] = None, max_in_flight: int = 4,
                        quant: Optional[str] = None) -> List[T]:
        """Collective: all-reduces several tensors (``op`` as for :meth:`all_reduce`, default
        "sum"), retrying through peer failures.

        Wraps ``ferry_allreduce_multiple_with_retry``: the jobs are issued in list
        order with at most ``max_in_flight`` in flight (0 means 4); job ``i`` has tag
        ``tag + i``. When a peer is lost or a transfer times out (PeerLostError /
        TimeoutError), every surviving peer stops, votes a new topology together
        (update_topology) and issues the unfinished jobs again in the new world, until
        all succeed. It gives up with PeerLostError when the group shrinks below two
        peers or after 16 rounds; any other error (MismatchError, MasterLostError, ...)
        is raised at once. In-place tensors are copied aside by the library and
        restored before each retry, so results are always those of one clean world
        (memory: one extra copy of each in-place tensor). ``last_info`` sums bytes and
        time over every attempt; its world_size is the final world.

        Call it as a unit on every peer, with the same tensors in the same order, and
        no async ops in flight (InvalidUsageError). Blocks for as long as the
        operations and votes take, each under the communicator's deadlines (GIL
        released). Returns the output tensors (``tensors`` themselves, or ``outs``).
        """
        plans = plan_many(tensors, outs)
        max_in_flight = uint("max_in_flight", max_in_flight, 32)
        uint("tag", tag, 64)
        if len(plans) and tag + len(plans) - 1 >= 1 << 64:
            raise InvalidArgumentError("tag + len(tensors) - 1 overflows 64 bits")
        jobs = (_lib.AllreduceJob * len(plans))()
        for i, plan in enumerate(plans):
            job = jobs[i]
            ctypes.memmove(ctypes.addressof(job), ctypes.addressof(self._job), ctypes.sizeof(job))
            job.send, job.recv, job.count = plan.send_ptr, plan.recv_ptr, plan.count
            self._fill_desc(job.desc, plan.dtype, op, tag + i, quant)
        info = _lib.OpInfoC.empty()
        for plan in plans:
            plan.wait_copied()
        # The closure holds jobs, plans and info: an interrupted call still borrows them.
        self._blocking("all_reduce_many", lambda ptr: _lib.check(_lib.lib().ferry_allreduce_multiple_with_retry(
            ptr, jobs, len(plans), max_in_flight, ctypes.byref(info)), "all_reduce_many"))
        self._local.info = OpInfo.from_c(info)
        return [plan.finish() for plan in plans]

    def _fill_desc(self, desc: _lib.AllreduceDesc, dtype: DType, op: Op, tag: int,
                   quant: Optional[str]) -> None:
        desc.dtype = int(dtype)
        desc.op = int(parse_op(op))
        desc.tag = uint("tag", tag, 64)
        desc.quant = parse_quant(quant)
        desc.quant_block = 0  # the library's default block (256 elements)
