#!/usr/bin/python3
"""Plain logistic regression on the same split, as a reference for twinps.

Reads LIBSVM's heart_scale (Debian's liblinear-tools), trains on its first
200 lines and tests on the last 70, as examples/run does, and fits
p(y=1|x) = sigmoid(w.x + b) by Newton's method (iteratively reweighted least
squares) to the maximum of the likelihood, with a tiny L2 penalty (1e-4) on w
only so the Hessian stays invertible. Prints `test accuracy: X` and the test
AUC. Needs only numpy (Debian's python3-numpy).

    /usr/bin/python3 examples/linear/numpy_reference.py [--file PATH]
"""
import argparse

import numpy as np

DEFAULT_FILE = "/usr/share/doc/liblinear-tools/examples/heart_scale"
TRAIN_LINES = 200
FEATURES = 13


def read_libsvm(path):
    labels, rows = [], []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if not line:
                continue
            x = np.zeros(FEATURES)
            for item in line[1:]:
                index, value = item.split(":")
                x[int(index) - 1] = float(value)
            labels.append(1.0 if float(line[0]) == 1 else 0.0)
            rows.append(x)
    return np.array(rows), np.array(labels)


def auc(scores, labels):
    # The probability that a positive scores above a negative (ties count half).
    pos, neg = scores[labels == 1], scores[labels == 0]
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return (greater + 0.5 * ties) / (len(pos) * len(neg))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--file", default=DEFAULT_FILE)
    args = ap.parse_args()
    x, y = read_libsvm(args.file)
    x = np.hstack([x, np.ones((len(x), 1))])  # the intercept as a constant feature
    xtr, ytr, xte, yte = x[:TRAIN_LINES], y[:TRAIN_LINES], x[TRAIN_LINES:], y[TRAIN_LINES:]
    w = np.zeros(x.shape[1])
    l2 = np.full(x.shape[1], 1e-4)
    l2[-1] = 0.0
    for _ in range(100):
        p = 1 / (1 + np.exp(-xtr @ w))
        grad = xtr.T @ (p - ytr) + l2 * w
        hess = xtr.T @ (xtr * (p * (1 - p))[:, None]) + np.diag(l2)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    p_train = 1 / (1 + np.exp(-xtr @ w))
    p_test = 1 / (1 + np.exp(-xte @ w))
    loss = -np.mean(ytr * np.log(p_train) + (1 - ytr) * np.log(1 - p_train))
    print("train loss %.4f, train accuracy %.4f" % (loss, np.mean((p_train > 0.5) == (ytr == 1))))
    print("test auc: %.4f" % auc(p_test, yte))
    print("test accuracy: %.4f" % np.mean((p_test > 0.5) == (yte == 1)))


if __name__ == "__main__":
    main()
