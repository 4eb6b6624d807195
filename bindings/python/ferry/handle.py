"""Results of collectives: :class:`OpInfo`, and :class:`Handle` for an all-reduce in flight."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from . import _lib
from .cuda_stage import publish

if TYPE_CHECKING:
    from .async_op import AsyncOp

__all__ = ["OpInfo", "Handle"]

#: The type of the tensor the all-reduce writes (Handle.output).
T = TypeVar("T")


@dataclass(frozen=True)
class OpInfo:
    """What a finished collective did (``ferry_op_info``).

    Attributes:
        world_size: peers the operation ran with (for all_reduce_many: the final world).
        bytes_sent: payload bytes this peer put on the wire.
        bytes_received: payload bytes this peer received.
        duration_s: seconds from the call to the master's commit.
        start_s: of those, waiting for the master's go (at most timeout).
        longest_stall_s: the longest stretch of the transfer without progress
            (at most progress_timeout).
        commit_s: from this peer's end to the master's verdict (at most 2 x timeout).
        quant_agreement_s: the integer-domain quantizations (i8h, i4h, ...): from the
            master's go to the first chunk's agreed scales, before which the ring cannot
            start (later chunks agree while earlier ones move); else 0.
        For all_reduce_many these phases are the longest any operation had.
    """

    world_size: int
    bytes_sent: int
    bytes_received: int
    duration_s: float
    start_s: float = 0.0
    longest_stall_s: float = 0.0
    commit_s: float = 0.0
    quant_agreement_s: float = 0.0

    @classmethod
    def from_c(cls, info: _lib.OpInfoC) -> "OpInfo":
        return cls(int(info.world_size), int(info.bytes_sent), int(info.bytes_received), float(info.duration_s),
                   float(info.start_s), float(info.longest_stall_s), float(info.commit_s),
                   float(info.quant_agreement_s))


class Handle(Generic[T]):
    """An all-reduce in flight, from :meth:`Communicator.all_reduce_async` (or an all-gather,
    from :meth:`Communicator.all_gather_async`: ``output`` is then the list of parts, filled
    when :meth:`wait` returns without raising).

    The handle keeps the input and output tensors (and any staging copies)
    alive until the operation has been waited: do not read or write them
    before :meth:`wait` returns. Handles may be waited in any order, from
    any thread. The C op is released by the first :meth:`wait`; later calls
    (from any thread) return the same :class:`OpInfo` or raise the same
    exception. The communicator also holds every unwaited operation, so
    dropping a handle never frees memory the library still writes; closing
    the communicator settles the operations still unwaited (see Communicator.close).

    CUDA tensors: the C op is issued by the communicator's issue thread once ferry's
    copy of the input has reached host memory (see ferry.issue_queue); until then the
    handle is not done. The result's copy back is enqueued on ferry's stream as soon as
    the op finishes (ferry.completion_watch); :meth:`wait` makes the calling thread's
    current CUDA stream wait for it (an event); it does not block the host on the
    device, so work the caller enqueues after wait() sees the result.
    """

    def __init__(self, op: "AsyncOp") -> None:
        self._op = op  # the op's state, shared with the communicator's CallGate until settled

    @property
    def output(self) -> T:
        """The tensor that receives the result (the input itself when ``out`` was None).
        Valid to read only after :meth:`wait` returned without raising."""
        return self._op.result

    def done(self) -> bool:
        """Non-blocking: True once the operation finished, i.e. :meth:`wait` will not block.
        (A staged CUDA result becomes visible to the caller's stream only by wait().) Any thread."""
        return self._op.done()

    def wait(self) -> OpInfo:
        """Blocks until the operation finishes and returns its :class:`OpInfo`.

        Blocks at most the communicator's deadlines (timeout to start, 2 x
        timeout to commit, progress_timeout without progress); the GIL is released while
        it waits. Raises the operation's error (e.g. PeerLostError, MismatchError);
        on failure the output holds unspecified values, and the input (when
        ``out`` was given) is intact. Any thread; repeated calls return the
        cached result or raise the cached error. A wait in progress holds off
        Communicator.close() until it returns; an op still in flight when the
        communicator is closed raises InvalidUsageError. On the main thread Ctrl-C raises
        KeyboardInterrupt at once and closes the communicator (see Communicator, "Ctrl-C").
        """
        op = self._op
        op.wait()
        if op.error is not None:
            raise op.error
        assert op.info is not None
        publish(op.copied_back)  # this thread's current stream waits for the copy back
        return op.info

    def __repr__(self) -> str:
        if self._op.finished.is_set():
            state = "failed" if self._op.error is not None else "done"
        else:
            state = "in flight"
        return f"<ferry.Handle {state}>"
