"""implicit_run.py TRAIN TEST FACTORS REG ALPHA ITERS THREADS: PyPI implicit's CPU ALS (conjugate
gradient, 3 steps) on the binarized split; prints p@10, MAP@10 and NDCG@10 from its
ranking_metrics_at_k and the median seconds per iteration (from its fit callback, iterations 2..),
with BLAS held to one thread."""
import statistics
import sys

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from implicit.cpu.als import AlternatingLeastSquares
from implicit.evaluation import ranking_metrics_at_k

from ratings import index, read

train_path, test_path = sys.argv[1], sys.argv[2]
factors, reg, alpha = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
iters, threads = int(sys.argv[6]), int(sys.argv[7])
(tu, tv, tr), (su, sv, sr), nusers, nitems = index(read(train_path), read(test_path))
train = sp.csr_matrix((tr.astype(np.float32), (tu, tv)), shape=(nusers, nitems))
keep = (su >= 0) & (sv >= 0)
test = sp.csr_matrix((sr[keep].astype(np.float32), (su[keep], sv[keep])), shape=(nusers, nitems))
seconds = []
with threadpool_limits(limits=1, user_api="blas"):
    model = AlternatingLeastSquares(factors=factors, regularization=reg, alpha=alpha, iterations=iters,
                                    use_cg=True, num_threads=threads, random_state=0,
                                    calculate_training_loss=False)
    model.fit(train, show_progress=False, callback=lambda it, elapsed, loss: seconds.append(elapsed))
    metrics = ranking_metrics_at_k(model, train, test, K=10, show_progress=False)
print(f"p@10 {metrics['precision']:.4f} map@10 {metrics['map']:.4f} ndcg@10 {metrics['ndcg']:.4f} "
      f"seconds_per_iteration {statistics.median(seconds[1:]):.4f}")
