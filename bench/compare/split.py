"""split.py SRC OUT: OUT/train.csv and OUT/test.csv, 20% of the ratings at random (numpy seed 42), and
the same split binarized for implicit feedback (OUT/train_bin.csv, OUT/test_bin.csv: every rating
becomes an interaction of value 1)."""
import sys

import numpy as np


def write(path, header, rows):
    with open(path, "w") as f:
        f.write(header + "\n" + "".join(r + "\n" for r in rows))


def binarize(row):
    user, item = row.split(",")[:2]
    return f"{user},{item},1"


src, out = sys.argv[1], sys.argv[2]
lines = open(src).read().splitlines()
header, rows = lines[0], lines[1:]
test = np.random.default_rng(42).random(len(rows)) < 0.2
train_rows = [r for r, t in zip(rows, test) if not t]
test_rows = [r for r, t in zip(rows, test) if t]
write(out + "/train.csv", header, train_rows)
write(out + "/test.csv", header, test_rows)
write(out + "/train_bin.csv", "userId,movieId,rating", [binarize(r) for r in train_rows])
write(out + "/test_bin.csv", "userId,movieId,rating", [binarize(r) for r in test_rows])
