"""The examples' learning task: scikit-learn's digits (1797 8x8 images of 0-9, shipped with
Debian's python3-sklearn) with a fixed held-out split, per-peer shards, and a small MLP.

Everything here is deterministic from its seeds, so every peer (and a single-process
baseline) sees the same split and starts from the same weights.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from typing import Iterable, Tuple

import numpy as np
import torch
from torch import nn

FEATURES, CLASSES = 64, 10


def load_digits_arrays() -> Tuple[np.ndarray, np.ndarray]:
    """The digits data as sklearn.datasets.load_digits returns it (pixels 0..16, labels 0..9).

    Reads the CSV that python3-sklearn ships (what load_digits parses) without importing
    sklearn, which pulls in scipy: one second of CPU per peer process saved. Falls back to
    load_digits when that file is not where this sklearn keeps it.
    """
    spec = importlib.util.find_spec("sklearn")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(root, "datasets", "data", "digits.csv.gz")
        if os.path.exists(path):
            data = np.loadtxt(path, delimiter=",")
            return data[:, :-1], data[:, -1].astype(np.int64)
    from sklearn.datasets import load_digits

    return load_digits(return_X_y=True)


class Digits:
    """The train / held-out split (a seeded permutation; 20% held out) on `device`."""

    def __init__(self, device: str = "cpu", test_fraction: float = 0.2, seed: int = 0) -> None:
        x, y = load_digits_arrays()
        inputs = torch.tensor(x / 16.0, dtype=torch.float32)
        labels = torch.tensor(y, dtype=torch.int64)
        order = torch.randperm(len(inputs), generator=torch.Generator().manual_seed(seed))
        n_test = int(len(inputs) * test_fraction)
        self.test_x, self.test_y = inputs[order[:n_test]].to(device), labels[order[:n_test]].to(device)
        self.train_x, self.train_y = inputs[order[n_test:]].to(device), labels[order[n_test:]].to(device)

    def shard(self, index: int, count: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """Training examples index, index+count, index+2*count, ...: disjoint shards."""
        if not 0 <= index < count:
            raise ValueError(f"shard {index} of {count}")
        return self.train_x[index::count], self.train_y[index::count]


class Batches:
    """Endless shuffled mini-batches of (x, y); a new seeded permutation every epoch."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, batch: int, seed: int) -> None:
        self.x, self.y, self.batch = x, y, min(batch, len(x))
        self.generator = torch.Generator().manual_seed(seed)
        self.order = torch.empty(0, dtype=torch.int64)
        self.pos = 0

    def next(self) -> Tuple[torch.Tensor, torch.Tensor]:
        if self.pos + self.batch > len(self.order):
            self.order = torch.randperm(len(self.x), generator=self.generator).to(self.x.device)
            self.pos = 0
        idx = self.order[self.pos:self.pos + self.batch]
        self.pos += self.batch
        return self.x[idx], self.y[idx]


def make_model(hidden: int = 128, seed: int = 0, device: str = "cpu") -> nn.Module:
    """The MLP every peer starts from: same seed, same initial weights everywhere."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(FEATURES, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, CLASSES)).to(device)


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: Tuple[torch.Tensor, torch.Tensor],
               step: bool = True) -> float:
    """Forward, backward and (when `step`) an optimizer step; returns the batch loss."""
    x, y = batch
    optimizer.zero_grad(set_to_none=False)
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    if step:
        optimizer.step()
    return float(loss)


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Tuple[float, float]:
    """(mean cross-entropy, accuracy) on (x, y)."""
    logits = model(x)
    return float(nn.functional.cross_entropy(logits, y)), float((logits.argmax(1) == y).float().mean())


def content_hash(tensors: Iterable[torch.Tensor]) -> str:
    """SHA-256 (16 hex digits) over the tensors' bytes: equal only for bit-identical weights."""
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]
