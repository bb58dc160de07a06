"""implicit_gpu.py MATRIX [--factors F] [--iters N] [--cg-steps S] [--reg L] [--alpha A]: PyPI implicit's
GPU ALS (implicit feedback, conjugate gradient) on a matrix written by `starfa_als_bench --dump MATRIX`,
so that it trains on the same matrix and values as starfa_als_bench's "implicit ALS, CG 3 steps" run.
Prints one Markdown table row: implicit's version, the median seconds per iteration over iterations
2..N (from its fit callback), the first iteration's, and the wall time of the fit and the copy of the
factors to the host (which waits for the device) over the iterations.

implicit 0.7.3's CUDA build comes from PyPI with its RAPIDS memory manager (for CUDA 13):
  pip install implicit==0.7.3 librmm-cu13==26.4.0 rmm-cu13==26.4.0 'rapids-logger>=0.2,<0.3'
and needs librmm/lib64 and rapids_logger/lib64 of the install folder on LD_LIBRARY_PATH (the 26.10
librmm lacks a symbol implicit links against).
"""
import argparse
import statistics
import sys
import time

import numpy as np
import scipy.sparse as sp


def read_dump(path):
    with open(path, "rb") as f:
        if f.read(8) != b"STARFCSR":
            sys.exit(f"{path}: not a starfa_als_bench --dump file")
        nrows, ncols, nnz = np.fromfile(f, dtype="<i8", count=3)
        rowptr = np.fromfile(f, dtype="<i8", count=nrows + 1)
        colind = np.fromfile(f, dtype="<i4", count=nnz)
        val = np.fromfile(f, dtype="<f4", count=nnz)
    if len(val) != nnz or rowptr[-1] != nnz:
        sys.exit(f"{path}: truncated")
    return sp.csr_matrix((val, colind, rowptr), shape=(nrows, ncols))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("matrix")
    ap.add_argument("--factors", type=int, default=100)
    ap.add_argument("--iters", type=int, default=6)
    ap.add_argument("--cg-steps", type=int, default=3)
    ap.add_argument("--reg", type=float, default=0.05)
    ap.add_argument("--alpha", type=float, default=1.0)
    a = ap.parse_args()
    import implicit
    from implicit.gpu import HAS_CUDA
    if not HAS_CUDA:
        sys.exit("implicit was built without CUDA (or finds no GPU)")
    from implicit.gpu.als import AlternatingLeastSquares

    t0 = time.perf_counter()
    S = read_dump(a.matrix)
    load = time.perf_counter() - t0
    seconds = []
    model = AlternatingLeastSquares(factors=a.factors, regularization=a.reg, alpha=a.alpha, iterations=a.iters,
                                    calculate_training_loss=False, random_state=0)
    model.cg_steps = a.cg_steps  # an attribute in 0.7.3 (3), not a constructor argument
    t0 = time.perf_counter()
    model.fit(S, show_progress=False, callback=lambda it, elapsed, loss: seconds.append(elapsed))
    model = model.to_cpu()  # waits for the device: the fit's time includes all of its work
    fit = time.perf_counter() - t0
    print(f"<!-- {a.matrix}: {S.shape[0]} x {S.shape[1]}, {S.nnz} nonzeros, read in {load:.1f} s -->")
    print("| peer | s/iteration (median of iterations 2..N) | first iteration | fit wall time / iterations |")
    print("|---|---:|---:|---:|")
    print(f"| implicit {implicit.__version__} GPU ALS (f = {a.factors}, CG {a.cg_steps} steps) | "
          f"{statistics.median(seconds[1:]):.3f} | {seconds[0]:.3f} | {fit / a.iters:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
