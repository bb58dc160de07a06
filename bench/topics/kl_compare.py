#!/usr/bin/env python3
"""KL-NMF and GaP side by side with scikit-learn's NMF(beta_loss='kullback-leibler', solver='mu') on one
corpus (the whole of it), the same K and iterations. Every factorization's generalized Kullback-Leibler
divergence D(S || W H^T) = sum_nz (s log(s / y) - s) + sum_all y is computed by one function, kl() below,
from the factors each one writes; it is printed per token (over sum s). Seconds per iteration: the fit's
wall time over its iterations, on the same threads.

starfa's klnmf runs from its default NNDSVDa start (starfa_svds' randomized SVD) and from its random start,
gap from NNDSVDa. scikit-learn runs twice: from its random start (init='random': |N(0, 1)| sqrt(mean / K), the scale of
starfa's start) and from its default start for this solver (init='nndsvda', an SVD-based start). tol = 0
so that both run every iteration.

  kl_compare.py --corpus FILE.docword.txt [--k K] [--iters N] [--seed S] [--threads T] [--starfa BIN]
                [--shape A]   (GaP's shape, default 1.1)

Prints one Markdown table row per factorization.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import read_docword  # noqa: E402


def kl(S, W, H):
    """D(S || W H^T) per token; S documents x words (CSR), W documents x K, H words x K."""
    S = S.tocoo()
    W = np.asarray(W, dtype=np.float64)
    H = np.asarray(H, dtype=np.float64)
    y = np.einsum("ek,ek->e", W[S.row], H[S.col])
    nz = np.sum(S.data * np.log(S.data / np.maximum(y, 1e-300)) - S.data)
    return float((nz + W.sum(axis=0) @ H.sum(axis=0)) / S.data.sum())


def read_factors(path, rows, k):
    out = np.zeros((rows, k))
    data = np.loadtxt(path, ndmin=2)
    out[data[:, 0].astype(np.int64) - 1] = data[:, 1:]
    return out


def run_starfa(binary, corpus, S, algo, k, iters, seed, threads, shape, init, work):
    model, log = os.path.join(work, algo + ".model"), os.path.join(work, algo + ".csv")
    env = dict(os.environ, STARPU_SILENT="1")
    cmd = [binary, "train", "--algo", algo, "--input", corpus, "--rank", str(k), "--iters", str(iters), "--seed",
           str(seed), "--out", model, "--log", log, "--ncpus", str(threads), "--init", init]
    if algo == "gap":
        cmd += ["--shape", str(shape)]
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    logged = np.genfromtxt(log, delimiter=",", names=True)
    u, v = os.path.join(work, "u.tsv"), os.path.join(work, "v.tsv")
    for what, path in (("user-factors", u), ("item-factors", v)):
        subprocess.run([binary, "export", "--model", model, "--what", what, "--out", path], check=True, env=env,
                       stdout=subprocess.DEVNULL)
    W, H = read_factors(u, S.shape[0], k), read_factors(v, S.shape[1], k)
    return W, H, float(np.mean(logged["seconds"])), float(logged["kl_per_token"][-1])


def run_sklearn(S, k, iters, seed, init):
    from sklearn.decomposition import NMF
    nmf = NMF(n_components=k, beta_loss="kullback-leibler", solver="mu", init=init, max_iter=iters, tol=0,
              random_state=seed)
    t0 = time.perf_counter()
    W = nmf.fit_transform(S)
    secs = time.perf_counter() - t0
    return W, nmf.components_.T, secs / nmf.n_iter_


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--shape", type=float, default=1.1)
    ap.add_argument("--starfa", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "starfa"))
    a = ap.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    S = read_docword(a.corpus)
    name = os.path.basename(a.corpus).split(".")[0]
    print(f"{name}: {S.shape[0]} documents x {S.shape[1]} words, {S.nnz} nonzeros, {int(S.data.sum())} tokens; "
          f"K = {a.k}, {a.iters} iterations, {a.threads} threads")
    print("| factorization | KL per token | seconds / iteration | own figure |")
    print("| --- | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as work:
        for algo, init in (("klnmf", "nndsvda"), ("klnmf", "random"), ("gap", "nndsvda")):
            W, H, secs, own = run_starfa(a.starfa, a.corpus, S, algo, a.k, a.iters, a.seed, a.threads, a.shape, init,
                                         work)
            label = f"starfa {algo}" + (f" (shape {a.shape})" if algo == "gap" else "") + f", init={init}"
            print(f"| {label} | {kl(S, W, H):.6f} | {secs:.4f} | {own:.6f} |", flush=True)
    for init in ("random", "nndsvda"):
        W, H, secs = run_sklearn(S, a.k, a.iters, a.seed, init)
        print(f"| scikit-learn NMF mu, init={init} | {kl(S, W, H):.6f} | {secs:.4f} | |", flush=True)


if __name__ == "__main__":
    main()
