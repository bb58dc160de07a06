#!/usr/bin/env python3
"""LDA side by side: starfa, scikit-learn (batch variational Bayes), gensim (batch variational Bayes) and
tomotopy (collapsed Gibbs sampling) on one corpus, one document split, the same K, iterations and priors
(alpha = eta = 1/K). Every library's held-out perplexity is computed by one function, perplexity() below,
from its topic-word matrix and the mixtures it infers for the held-out documents' observed halves
(document completion: each held-out document's entries, sorted by word id, alternate between an observed
half, 1st, 3rd, ..., and an evaluated half). starfa's own `starfa eval` figure is printed beside it as a
cross-check. Seconds per iteration: the fit's wall time over its iterations, on the same threads.
--mode online runs the online variational Bayes of Hoffman, Blei & Bach (2010) instead, with
scikit-learn's defaults everywhere (mini-batches of 128 documents, learning offset 10, decay 0.7);
tomotopy has no such mode and is left out.

  compare.py --corpus FILE.docword.txt [--k K] [--iters N] [--test-fraction F] [--seed S]
             [--threads T] [--starfa BIN] [--only starfa,sklearn,gensim,tomotopy] [--mode batch|online]

Prints one Markdown table row per library.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.sparse as sp


def read_docword(path):
    with open(path) as f:
        D = int(f.readline())
        W = int(f.readline())
        f.readline()
        data = np.loadtxt(f, dtype=np.int64, ndmin=2)
    return sp.csr_matrix((data[:, 2].astype(np.float64), (data[:, 0] - 1, data[:, 1] - 1)), shape=(D, W))


def write_docword(path, X):
    X = X.tocoo()
    order = np.lexsort((X.col, X.row))
    with open(path, "w") as f:
        f.write(f"{X.shape[0]}\n{X.shape[1]}\n{X.nnz}\n")
        np.savetxt(f, np.column_stack((X.row[order] + 1, X.col[order] + 1, X.data[order].astype(np.int64))), fmt="%d")


def halves(X):
    """Each row's entries sorted by column: the 1st, 3rd, ... observed, the 2nd, 4th, ... evaluated."""
    X = X.tocsr()
    X.sort_indices()
    obs, ev = X.copy(), X.copy()
    for r in range(X.shape[0]):
        a, b = X.indptr[r], X.indptr[r + 1]
        pos = np.arange(b - a)
        obs.data[a:b][pos % 2 == 1] = 0
        ev.data[a:b][pos % 2 == 0] = 0
    obs.eliminate_zeros()
    ev.eliminate_zeros()
    return obs, ev


def perplexity(theta, beta, evaluated):
    """exp(-sum c log(theta_d . beta_w) / sum c) over the evaluated tokens; theta D x K, beta K x W."""
    ev = evaluated.tocoo()
    p = np.einsum("ek,ek->e", theta[ev.row], beta[:, ev.col].T)
    return float(np.exp(-np.sum(ev.data * np.log(np.maximum(p, 1e-300))) / np.sum(ev.data)))


def normalize_rows(a):
    a = np.asarray(a, dtype=np.float64)
    return a / a.sum(axis=1, keepdims=True)


ONLINE = {"batch": 128, "offset": 10.0, "decay": 0.7}  # scikit-learn's batch_size, learning_offset, learning_decay


def run_starfa(binary, train_path, obs_path, test_path, k, iters, seed, threads, work, mode):
    model = os.path.join(work, "starfa.model")
    log = os.path.join(work, "starfa.csv")
    env = dict(os.environ, STARPU_SILENT="1")
    cmd = [binary, "train", "--algo", "lda", "--input", train_path, "--rank", str(k), "--iters", str(iters), "--seed",
           str(seed), "--out", model, "--log", log, "--ncpus", str(threads)]
    if mode == "online":
        cmd += ["--mode", "online", "--batch", str(ONLINE["batch"]), "--offset", str(ONLINE["offset"]), "--decay",
                str(ONLINE["decay"])]
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    secs = np.genfromtxt(log, delimiter=",", names=True)["seconds"]
    theta_path, beta_path = os.path.join(work, "theta.tsv"), os.path.join(work, "beta.tsv")
    subprocess.run([binary, "transform", "--model", model, "--input", obs_path, "--out", theta_path, "--ncpus",
                    str(threads)], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run([binary, "export", "--model", model, "--what", "topic-word", "--out", beta_path], check=True,
                   env=env, stdout=subprocess.DEVNULL)
    out = subprocess.run([binary, "eval", "--model", model, "--test", test_path, "--ncpus", str(threads)], check=True,
                         env=env, capture_output=True, text=True).stdout
    own = float([l for l in out.splitlines() if l.startswith("perplexity=")][0].split("=")[1])
    theta = np.loadtxt(theta_path, ndmin=2)
    beta = np.loadtxt(beta_path, ndmin=2)
    return theta, beta, float(np.sum(secs)) / iters, f"starfa eval: {own:.2f}"


def run_sklearn(train, obs, k, iters, seed, threads, mode):
    from sklearn.decomposition import LatentDirichletAllocation
    lda = LatentDirichletAllocation(n_components=k, learning_method=mode, max_iter=iters, doc_topic_prior=1 / k,
                                    topic_word_prior=1 / k, random_state=seed, n_jobs=threads, evaluate_every=-1,
                                    batch_size=ONLINE["batch"], learning_offset=ONLINE["offset"],
                                    learning_decay=ONLINE["decay"])
    t0 = time.perf_counter()
    lda.fit(train)
    t = time.perf_counter() - t0
    return normalize_rows(lda.transform(obs)), normalize_rows(lda.components_), t / iters, ""


def bows(X):
    X = X.tocsr()
    return [list(zip(X.indices[X.indptr[r]:X.indptr[r + 1]].tolist(), X.data[X.indptr[r]:X.indptr[r + 1]].astype(int).tolist()))
            for r in range(X.shape[0])]


def run_gensim(train, obs, k, iters, seed, threads, mode):
    from gensim.models import LdaModel
    corpus = bows(train)
    id2word = {w: str(w) for w in range(train.shape[1])}
    t0 = time.perf_counter()
    online = dict(update_every=1, chunksize=ONLINE["batch"], offset=ONLINE["offset"], decay=ONLINE["decay"])
    batch = dict(update_every=0, chunksize=len(corpus))
    lda = LdaModel(corpus=corpus, id2word=id2word, num_topics=k, alpha=np.full(k, 1 / k), eta=1 / k, passes=iters,
                   iterations=100, gamma_threshold=1e-3, random_state=seed, eval_every=None,
                   **(online if mode == "online" else batch))
    t = time.perf_counter() - t0
    gamma, _ = lda.inference(bows(obs))
    return normalize_rows(gamma), normalize_rows(lda.get_topics()), t / iters, ""


def run_tomotopy(train, obs, k, iters, seed, threads, mode):
    import tomotopy as tp
    mdl = tp.LDAModel(k=k, alpha=1 / k, eta=1 / k, seed=seed)
    X = train.tocsr()
    for r in range(X.shape[0]):
        words = [str(w) for w, c in zip(X.indices[X.indptr[r]:X.indptr[r + 1]], X.data[X.indptr[r]:X.indptr[r + 1]])
                 for _ in range(int(c))]
        mdl.add_doc(words if words else ["0"])
    t0 = time.perf_counter()
    mdl.train(iters, workers=threads)
    t = time.perf_counter() - t0
    vocab = {w: i for i, w in enumerate(mdl.used_vocabs)}
    beta = np.full((k, train.shape[1]), 1e-12)
    for t_ in range(k):
        dist = mdl.get_topic_word_dist(t_)
        for w, i in vocab.items():
            beta[t_, int(w)] = dist[i]
    O = obs.tocsr()
    docs = []
    for r in range(O.shape[0]):
        words = [str(w) for w, c in zip(O.indices[O.indptr[r]:O.indptr[r + 1]], O.data[O.indptr[r]:O.indptr[r + 1]])
                 for _ in range(int(c)) if str(w) in vocab]
        docs.append(mdl.make_doc(words))
    res, _ = mdl.infer(docs, iterations=100, workers=threads)
    theta = np.array([d.get_topic_dist() if hasattr(d, "get_topic_dist") else d for d in res])
    return normalize_rows(theta), normalize_rows(beta), t / iters, "Gibbs sampling: its iterations are sweeps"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--test-fraction", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--starfa", default=os.path.join(here, "..", "..", "build", "starfa"))
    ap.add_argument("--only", default="starfa,sklearn,gensim,tomotopy")
    ap.add_argument("--mode", choices=("batch", "online"), default="batch")
    a = ap.parse_args()
    X = read_docword(a.corpus)
    rng = np.random.default_rng(a.seed)
    test_rows = rng.random(X.shape[0]) < a.test_fraction
    train, test = X[~test_rows], X[test_rows]
    obs, ev = halves(test)
    name = os.path.basename(a.corpus).split(".")[0]
    print(f"<!-- {name}: {train.shape[0]} training documents, {test.shape[0]} held out ({int(obs.sum())} observed, "
          f"{int(ev.sum())} evaluated tokens), {X.shape[1]} words, K={a.k}, {a.iters} iterations, {a.threads} threads, "
          f"{a.mode} -->")
    print("| corpus | K | library | held-out perplexity | s/iteration | note |")
    print("| --- | ---: | --- | ---: | ---: | --- |")
    with tempfile.TemporaryDirectory() as work:
        paths = {n: os.path.join(work, n + ".docword.txt") for n in ("train", "test", "obs")}
        write_docword(paths["train"], train)
        write_docword(paths["test"], test)
        write_docword(paths["obs"], obs)
        for lib in a.only.split(","):
            if lib == "tomotopy" and a.mode == "online":
                continue
            try:
                if lib == "starfa":
                    theta, beta, spi, note = run_starfa(a.starfa, paths["train"], paths["obs"], paths["test"], a.k, a.iters,
                                                        a.seed, a.threads, work, a.mode)
                else:
                    fn = {"sklearn": run_sklearn, "gensim": run_gensim, "tomotopy": run_tomotopy}[lib]
                    theta, beta, spi, note = fn(train, obs, a.k, a.iters, a.seed, a.threads, a.mode)
                print(f"| {name} | {a.k} | {lib} | {perplexity(theta, beta, ev):.2f} | {spi:.4f} | {note} |", flush=True)
            except Exception as e:  # a library missing or failing: say so in its row
                print(f"| {name} | {a.k} | {lib} | failed: {type(e).__name__}: {e} | | |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
