#!/usr/bin/python3
"""Trains a small MLP on scikit-learn's digits and writes its parameters as raw
files, the realistic content for `ferry-bench --workload sync --state-file`.

  trained_weights.py OUT_DIR [--hidden 4096] [--epochs 15]

Writes OUT_DIR/mlp_f32.bin (every parameter, state_dict order, float32 little
endian) and OUT_DIR/mlp_bf16.bin (the same values rounded to bfloat16), and
prints the test accuracy. Needs torch and scikit-learn (Debian: python3-torch,
python3-sklearn). The default 64-4096-4096-10 MLP has 17.1 M parameters
(68 MB f32, 34 MB bf16): large enough to sync 64 MiB / 32 MiB of real weights
without repeating any byte.
"""
import argparse
import os

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--epochs", type=int, default=15)
    args = parser.parse_args()

    torch.manual_seed(0)
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, args.hidden), torch.nn.ReLU(),
        torch.nn.Linear(args.hidden, args.hidden), torch.nn.ReLU(),
        torch.nn.Linear(args.hidden, 10))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    for epoch in range(args.epochs):
        order = torch.randperm(len(x_train))
        for start in range(0, len(order), 64):
            batch = order[start:start + 64]
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x_train[batch]), y_train[batch])
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
        print(f"epoch {epoch + 1}: loss {loss.item():.4f}, test accuracy {accuracy:.4f}", flush=True)

    params = [p.detach().reshape(-1) for p in model.state_dict().values()]
    flat = torch.cat(params)
    os.makedirs(args.out_dir, exist_ok=True)
    flat.numpy().astype("<f4").tofile(os.path.join(args.out_dir, "mlp_f32.bin"))
    flat.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tofile(os.path.join(args.out_dir, "mlp_bf16.bin"))
    print(f"{flat.numel()} parameters, mean {flat.mean().item():.5f}, std {flat.std().item():.5f}; "
          f"wrote mlp_f32.bin and mlp_bf16.bin to {args.out_dir}")


if __name__ == "__main__":
    main()
