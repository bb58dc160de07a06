#!/usr/bin/env python3
"""Synthetic implicit-feedback ratings for the ranking-metrics benchmarks (bench/PLACEMENT.md).

usage: implicit_ratings.py USERS ITEMS ENTRIES OUT

Writes ENTRIES distinct "user item rating" lines (0-based ids, ratings 1-5): ids drawn from Pareto
distributions (a few heavy users and popular items), each id replaced by a uniform one with
probability 0.5 (users) and 0.3 (items), seed 1. Pure Python, no dependencies.
"""
import os
import random
import sys


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__.strip().splitlines()[2])
    try:
        users, items, entries, path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    except ValueError:
        sys.exit("implicit_ratings.py: USERS, ITEMS and ENTRIES must be integers")
    # distinct pairs get rare as ENTRIES nears USERS * ITEMS: half of the pairs at most
    if users < 1 or items < 1 or entries < 0 or entries > users * items // 2:
        sys.exit("implicit_ratings.py: need USERS, ITEMS >= 1 and 0 <= ENTRIES <= USERS * ITEMS / 2")
    random.seed(1)
    seen = set()
    lines = []
    while len(lines) < entries:
        u = (min(int(random.paretovariate(0.8)), users) - 1) * 7919 % users
        i = (min(int(random.paretovariate(0.6)), items) - 1) * 104729 % items
        if random.random() < 0.5:
            u = random.randrange(users)
        if random.random() < 0.3:
            i = random.randrange(items)
        if (u, i) in seen:
            continue
        seen.add((u, i))
        lines.append(f"{u} {i} {random.randint(1, 5)}\n")
    tmp = path + ".partial"
    try:
        with open(tmp, "w") as f:
            f.writelines(lines)
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        sys.exit(f"implicit_ratings.py: writing {path} failed: {e}")


if __name__ == "__main__":
    main()
