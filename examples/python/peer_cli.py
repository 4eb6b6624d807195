"""What the DiLoCo example peers share outside the algorithm: the command line, the task
setup (data shard, model, inner optimizer), the communicator, and the per-step report."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Any, Dict, Optional

import torch

import ferry
from task import TASKS, Batches, evaluate, load_task


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--master", help="HOST:PORT of the ferry master (not needed for --mode single/local)")
    p.add_argument("--name", default=f"peer-{os.getpid()}", help="prefix of this peer's output lines")
    p.add_argument("--shard", type=int, default=0, help="which training shard this peer trains on")
    p.add_argument("--num-shards", type=int, default=1, help="how many shards the training set is cut into")
    p.add_argument("--task", choices=sorted(TASKS), default="digits",
                   help="what to learn (see task.py): real but small digits, or the data-rich synthetic teacher")
    p.add_argument("--outer-steps", type=int, default=10, help="outer steps (T)")
    p.add_argument("--inner-steps", type=int, default=50, help="inner AdamW steps per outer step (H)")
    p.add_argument("--batch", type=int, default=32, help="per-peer mini-batch")
    p.add_argument("--inner-lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.01, help="AdamW's")
    p.add_argument("--outer-lr", type=float, help="the outer SGD's (default: ferry.diloco's, 0.7; SparseLoCo 7)")
    p.add_argument("--outer-momentum", type=float,
                   help="Nesterov momentum of the outer SGD (default: the task's; DiLoCo's usual 0.9 suits "
                        "text; on digits' 24 outer steps it overshoots: held-out loss 1.26 against 0.10 at 0.5, "
                        "measured)")
    p.add_argument("--quant", choices=ferry.QUANT_NAMES,
                   help="wire quantization of the pseudo-gradient all-reduce (default: full f32)")
    p.add_argument("--sparse", metavar="default|DENSITY:BITS[:CHUNK[:DECAY]]", type=sparse_option,
                   help="SparseLoCo instead of the dense all-reduce: each chunk's top DENSITY (e.g. 0.021) at BITS "
                        "bits (2, 4, 8), chunks of at most CHUNK (32768), error feedback decay DECAY (0.7); no outer "
                        "momentum; 'default': ferry.diloco.SparseLoCo()'s")
    p.add_argument("--min-peers", type=int, default=1, help="wait for this many peers before the first step")
    p.add_argument("--hidden", type=int, default=128, help="MLP width")
    p.add_argument("--seed", type=int, default=0,
                   help="model initialisation (the same on every peer) and the order of each shard's batches")
    p.add_argument("--device", default="cpu", help="cpu or cuda (ferry stages CUDA tensors through host memory)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--listen-host", default="::", help="address of this peer's p2p listener (:: takes IPv6 and IPv4)")
    p.add_argument("--timeout", type=float, help="ferry's timeout in seconds (waiting for other peers)")
    p.add_argument("--heartbeat-timeout", type=float, help="ferry's heartbeat_timeout in seconds")
    p.add_argument("--pace", type=float, default=0.0,
                   help="spend at least this many seconds per outer step (sleeping the rest): emulates slower "
                        "compute, so that joins and kills land mid-run in demos and tests")
    p.add_argument("--inner-time", type=float,
                   help="time-boxed DiLoCo: seconds per inner phase; every peer runs the steps that fit, at most "
                        "--inner-steps, weighted by them (a slow GPU adds fewer steps instead of holding the others "
                        "back; when none is slow, every peer runs --inner-steps: plain DiLoCo)")
    p.add_argument("--no-step-cap", action="store_true",
                   help="with --inner-time: no cap of --inner-steps per phase (the pure time box)")
    p.add_argument("--step-time", type=float, default=0.0,
                   help="spend at least this many seconds per inner step (sleeping the rest): a GPU of that speed "
                        "(tools/diloco-bench gives one peer a multiple of it: a slower GPU)")
    p.add_argument("--curve", action="store_true",
                   help="keep theta after every outer step with its time since the join, and put their held-out "
                        "losses in --result as 'curve' ([seconds, loss] pairs; evaluated after the run)")
    p.add_argument("--join-when-exists", metavar="PATH",
                   help="connect only once PATH exists (a demo or test starts a late joiner ahead, warm)")
    p.add_argument("--result", help="write a JSON summary here at the end")
    p.add_argument("--quiet", action="store_true", help="print only the final line")
    return p


def sparse_option(text: str):
    """--sparse default|DENSITY:BITS[:CHUNK[:DECAY]] as ferry.diloco.SparseLoCo options."""
    from ferry.diloco import SparseLoCo

    if text == "default":
        return SparseLoCo()
    fields = text.split(":")
    if not 2 <= len(fields) <= 4:
        raise argparse.ArgumentTypeError(f"--sparse wants DENSITY:BITS[:CHUNK[:DECAY]], got {text!r}")
    try:
        options = dict(density=float(fields[0]), bits=int(fields[1]))
        if len(fields) > 2:
            options["chunk"] = int(fields[2])
        if len(fields) > 3:
            options["decay"] = float(fields[3])
        return SparseLoCo(**options)
    except (ValueError, ferry.InvalidArgumentError) as e:
        raise argparse.ArgumentTypeError(f"--sparse {text}: {e}")


class Peer:
    """The task as one peer sees it: its shard's batches, the model, AdamW, the held-out set."""

    def __init__(self, args: argparse.Namespace, whole_training_set: bool = False) -> None:
        """whole_training_set: train on every shard at once, with --num-shards times the batch
        (the single-process baseline for --num-shards peers)."""
        torch.set_num_threads(args.threads)
        self.args = args
        self.data = load_task(args.task, args.device)
        if args.outer_momentum is None and not getattr(args, "sparse", None):
            args.outer_momentum = self.data.outer_momentum  # SparseLoCo has none
        if whole_training_set:
            self.batches = Batches(self.data.train_x, self.data.train_y, args.batch * args.num_shards,
                                   seed=1000 + 100 * args.seed)
        else:
            x, y = self.data.shard(args.shard, args.num_shards)
            self.batches = Batches(x, y, args.batch, seed=1000 + 100 * args.seed + args.shard)
        self.model = self.data.make_model(args.hidden, args.seed, args.device)
        self.params = list(self.model.parameters())
        self.optimizer = torch.optim.AdamW(self.params, lr=args.inner_lr, weight_decay=args.weight_decay)
        self.started = time.monotonic()
        self.step_times: list = []
        self.last_step = time.monotonic()

    def communicator(self) -> ferry.Communicator:
        if not self.args.master:
            sys.exit(f"{self.args.name}: --master HOST:PORT is required")
        while self.args.join_when_exists and not os.path.exists(self.args.join_when_exists):
            time.sleep(0.05)
        return ferry.Communicator(self.args.master, listen_host=self.args.listen_host, timeout=self.args.timeout,
                                  heartbeat_timeout=self.args.heartbeat_timeout)

    def log_membership(self) -> None:
        """ferry's membership events (the "ferry.diloco" and "ferry.elastic" loggers, INFO and up)
        printed as this peer's own lines."""
        peer = self

        class Lines(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                peer.log(record.getMessage())

        events = logging.getLogger("ferry")
        events.setLevel(logging.INFO)
        events.addHandler(Lines())

    def log(self, message: str, always: bool = False) -> None:
        if always or not self.args.quiet:
            # One write per line: peers sharing a terminal or pipe never split each other's lines.
            sys.stdout.write(f"[{self.args.name}] {message}\n")
            sys.stdout.flush()

    def report(self, step: int, train_loss: float, model: Optional[torch.nn.Module], world: int,
               bytes_sent: int, note: str = "") -> None:
        """One line per outer step: step, loss (training; held-out of `model`), world, bytes sent,
        and `note` (DiLoCo's: this peer's inner steps and its share of the update)."""
        time.sleep(max(0.0, self.args.pace - (time.monotonic() - self.last_step)))
        self.step_times.append(time.monotonic() - self.last_step)
        held = ""
        if model is not None:
            loss, acc = evaluate(model, self.data.test_x, self.data.test_y)
            held = f" held-out {loss:.4f} acc {acc:.3f} |"
        # The step times leave the evaluation out: modes that evaluate every step
        # (local) and those that do not (async) must be timed alike.
        self.last_step = time.monotonic()
        self.log(f"step {step:3d} | loss {train_loss:.4f} |{held} world {world} | sent {bytes_sent / 1e3:9.1f} kB{note}")

    def finish(self, model: torch.nn.Module, weights_hash: str, bytes_sent: int, **extra: Any) -> Dict[str, Any]:
        """Held-out loss/accuracy of the final model, printed and (with --result) written as JSON."""
        loss, acc = evaluate(model, self.data.test_x, self.data.test_y)
        steady = self.step_times[1:] or self.step_times
        summary = dict(name=self.args.name, task=self.args.task, loss_floor=self.data.floor, eval_loss=loss,
                       eval_acc=acc, weights_hash=weights_hash,
                       bytes_sent=bytes_sent, wall_s=time.monotonic() - self.started,
                       s_per_step=sum(steady) / max(1, len(steady)), **extra)
        self.log(f"final | held-out loss {loss:.4f} acc {acc:.3f} | sent {bytes_sent / 1e3:.1f} kB | "
                 f"weights {weights_hash}", always=True)
        if self.args.result:
            with open(self.args.result, "w") as f:
                json.dump(summary, f)
        return summary
