#!/usr/bin/env python3
"""Dense reference of examples/klnmf: the same start (splitmix64, seed 1) and the same multiplicative
updates, in double precision on the dense matrix; prints kl_per_token per iteration.
    klnmf_ref.py FILE.mtx K ITERS"""
import math
import sys

MASK = (1 << 64) - 1
EPS = 1e-12


def main():
    path, k, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with open(path) as f:
        lines = [l for l in f if not l.startswith('%')]
    m, n, _ = (int(x) for x in lines[0].split())
    S = [[0.0] * n for _ in range(m)]
    for l in lines[1:]:
        r, c, v = l.split()
        S[int(r) - 1][int(c) - 1] += float(v)
    total = sum(map(sum, S))
    state = [1]

    def uniform():
        state[0] = (state[0] + 0x9e3779b97f4a7c15) & MASK
        z = state[0]
        z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & MASK
        z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & MASK
        z ^= z >> 31
        return (z >> 11) / 9007199254740992.0

    scale = math.sqrt(total / (m * n * k))
    # float32 like the program's start, then double from there
    import struct
    f32 = lambda x: struct.unpack('f', struct.pack('f', x))[0]
    W = [[f32((0.5 + uniform()) * scale) for _ in range(k)] for _ in range(m)]
    H = [[f32((0.5 + uniform()) * scale) for _ in range(k)] for _ in range(n)]

    def predict():
        return [[sum(W[i][d] * H[j][d] for d in range(k)) for j in range(n)] for i in range(m)]

    def divergence():
        Y = predict()
        d = 0.0
        for i in range(m):
            for j in range(n):
                s, y = S[i][j], Y[i][j]
                if s != 0:
                    d += s * math.log(s / max(EPS, y)) - s
                d += y
        return d / total

    print("iter 0 kl_per_token=%.12g" % divergence())
    for it in range(1, iters + 1):
        Y = predict()
        P = [[S[i][j] / max(EPS, Y[i][j]) if S[i][j] != 0 else 0.0 for j in range(n)] for i in range(m)]
        cH = [sum(H[j][d] for j in range(n)) for d in range(k)]
        W = [[W[i][d] * sum(P[i][j] * H[j][d] for j in range(n)) / max(EPS, cH[d]) for d in range(k)]
             for i in range(m)]
        Y = predict()
        P = [[S[i][j] / max(EPS, Y[i][j]) if S[i][j] != 0 else 0.0 for j in range(n)] for i in range(m)]
        cW = [sum(W[i][d] for i in range(m)) for d in range(k)]
        H = [[H[j][d] * sum(P[i][j] * W[i][d] for i in range(m)) / max(EPS, cW[d]) for d in range(k)]
             for j in range(n)]
        print("iter %d kl_per_token=%.12g" % (it, divergence()))


main()
