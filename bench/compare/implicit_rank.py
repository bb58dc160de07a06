"""implicit_rank.py: PyPI implicit's ranking metrics on factors that starfa trained, for the same users,
items and entries, so that the two evaluations compare side by side.

  implicit_rank.py split RATINGS FRACTION TRAIN TEST
      RATINGS' lines ("user item value", whitespace- or comma-separated) into TRAIN and TEST, each line
      held out with probability FRACTION (numpy seed 1).
  implicit_rank.py rank TRAIN TEST USER_FACTORS ITEM_FACTORS [--k K] [--threads N] [--gpu] [--repeat R]
                  [--batch B]
      USER_FACTORS and ITEM_FACTORS as `starfa export --what user-factors|item-factors` writes them.
      implicit's ranking metrics at K (its ranking_metrics_at_k: each test user's training items left
      out of its ranking, as starfa's) from its model.recommend, B users a call, on its CPU model with N
      threads (0: every core), and with --gpu on its GPU model as well (model.to_gpu()). Prints a line
      per model: p@K, MAP@K, NDCG@K and the median of R runs of the seconds spent in recommend.

implicit 0.7.3's CUDA build comes from PyPI with its RAPIDS memory manager (bench/compare/implicit_gpu.py
says how).
"""
import argparse
import statistics
import sys
import time

import numpy as np
import scipy.sparse as sp


def read_entries(path):
    users, items = [], []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            fields = line.replace(",", " ").split()
            if not fields or fields[0].startswith("#"):
                continue
            if len(fields) < 2:
                sys.exit(f"{path}:{n}: expected 'user item [value]'")
            users.append(fields[0])
            items.append(fields[1])
    return users, items


def read_factors(path):
    ids, rows = [], []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 2:
                sys.exit(f"{path}:{n}: expected 'id<TAB>values'")
            ids.append(fields[0])
            rows.append([float(x) for x in fields[1:]])
    return {name: i for i, name in enumerate(ids)}, np.asarray(rows, dtype=np.float32)


def matrix(users, items, umap, imap):
    """The entries whose user and item the factors know, as a binary CSR matrix (duplicates once)."""
    u = np.array([umap.get(x, -1) for x in users], dtype=np.int64)
    i = np.array([imap.get(x, -1) for x in items], dtype=np.int64)
    keep = (u >= 0) & (i >= 0)
    m = sp.csr_matrix((np.ones(keep.sum(), dtype=np.float32), (u[keep], i[keep])), shape=(len(umap), len(imap)))
    m.data[:] = 1.0
    return m


def split(a):
    with open(a.ratings) as f:
        lines = [line for line in f if line.strip() and not line.startswith("#")]
    held = np.random.default_rng(1).random(len(lines)) < a.fraction
    for path, want in ((a.train, False), (a.test, True)):
        tmp = path + ".part"
        with open(tmp, "w") as out:
            out.writelines(line for line, h in zip(lines, held) if h == want)
        import os
        os.replace(tmp, path)
    print(f"{len(lines) - held.sum()} training and {held.sum()} test lines")


def metrics(model, train, test, k, batch):
    """implicit's ranking_metrics_at_k, computed here from its model.recommend (which is what that function
    calls, a batch of users at a time; its own loop fails on SciPy >= 1.15 with implicit 0.7): the test
    users' top k with their training items left out, precision as hits / min(k, test items), MAP and NDCG
    at k. Returns the metrics and the seconds spent in recommend."""
    users = np.flatnonzero(np.diff(test.indptr) > 0)
    discount = 1.0 / np.log2(np.arange(2, k + 2))
    ideal = np.cumsum(discount)
    relevant = pr_div = ap_sum = ndcg_sum = 0.0
    seconds = 0.0
    for b in range(0, len(users), batch):
        u = users[b:b + batch]
        t0 = time.perf_counter()
        ids, _ = model.recommend(u, train[u], N=k, filter_already_liked_items=True)
        seconds += time.perf_counter() - t0
        for row, user in zip(np.asarray(ids), u):
            likes = set(test.indices[test.indptr[user]:test.indptr[user + 1]].tolist())
            cut = min(k, len(likes))
            hits = np.array([item in likes for item in row.tolist()], dtype=bool)
            relevant += hits.sum()
            pr_div += cut
            ap_sum += (np.cumsum(hits)[hits] / (np.flatnonzero(hits) + 1)).sum() / cut
            ndcg_sum += discount[:len(hits)][hits].sum() / ideal[cut - 1]
    n = len(users)
    return {"precision": relevant / pr_div, "map": ap_sum / n, "ndcg": ndcg_sum / n}, seconds


def rank(a):
    from implicit.cpu.als import AlternatingLeastSquares

    umap, U = read_factors(a.user_factors)
    imap, V = read_factors(a.item_factors)
    if U.shape[1] != V.shape[1]:
        sys.exit(f"the user factors have {U.shape[1]} columns, the item factors {V.shape[1]}")
    train = matrix(*read_entries(a.train), umap, imap)
    test = matrix(*read_entries(a.test), umap, imap)
    model = AlternatingLeastSquares(factors=U.shape[1], num_threads=a.threads)
    model.user_factors, model.item_factors = U, V
    models = [("implicit CPU", model)]
    if a.gpu:
        models.append(("implicit GPU", model.to_gpu()))
    import implicit
    for name, m in models:
        runs = [metrics(m, train, test, a.k, a.batch) for _ in range(a.repeat)]
        got, seconds = runs[-1][0], statistics.median(r[1] for r in runs)
        print(f"{name} {implicit.__version__}: p@{a.k} {got['precision']:.4f} map@{a.k} {got['map']:.4f} "
              f"ndcg@{a.k} {got['ndcg']:.4f} seconds in recommend {seconds:.3f} (median of {a.repeat}, "
              f"batches of {a.batch} users)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("split")
    s.add_argument("ratings")
    s.add_argument("fraction", type=float)
    s.add_argument("train")
    s.add_argument("test")
    r = sub.add_parser("rank")
    r.add_argument("train")
    r.add_argument("test")
    r.add_argument("user_factors")
    r.add_argument("item_factors")
    r.add_argument("--k", type=int, default=10)
    r.add_argument("--threads", type=int, default=0)
    r.add_argument("--gpu", action="store_true")
    r.add_argument("--repeat", type=int, default=3)
    r.add_argument("--batch", type=int, default=1000)
    a = ap.parse_args()
    if a.cmd == "split":
        if not 0 < a.fraction < 1:
            sys.exit("FRACTION must be in (0, 1)")
        split(a)
    else:
        rank(a)


if __name__ == "__main__":
    main()
