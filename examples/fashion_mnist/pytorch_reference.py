#!/usr/bin/env python3
"""The fashion_mnist example's network trained by single-process PyTorch, as
a reference for twinps's accuracy and speed.

Same data (Debian's dataset-fashion-mnist IDX files, read here directly),
same network (784-256-128-10, ReLU, Glorot-uniform kernels, zero biases),
same loss (softmax cross-entropy), optimizer (Adam, learning rate 0.001,
Keras's epsilon 1e-7), batch (64) and epochs (10) as model.textproto and the
README's command. Run with Debian's interpreter and python3-torch:

    /usr/bin/python3 examples/fashion_mnist/pytorch_reference.py [--epochs N] [--threads N]

Prints per-epoch loss, the training examples/s (the training loop only, as
twinps's progress line counts them) and, last, `test accuracy: X`.
"""
import argparse
import gzip
import os
import struct
import time

import numpy as np
import torch
from torch import nn

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    """An IDX file (the MNIST format), gzipped or not, as a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype, dims = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(split, data_dir):
    def find(kind):
        for name in (f"{split}-{kind}", f"{split}-{kind}.gz"):
            if os.path.exists(os.path.join(data_dir, name)):
                return os.path.join(data_dir, name)
        raise FileNotFoundError(f"{data_dir}/{split}-{kind}[.gz] (apt-get install dataset-fashion-mnist)")
    images = read_idx(find("images-idx3-ubyte")).reshape(-1, 784).astype(np.float32) / 255.0
    labels = read_idx(find("labels-idx1-ubyte")).astype(np.int64)
    return torch.from_numpy(images), torch.from_numpy(labels)


def mlp():
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    for layer in model:
        if isinstance(layer, nn.Linear):  # Keras's Dense defaults
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data", default=DATA)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    x_train, y_train = load("train", args.data)
    x_test, y_test = load("t10k", args.data)
    model = mlp()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()

    examples, seconds = 0, 0.0
    for epoch in range(args.epochs):
        order = torch.randperm(len(x_train))
        total, batches = 0.0, 0
        start = time.perf_counter()
        for i in range(0, len(order), args.batch):
            idx = order[i:i + args.batch]
            optimizer.zero_grad()
            loss = loss_fn(model(x_train[idx]), y_train[idx])
            loss.backward()
            optimizer.step()
            total += loss.item()
            batches += 1
            examples += len(idx)
        seconds += time.perf_counter() - start
        print(f"epoch {epoch}: loss {total / batches:.4f}", flush=True)

    with torch.no_grad():
        accuracy = (model(x_test).argmax(dim=1) == y_test).float().mean().item()
    print(f"training: {examples} examples in {seconds:.1f} s, {examples / seconds:.0f} examples/s "
          f"({args.threads} thread{'s' if args.threads != 1 else ''})")
    print(f"test accuracy: {accuracy:.4f}")


if __name__ == "__main__":
    main()
