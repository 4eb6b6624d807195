#!/usr/bin/env python3
"""Does an outer all-reduce of GPU parameters slow a training loop? (issue 41's targets)

Starts a ferry master (Python API) and --peers peer processes on loopback, all on this
machine's GPU. Each peer runs a bf16 matmul-heavy training step of about --step-ms and:

  1. alone: --steps training steps, no communication;
  2. overlapped: the same steps while f32 parameters of --size elements (on the GPU) are
     all-reduced beside them, as DiLoCo's overlapped outer step does: issued with
     all_reduce_async at a sync point every --sync-every steps and waited (Handle.wait(): the
     training stream waits on the copy back's event, the host does not) at the next one;
  3. sync staging: the same, staged the way ferry did before (a synchronous .cpu() copy on the
     training stream, and a synchronous copy back), for comparison;
  4. all-reduce time of the parameters as CUDA tensors vs as host tensors (blocking, median
     of --repeats).

Prints one JSON object on stdout: step times (median ms per step, each mode), the overlap's
slowdown (target: within 5 %), and the GPU/host all-reduce ratio (target: within 1.1x).

    FERRY_LIBRARY=.../libferry.so python3 tools/gpu/train-overlap.py            # 1 B parameters
    FERRY_LIBRARY=.../libferry.so python3 tools/gpu/train-overlap.py --size 10000000 --steps 40

Needs torch with CUDA and ferry's Python package (bindings/python, found next to this file).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bindings" / "python"))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=1_000_000_000, help="f32 parameters all-reduced (default 1e9)")
    p.add_argument("--peers", type=int, default=2)
    p.add_argument("--step-ms", type=float, default=50.0, help="target training step time (calibrated)")
    p.add_argument("--steps", type=int, default=200, help="training steps per timed mode")
    p.add_argument("--sync-every", type=int, default=100, help="steps between outer sync points")
    p.add_argument("--repeats", type=int, default=3, help="blocking all-reduces timed per kind")
    p.add_argument("--io-threads", type=int, default=4)
    p.add_argument("--matrix", type=int, default=8192, help="side of the bf16 matmuls of a step")
    p.add_argument("--skip-sync-staging", action="store_true", help="skip mode 3 (the old staging)")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                   help="cpu: the same run without a GPU, to check the script itself")
    p.add_argument("--timeout", type=float, default=170.0, help="seconds before the peers are killed")
    p.add_argument("--role", default="launcher", help=argparse.SUPPRESS)
    p.add_argument("--master", help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ------------------------------------------------------------------ one peer


def sync_of(torch, device: str):
    """Waits for the work enqueued on the current stream (nothing to wait for on the CPU)."""
    return (lambda: torch.cuda.current_stream().synchronize()) if device == "cuda" else (lambda: None)


class Step:
    """A bf16 matmul chain of about step_ms, calibrated on this GPU."""

    def __init__(self, torch, device: str, side: int, step_ms: float) -> None:
        self.sync = sync_of(torch, device)
        # x @ b keeps x's scale (b's columns have norm ~1): no overflow, no denormals.
        self.a = torch.randn(side, side, device=device, dtype=torch.bfloat16)
        self.b = torch.randn(side, side, device=device, dtype=torch.bfloat16) / side ** 0.5
        self.matmuls = 4
        for _ in range(2):  # the second pass measures with the first's estimate
            began = time.monotonic()
            for _ in range(3):
                self.run()
            per = (time.monotonic() - began) / 3
            self.matmuls = max(1, round(self.matmuls * step_ms / 1e3 / per))

    def run(self) -> None:
        """One step, ending in a host sync as a loop reading its loss does."""
        x = self.a
        for _ in range(self.matmuls):
            x = x @ self.b
        self.sync()


def timed_steps(step: Step, steps: int, at_sync_point=None) -> list:
    """Per-step wall times (s); at_sync_point(k) runs before step k when k % sync_every == 0."""
    times = []
    for k in range(steps):
        began = time.monotonic()
        if at_sync_point is not None:
            at_sync_point(k)
        step.run()
        times.append(time.monotonic() - began)
    return times


def peer(args) -> None:
    import torch

    import ferry

    comm = ferry.Communicator(args.master, listen_host="127.0.0.1", io_threads=args.io_threads,
                              timeout=120, progress_timeout=60)
    comm.connect()
    comm.wait_for_world(args.peers, timeout=120)
    comm.barrier()
    step = Step(torch, args.device, args.matrix, args.step_ms)
    sync = step.sync  # calibrated while every peer shares the GPU
    params = torch.randn(args.size, device=args.device) * 1e-3
    host = params.cpu()
    ferry.set_pinned_pool_limit(max(8 << 30, 2 * params.numel() * params.element_size()))
    comm.all_reduce(params, op="avg")  # warm-up: ferry's stream, the pinned buffer pooled
    comm.all_reduce(host, op="avg")
    sync()
    result = {"rank": comm.rank, "matmuls_per_step": step.matmuls}

    comm.barrier()
    result["alone_s"] = timed_steps(step, args.steps)

    def overlapped(issue, settle):
        pending = []
        reduces = [0]

        def at_sync_point(k):
            if k % args.sync_every:
                return
            if pending:
                settle(pending.pop())
                reduces[0] += 1
            pending.append(issue())

        comm.barrier()
        times = timed_steps(step, args.steps, at_sync_point)
        if pending:
            settle(pending.pop())
            reduces[0] += 1
        sync()
        return times, reduces[0]

    # ferry's staging: the copy on ferry's stream, the stream (not the host) waits for the copy back.
    result["overlap_s"], result["overlap_reduces"] = overlapped(
        lambda: comm.all_reduce_async(params, op="avg"), lambda handle: handle.wait())

    if not args.skip_sync_staging:
        def issue_sync():
            staged = params.cpu()  # what HostView did: pageable, on the training stream, host waits
            return staged, comm.all_reduce_async(staged, op="avg")

        def settle_sync(pending):
            staged, handle = pending
            handle.wait()
            params.copy_(staged)  # synchronous copy back from pageable memory

        result["sync_staging_s"], _ = overlapped(issue_sync, settle_sync)

    gpu, cpu = [], []
    for _ in range(args.repeats):  # alternated, so that drift hits both alike
        comm.barrier()
        began = time.monotonic()
        comm.all_reduce(params, op="avg")
        sync()
        gpu.append(time.monotonic() - began)
        comm.barrier()
        began = time.monotonic()
        comm.all_reduce(host, op="avg")
        cpu.append(time.monotonic() - began)
    result["allreduce_gpu_s"], result["allreduce_host_s"] = gpu, cpu
    comm.barrier()
    comm.close()
    print(json.dumps(result), flush=True)


# ------------------------------------------------------------------ the launcher


def summary(args, peers: list) -> dict:
    def median_ms(key):
        return statistics.median(t for p in peers for t in p[key]) * 1e3

    out = {"size": args.size, "peers": args.peers, "steps": args.steps, "sync_every": args.sync_every,
           "matmuls_per_step": [p["matmuls_per_step"] for p in peers]}
    out["step_ms_alone"] = median_ms("alone_s")
    out["step_ms_overlap"] = median_ms("overlap_s")
    # Mean per-step time too: a stall at a sync point is one step in sync_every, the median hides it.
    out["mean_step_ms_alone"] = statistics.mean(t for p in peers for t in p["alone_s"]) * 1e3
    out["mean_step_ms_overlap"] = statistics.mean(t for p in peers for t in p["overlap_s"]) * 1e3
    out["overlap_slowdown"] = out["mean_step_ms_overlap"] / out["mean_step_ms_alone"] - 1
    out["overlap_reduces"] = min(p["overlap_reduces"] for p in peers)
    if "sync_staging_s" in peers[0]:
        out["mean_step_ms_sync_staging"] = statistics.mean(t for p in peers for t in p["sync_staging_s"]) * 1e3
        out["sync_staging_slowdown"] = out["mean_step_ms_sync_staging"] / out["mean_step_ms_alone"] - 1
    out["allreduce_s_gpu"] = statistics.median(max(p["allreduce_gpu_s"][i] for p in peers)
                                               for i in range(args.repeats))
    out["allreduce_s_host"] = statistics.median(max(p["allreduce_host_s"][i] for p in peers)
                                                for i in range(args.repeats))
    out["gpu_vs_host"] = out["allreduce_s_gpu"] / out["allreduce_s_host"]
    out["targets"] = {"overlap_within_5pct": out["overlap_slowdown"] <= 0.05,
                      "gpu_within_1.1x_host": out["gpu_vs_host"] <= 1.1}
    return out


def launch(args) -> int:
    import ferry

    master = ferry.Master("127.0.0.1:0")
    master.start()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "bindings" / "python"),
                                                        os.environ.get("PYTHONPATH", "")]))
    forwarded = [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items()
                 if k not in ("role", "master", "skip_sync_staging")]
    if args.skip_sync_staging:
        forwarded.append("--skip-sync-staging")
    procs = [subprocess.Popen([sys.executable, __file__, "--role=peer", f"--master=127.0.0.1:{master.port}",
                               *forwarded], stdout=subprocess.PIPE, env=env, text=True)
             for _ in range(args.peers)]
    peers, failed = [], False
    deadline = time.monotonic() + args.timeout
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        if proc.returncode != 0 or not out.strip():
            failed = True
            continue
        peers.append(json.loads(out.strip().splitlines()[-1]))
    master.close()
    if failed:
        print(json.dumps({"error": "a peer failed (its stderr is above)", "peers": peers}))
        return 1
    print(json.dumps(summary(args, peers), indent=1))
    return 0


def main() -> int:
    args = parse_args()
    if args.role == "peer":
        peer(args)
        return 0
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
