#!/usr/bin/env python3
"""The sparse-embedding benchmark's model trained by single-process PyTorch,
as a reference for twinps's examples/s on this machine.

Same model as model.textproto: a 1,000,000 x 64 embedding (sparse gradients)
looked up by one uniformly drawn id per example, a 64 -> 1 linear layer, a
logistic loss, plain SGD at 0.05, batch 512. The ids and labels are drawn
here in memory (numpy) rather than read from the TFRecord files twinps reads,
so this reference pays nothing for input and holds every parameter in its
own process: it is the speed of the arithmetic alone, with no parameter
server, no network and no data reading. Run with Debian's interpreter and
python3-torch:

    /usr/bin/python3 examples/sparse_embedding/pytorch_reference.py [--steps N] [--threads N]

Prints the training examples/s (the training loop only).
"""
import argparse
import time

import numpy as np
import torch
from torch import nn

ROWS, DIM, BATCH = 1_000_000, 64, 512


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2000, help="training steps to time")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    embedding = nn.Embedding(ROWS, DIM, sparse=True)
    nn.init.uniform_(embedding.weight, -0.05, 0.05)
    logit = nn.Linear(DIM, 1)
    optimizer = torch.optim.SGD(list(embedding.parameters()) + list(logit.parameters()), lr=0.05)
    loss_fn = nn.BCEWithLogitsLoss()

    ids = torch.from_numpy(rng.integers(0, ROWS, size=(args.steps, BATCH)))
    labels = torch.from_numpy(rng.integers(0, 2, size=(args.steps, BATCH, 1)).astype(np.float32))
    start = time.perf_counter()
    for step in range(args.steps):
        optimizer.zero_grad()
        loss = loss_fn(logit(embedding(ids[step])), labels[step])
        loss.backward()
        optimizer.step()
    seconds = time.perf_counter() - start
    print(f"pytorch, 1 process, {args.threads} thread(s): {args.steps} steps of {BATCH} in {seconds:.2f} s")
    print(f"examples/s: {args.steps * BATCH / seconds:.0f}")


if __name__ == "__main__":
    main()
