"""Reading the split files into index form, shared by the runners."""
import csv

import numpy as np


def read(path):
    with open(path) as f:
        rows = list(csv.reader(f))[1:]
    return [(r[0], r[1], float(r[2])) for r in rows]


def index(train, test):
    """Train and test as (user, item, value) index arrays; test entries of users or items the
    training set lacks get index -1."""
    users = {u: i for i, u in enumerate(dict.fromkeys(u for u, _, _ in train))}
    items = {v: i for i, v in enumerate(dict.fromkeys(v for _, v, _ in train))}

    def arrays(entries):
        u = np.array([users.get(x[0], -1) for x in entries], dtype=np.int64)
        v = np.array([items.get(x[1], -1) for x in entries], dtype=np.int64)
        r = np.array([x[2] for x in entries], dtype=np.float64)
        return u, v, r

    return arrays(train), arrays(test), len(users), len(items)
