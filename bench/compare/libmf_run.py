"""libmf_run.py TRAIN TEST K L2 ITERS ETA [THREADS]: LIBMF (PyPI libmf) on the split; prints the test
RMSE and the fit's seconds. LIBMF models no mean or biases; test entries of users or items it never
saw are predicted by the training mean. Its binding's batch predict misreads its input, so the
predictions come from its P and Q factors directly."""
import sys
import time

import numpy as np
from libmf import mf

from ratings import index, read

train_path, test_path = sys.argv[1], sys.argv[2]
k, l2, iters, eta = int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
threads = int(sys.argv[7]) if len(sys.argv) > 7 else 2
(tu, tv, tr), (su, sv, sr), nusers, nitems = index(read(train_path), read(test_path))
engine = mf.MF(k=k, lambda_p1=0.0, lambda_q1=0.0, lambda_p2=l2, lambda_q2=l2, nr_iters=iters, eta=eta,
               nr_threads=threads, quiet=True)
t0 = time.perf_counter()
engine.fit(np.column_stack([tu, tv, tr]))
seconds = time.perf_counter() - t0
m = engine.model
P = np.ctypeslib.as_array(m.P, shape=(m.m, m.k)).astype(np.float64)
Q = np.ctypeslib.as_array(m.Q, shape=(m.n, m.k)).astype(np.float64)
mean = tr.mean()
known = (su >= 0) & (sv >= 0) & (su < m.m) & (sv < m.n)
pred = np.full(len(sr), mean)
pred[known] = np.einsum("ij,ij->i", P[su[known]], Q[sv[known]])
pred[~np.isfinite(pred)] = mean
print(f"test_rmse {np.sqrt(np.mean((pred - sr) ** 2)):.4f} fit_seconds {seconds:.3f}")
