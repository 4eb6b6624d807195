"""The examples' learning tasks, per-peer shards, and the small MLP every peer trains.

  digits   scikit-learn's digits (1797 real 8x8 images of 0-9, shipped with Debian's
           python3-sklearn), 20% held out. Small: a run of the default length shows each
           peer its shard ~100 times, so it measures how methods overfit, not how they scale.
  teacher  synthetic but data-rich: 64 Gaussian features, labels drawn from the softmax of a
           fixed random network (the teacher), 160k training examples (a default run sees
           each about once) and 10k held out. Its held-out loss cannot go below the labels'
           entropy (`floor`), as a language model's cannot go below the text's.
  text     a character-level language model of real English: the ~14,700 fortunes (2.4 MB:
           quotations, poems, jokes) that Debian's `fortunes` package ships, 10% of them held
           out. Data-rich like teacher (a default run sees each character about once) and real
           like digits; the model reads 16 characters and predicts the next.

Everything here is deterministic from its seeds, so every peer (and a single-process
baseline) sees the same data and starts from the same weights.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import re
from typing import Iterable, Optional, Tuple

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


class Split:
    """A training set (cut into per-peer shards) and a held-out set, on one device."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    floor: Optional[float] = None  # the lowest held-out loss any model can reach, when known
    # The outer Nesterov momentum DiLoCo runs best with here (measured against every-step all-reduce).
    outer_momentum = 0.5

    def make_model(self, hidden: int = 128, seed: int = 0, device: str = "cpu") -> nn.Module:
        """The MLP every peer starts from: same seed, same initial weights everywhere."""
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(FEATURES, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                             nn.Linear(hidden, CLASSES)).to(device)

    def shard(self, index: int, count: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """Training examples index, index+count, index+2*count, ...: disjoint shards."""
        if not 0 <= index < count:
            raise ValueError(f"shard {index} of {count}")
        return self.train_x[index::count], self.train_y[index::count]


class Digits(Split):
    """The train / held-out split (a seeded permutation; 20% held out) on `device`."""

    def __init__(self, device: str = "cpu", test_fraction: float = 0.2, seed: int = 0) -> None:
        x, y = load_digits_arrays()
        inputs = torch.tensor(x / 16.0, dtype=torch.float32)
        labels = torch.tensor(y, dtype=torch.int64)
        order = torch.randperm(len(inputs), generator=torch.Generator().manual_seed(seed))
        n_test = int(len(inputs) * test_fraction)
        self.test_x, self.test_y = inputs[order[:n_test]].to(device), labels[order[:n_test]].to(device)
        self.train_x, self.train_y = inputs[order[n_test:]].to(device), labels[order[n_test:]].to(device)


class Teacher(Split):
    """Labels sampled from a fixed random tanh network's softmax (sharpness 3: the floor is
    about 1.39 nats of the 2.30 of a uniform guess). Generated on the CPU from seeds, so
    every peer and device gets the same examples."""

    def __init__(self, device: str = "cpu", train: int = 160_000, test: int = 10_000, seed: int = 123) -> None:
        generator = torch.Generator().manual_seed(seed)
        teacher = nn.Sequential(nn.Linear(FEATURES, 256), nn.Tanh(), nn.Linear(256, CLASSES))
        with torch.no_grad():
            for p in teacher.parameters():
                scale = 1.0 / math.sqrt(p.shape[-1]) if p.dim() > 1 else 0.1
                p.copy_(torch.randn(p.shape, generator=generator) * scale)

        def sample(n: int) -> Tuple[torch.Tensor, torch.Tensor, float]:
            x = torch.randn(n, FEATURES, generator=generator)
            with torch.no_grad():
                probs = torch.softmax(teacher(x) * 3.0, dim=1)
            y = torch.multinomial(probs, 1, generator=generator).squeeze(1)
            entropy = float(-(probs * probs.clamp_min(1e-12).log()).sum(1).mean())
            return x.to(device), y.to(device), entropy

        self.test_x, self.test_y, self.floor = sample(test)
        self.train_x, self.train_y, _ = sample(train)


FORTUNES = "/usr/share/games/fortunes"
PICTURES = {"art", "ascii-art"}  # fortune files of drawings, not language


class Text(Split):
    """Next-character prediction on Debian's fortunes: x = CONTEXT characters, y = the next.

    The training windows are a strided view of one tensor of character codes (no copy per
    window); the held-out set is a seeded sample of EVAL_WINDOWS windows of the held-out
    fortunes, so an evaluation costs what a few training steps do."""

    CONTEXT, EMBED, EVAL_WINDOWS = 16, 16, 16_384
    # 12 x 100 steps, 4 peers, held-out loss against every-step all-reduce: +0.7% at 0.9, +3.1% at 0.5.
    outer_momentum = 0.9
    # Printable ASCII and the newline; tabs become spaces, anything else is dropped.
    ALPHABET = "\n" + "".join(chr(c) for c in range(32, 127))

    def __init__(self, device: str = "cpu", test_fraction: float = 0.1, seed: int = 0,
                 root: str = FORTUNES) -> None:
        fortunes = self.read_fortunes(root)
        order = np.random.default_rng(seed).permutation(len(fortunes))
        n_test = int(len(fortunes) * test_fraction)
        test = self.encode("".join(fortunes[i] for i in order[:n_test]))
        train = self.encode("".join(fortunes[i] for i in order[n_test:]))
        self.train_x, self.train_y = self.windows(train.to(device))
        test_x, test_y = self.windows(test)
        pick = torch.randperm(len(test_y), generator=torch.Generator().manual_seed(seed))[:self.EVAL_WINDOWS]
        self.test_x, self.test_y = test_x[pick].to(device), test_y[pick].to(device)

    @staticmethod
    def read_fortunes(root: str) -> list:
        if not os.path.isdir(root):
            raise SystemExit(f"task text: {root} is missing (apt-get install fortunes)")
        fortunes = []
        for name in sorted(os.listdir(root)):
            if "." in name or name in PICTURES:  # .dat indexes, .u8 duplicates
                continue
            with open(os.path.join(root, name), encoding="latin-1") as f:
                raw = re.sub(".\x08", "", f.read())  # overstruck (underlined) letters keep the letter
            fortunes += [part.strip("\n") + "\n\n" for part in re.split(r"^%\n", raw, flags=re.M) if part.strip()]
        return fortunes

    @classmethod
    def encode(cls, text: str) -> torch.Tensor:
        index = {c: i for i, c in enumerate(cls.ALPHABET)}
        codes = [index[c] for c in text.replace("\t", " ") if c in index]
        return torch.tensor(codes, dtype=torch.int64)

    @classmethod
    def windows(cls, codes: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return codes.unfold(0, cls.CONTEXT, 1)[:-1], codes[cls.CONTEXT:]

    def make_model(self, hidden: int = 128, seed: int = 0, device: str = "cpu") -> nn.Module:
        """Embedded characters, concatenated, through the same two-hidden-layer MLP."""
        torch.manual_seed(seed)
        symbols = len(self.ALPHABET)
        return nn.Sequential(nn.Embedding(symbols, self.EMBED), nn.Flatten(),
                             nn.Linear(self.CONTEXT * self.EMBED, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                             nn.ReLU(), nn.Linear(hidden, symbols)).to(device)


TASKS = {"digits": Digits, "teacher": Teacher, "text": Text}


def load_task(name: str, device: str = "cpu") -> Split:
    """The task called `name` (see TASKS) on `device`."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r} (one of {', '.join(TASKS)})")
    return TASKS[name](device)


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
