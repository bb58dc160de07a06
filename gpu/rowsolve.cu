/* The fused build-and-solve of a band's rows on CUDA (the Gram accumulation and the solves: gpu/als_device.cuh).
 *
 * The fused kernel sums each row's Gram matrix and, in the same product, b_u (column k of the B
 * operand holds each entry's target), then writes the fragments, mirrored, with lambda and G added, as
 * a full kp x kp system into shared memory (store_system), where the block solves it by CG; exact
 * solves leave it packed in a scratch for a warp a system (Deferred, rowsolve_cholesky_kernel). Rows
 * longer than STARFA_CUDA_ROWSOLVE_SEGMENT are cut into segments built by separate blocks that write
 * their partial sums; the last of them (a counter per row) adds the parts in order and solves, so the
 * result does not depend on which block ran first. */
#include "gpu/rowsolve.h"

#include "gpu/als_device.cuh"

#include <climits>

namespace {

struct Partials {
	float *A;          /* nparts x kp x kp (the upper fragments only are written and read) */
	unsigned *counter; /* per long row, indexed by its first part */
};

/* Exact solves apart from the Gram kernel (sys non-null): the block that finishes a row's system writes
 * its upper triangle, b in column k, packed (PackedRows) to slot blockIdx.x of sys (deferred_floats(k)
 * floats: the packed rows, then 1 or 0 for whether its k x k values are finite), and the row to
 * rows[slot]; the warps of rowsolve_cholesky_kernel solve it. rows[slot] stays ~0 where no system was
 * written (a segment that was not its row's last). */
struct Deferred {
	float *sys;
	uint32_t *rows;
};

__host__ __device__ inline size_t deferred_floats(int64_t k)
{
	return packed_floats(k) + 4;
}

__host__ __device__ inline int round4(int x)
{
	return (x + 3) & ~3;
}

/* Short rows, solved in their n x n form. With Y the row's n theta rows and t its targets,
 * (Y^T Y + lambda I) x = Y^T t has the solution x = Y^T z, (Y Y^T + lambda I) z = t, for lambda > 0
 * (push-through: Y^T (Y Y^T + lambda I) = (Y^T Y + lambda I) Y^T). For n < k that system costs n^2 k
 * + n^3 / 3 multiply-adds instead of n k^2 + k^3 / 3, and its Cholesky has ceil(n / 16) panels of 16
 * instead of ceil(k / 16), each a chain of block-wide steps; CG on such rows is cheaper matrix-free
 * (cg_short_row). Their own kernel (short_rows_kernel) takes the items past the longer rows (the work
 * list is sorted by length), so that the Gram kernel's registers are not shared with it. In shared
 * memory, in front: for Cholesky K = Y Y^T + lambda I (n x ldk, ldk = round4(n) + 4, columns n..round4(n)
 * zero for solve_cholesky's 4 x 4 tiles, column n its right-hand side), for CG the targets t and weights w (round4(n) each) and the
 * warps' partial products (kWarps x kp); then, for CG with G, G's k rows (ldy = round4(k) + 4), then Y
 * (n x ldy). With G the front is sized for the launch's longest row, so G stays put while a block solves
 * several rows. CG's front is the smaller for n over about 30, so that its blocks
 * share a multiprocessor more (the kernel is instantiated per solver). */
__host__ __device__ inline size_t short_row_front(int64_t n, int64_t k, bool cholesky)
{
	return cholesky ? (size_t)n * (size_t)(round4((int)n) + 4)
			: 2 * (size_t)round4((int)n) + (size_t)kWarps * padded(k + 1);
}

__host__ __device__ inline size_t short_row_floats(int64_t n, int64_t k, bool cholesky, bool with_g = false)
{
	const int64_t rows = n + (!cholesky && with_g ? k : 0);
	return short_row_front(n, k, cholesky) + (size_t)rows * (size_t)(round4((int)k) + 4);
}

/* A short row's n theta rows into Y (n x ldy, columns k..round4(k) zero), its targets into tout and, with
 * wout, its weights: warp w gathers entries w, w + 8, ..., four at a time (lanes 0..3 look them up, then
 * every lane loads its columns of the four theta rows before storing any). Adds the non-finite values
 * of Y and of the weights to *bad_y and of the targets to *bad_t (thread-local counts). */
template <int LANES>
__device__ void gather_short(const Shared &s, const RowSource &src, const Weights &wt, uint32_t begin, int n, int k,
			     float *Y, int ldy, float *tout, float *bad_y, float *bad_t, float *wout = nullptr)
{
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, dk = round4(k);
	for (int e0 = warp; e0 < n; e0 += 4 * kWarps) {
		EntryInfo en = {nullptr, 0.0f, 0.0f};
		if (lane < 4 && e0 + lane * kWarps < n)
			en = entry_at(s, src, wt, begin + (uint32_t)(e0 + lane * kWarps));
		float v[4][LANES], t[4], w[4];
#pragma unroll
		for (int j = 0; j < 4; j++) {
			const float *row = (const float *)__shfl_sync(0xffffffffu, (unsigned long long)en.row, j);
			t[j] = __shfl_sync(0xffffffffu, en.t, j);
			w[j] = __shfl_sync(0xffffffffu, en.w, j);
#pragma unroll
			for (int l = 0; l < LANES; l++) {
				const int d = lane + 32 * l;
				v[j][l] = row && d < k ? __ldg(row + d) : 0.0f;
			}
		}
#pragma unroll
		for (int j = 0; j < 4; j++) {
			const int e = e0 + j * kWarps;
			if (e >= n)
				break;
#pragma unroll
			for (int l = 0; l < LANES; l++) {
				const int d = lane + 32 * l;
				if (d < dk) {
					Y[e * ldy + d] = v[j][l];
					*bad_y += isfinite(v[j][l]) ? 0.0f : 1.0f;
				}
			}
			if (lane == 0) {
				tout[e] = t[j];
				*bad_t += isfinite(t[j]) ? 0.0f : 1.0f;
				if (wout) {
					wout[e] = w[j];
					*bad_y += isfinite(w[j]) ? 0.0f : 1.0f;
				}
			}
		}
	}
}

/* A k x k system's upper triangle (rows of U, lda >= packed_width(k) apart) with b as column k, packed
 * into m (m.L >= packed_width(k)) in 16-byte pieces by the block: columns 4 floor(r / 4) to
 * packed_width(k) - 1 of each row r, so that a system copied whole reads no unwritten floats. b goes into
 * the piece holding column k (indexing a float4 at run time would go through local memory). */
__device__ __forceinline__ void store_packed_system(const float *U, int lda, const float *b, int k, const PackedRows &m)
{
	block_elements(k, packed_width(k) / 4, [&](int r, int q) {
		if (q < r >> 2)
			return;
		float4 v = *(const float4 *)(U + r * lda + 4 * q);
		const int bk = k - 4 * q;
		if (bk == 0)
			v.x = b[r];
		else if (bk == 1)
			v.y = b[r];
		else if (bk == 2)
			v.z = b[r];
		else if (bk == 3)
			v.w = b[r];
		*(float4 *)(m.row(r) + 4 * q) = v;
	});
}

/* x = Y^T z for a short row solved in its n x n form (z in s.x), unless its Cholesky failed (at pivot
 * `failed`); a failed row and a row whose x is not finite are recorded. */
__device__ __forceinline__ void short_row_x(const Shared &s, const float *Y, int ldy, int n, int k, int failed, float *x,
					    int64_t u, uint32_t *status)
{
	float nonfinite = 0.0f;
	if (!failed)
		for (int d = threadIdx.x; d < k; d += kThreads) {
			float sum = 0.0f;
			for (int e = 0; e < n; e++)
				sum += Y[e * ldy + d] * s.x[e];
			x[d] = sum;
			nonfinite += isfinite(sum) ? 0.0f : 1.0f;
		}
	if ((failed || block_sum<0>(s, nonfinite) != 0.0f) && threadIdx.x == 0)
		record_bad_row(status, u, failed, true, true);
}

/* A slot of the short rows' exact solves apart (ShortDeferred) for rows of at most nmax entries: the
 * packed system (width packed_width(nmax)), a 4-word header (n), then z (round4(nmax) floats). */
__host__ __device__ inline size_t short_slot_floats(int nmax)
{
	return packed_floats(nmax) + 4 + (size_t)round4(nmax);
}

/* The short rows' exact solves apart, as the long rows' are (Deferred), in three launches over a chunk of
 * their items, a slot an item: phase 1 gathers a row, checks it and writes K = Y Y^T + lambda I with t as
 * column n, packed, and the row to d.rows[slot]; short_cholesky_kernel solves the slots a warp each
 * (warp_cholesky, which fits nine n x n systems a multiprocessor where the block form's eight warps
 * mostly wait behind its panels' chain) and writes z; phase 2 gathers the row again (from L2: Y is the
 * other side's factors) and writes x = Y^T z. d.rows[slot] stays ~0 for a row reported in phase 1 and is
 * cleared for one the warp reports, so phase 2 skips it. Phase 0: the block solves K itself. */
struct ShortDeferred {
	Deferred d;
	int nmax;
	int64_t slot;
	__device__ float *base() const
	{
		return d.sys + (size_t)slot * short_slot_floats(nmax);
	}
	__device__ PackedRows system() const
	{
		return {base(), packed_width(nmax)};
	}
	__device__ float *header() const
	{
		return base() + packed_floats(nmax);
	}
	__device__ float *z() const
	{
		return header() + 4;
	}
};

/* Row u's exact solve in the n x n form (explicit feedback, no G), its products in float32 FFMA. A row
 * the k x k form could not solve is reported as that form would report it: a non-finite lambda or entry
 * of Y makes the system non-finite, a non-finite target the right-hand side; lambda <= 0 leaves Y^T Y +
 * lambda I (of rank n < k plus lambda) not positive definite. x_u is then not written. */
template <int LANES, int PHASE>
__device__ void solve_short_row(const Shared &s, const RowSource &src, const Weights &wt, uint32_t begin, int n, int k,
				float lambda, int64_t u, float *x, uint32_t *status, const ShortDeferred &sd)
{
	const int tid = threadIdx.x;
	const int dk = round4(k), ldy = dk + 4, n4 = round4(n), ldk = n4 + 4;
	float *const K = s.U, *const Y = s.U + short_row_front(n, k, true);
	float bad_y = 0.0f, bad_t = 0.0f;
	gather_short<LANES>(s, src, wt, begin, n, k, Y, ldy, s.b, &bad_y, &bad_t);
	if constexpr (PHASE == 2) { /* z from the warps' solve: x = Y^T z */
		for (int d = tid; d < n; d += kThreads)
			s.x[d] = sd.z()[d];
		__syncthreads();
		short_row_x(s, Y, ldy, n, k, 0, x, u, status);
		return;
	}
	const bool finite_a = block_sum<0>(s, bad_y) == 0.0f && isfinite(lambda); /* also: Y and t are in */
	const bool finite_b = block_sum<1>(s, bad_t) == 0.0f;
	if (!finite_a || !finite_b || !(lambda > 0.0f)) {
		/* not finite: the k x k form's pivots or solution would be (its x written only for b); lambda
		 * <= 0: not positive definite */
		if (finite_a && !finite_b && lambda > 0.0f)
			for (int d = tid; d < k; d += kThreads)
				x[d] = __int_as_float(0x7fffffff);
		if (tid == 0)
			record_bad_row(status, u, !finite_a || lambda <= 0.0f ? 1 : 0, finite_a, finite_b);
		return;
	}
	/* K's upper triangle in 4 x 4 tiles, 16-byte loads along the rows of Y. Where the tiles are fewer than
	 * half the block's threads, P = 2 or 4 adjacent lanes share a tile, each over every P-th group of four
	 * columns of Y, and shuffles add their sums: a row of 40 entries has 55 tiles, which left 201 of the
	 * 256 threads idle while the others ran the whole length of k. */
	const int T = n4 / 4, ntiles = T * (T + 1) / 2;
	const int P = 4 * ntiles <= kThreads ? 4 : 2 * ntiles <= kThreads ? 2 : 1, span = P * ntiles;
	for (int base = 0; base < span; base += kThreads) { /* every lane of a warp to the shuffles */
		const int idx = base + tid, part = idx & (P - 1);
		const bool active = idx < span;
		int tl, ti;
		upper_tile(active ? idx / P : 0, T, &tl, &ti);
		const int e1 = 4 * tl, e2 = 4 * ti;
		int ra[4], rb[4];
#pragma unroll
		for (int r = 0; r < 4; r++) { /* rows past n: read row n - 1, not stored */
			ra[r] = (e1 + r < n ? e1 + r : n - 1) * ldy;
			rb[r] = (e2 + r < n ? e2 + r : n - 1) * ldy;
		}
		float acc[4][4] = {};
		for (int d = 4 * part; active && d < dk; d += 4 * P) {
			float4 a[4], b[4];
#pragma unroll
			for (int r = 0; r < 4; r++) {
				a[r] = *(const float4 *)(Y + ra[r] + d);
				b[r] = *(const float4 *)(Y + rb[r] + d);
			}
#pragma unroll
			for (int r = 0; r < 4; r++)
#pragma unroll
				for (int c = 0; c < 4; c++)
					acc[r][c] += a[r].x * b[c].x + a[r].y * b[c].y + a[r].z * b[c].z + a[r].w * b[c].w;
		}
		for (int m = 1; m < P; m <<= 1) /* P is the block's: the whole warp shuffles or none of it */
#pragma unroll
			for (int r = 0; r < 4; r++)
#pragma unroll
				for (int c = 0; c < 4; c++)
					acc[r][c] += __shfl_xor_sync(0xffffffffu, acc[r][c], m);
		if (!active || part != 0)
			continue;
#pragma unroll
		for (int r = 0; r < 4; r++)
#pragma unroll
			for (int c = 0; c < 4; c++) {
				const int i = e1 + r, j = e2 + c;
				if (i < n && j >= i)
					K[i * ldk + j] = j < n ? acc[r][c] + (i == j ? lambda : 0.0f) : 0.0f;
			}
	}
	__syncthreads();
	if constexpr (PHASE == 1) { /* K's upper triangle and t (column n), packed, for the warps' solve */
		store_packed_system(K, ldk, s.b, n, sd.system());
		if (tid == 0) {
			*(int4 *)sd.header() = make_int4(n, 0, 0, 0);
			sd.d.rows[sd.slot] = (uint32_t)u;
		}
		return;
	} else {
		Shared sk = s;
		sk.U = K;
		sk.lda = ldk;
		short_row_x(s, Y, ldy, n, k, solve_cholesky(sk, n) /* z into s.x */, x, u, status);
	}
}

/* The sum over the short row's gathered Y of c_e Y_e, for the coefficients c(e) (each lane's share of
 * Y_e in yv): warp w takes entries w, w + kWarps, ..., keeps its columns' partial sums in registers and
 * writes them to part (row w of kWarps x kp); the caller synchronises and adds the rows. */
template <int LANES, typename C>
__device__ inline void warp_partials(const float *Y, int ldy, int n, int k, int kp, float *part, C coef)
{
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	float acc[LANES];
#pragma unroll
	for (int l = 0; l < LANES; l++)
		acc[l] = 0.0f;
#pragma unroll 2
	for (int e = warp; e < n; e += kWarps) {
		float yv[LANES];
#pragma unroll
		for (int l = 0; l < LANES; l++) {
			const int d = lane + 32 * l;
			yv[l] = d < k ? Y[e * ldy + d] : 0.0f;
		}
		const float c = coef(e, yv);
#pragma unroll
		for (int l = 0; l < LANES; l++)
			acc[l] += yv[l] * c;
	}
#pragma unroll
	for (int l = 0; l < LANES; l++) {
		const int d = lane + 32 * l;
		if (d < kp)
			part[warp * kp + d] = acc[l];
	}
}

/* v plus column d of the warps' partial sums that warp_partials wrote (part, kWarps x kp), added in warp
 * order. */
__device__ inline float partials_sum(float v, const float *part, int kp, int d)
{
#pragma unroll
	for (int w = 0; w < kWarps; w++)
		v += part[w * kp + d];
	return v;
}

/* Row u's CG steps, matrix-free: M p = G p + Y^T W (Y p) + lambda p from the row's gathered Y and weights
 * W (1 for explicit feedback, alpha r for implicit), 2nk multiply-adds a step (plus k^2 with G) where
 * forming M costs n k^2 (the CPU rowsolve's matrix-free form; the same iterates as CG on the formed
 * system, up to rounding). Each warp forms w_e (Y_e . p) Y_e for its entries with the row's p in
 * registers (the dot product by shuffles), and p_c G_c for its rows of G (in shared memory in front of Y's
 * rows, G being symmetric), so that a step's chain of dependent operations is a warp's (n + k) / kWarps
 * rows, not one thread's; b_u = Y^T t the same way. x_u is written, and a row reported, as
 * solve_and_store does for CG. GW: weights or G may be present (an instance of its own, so that the
 * explicit rows' code keeps its registers). */
template <int LANES, bool GW>
__device__ void cg_short_row(const Shared &s, const RowSource &src, const Weights &wt, const float *Gs, bool g_finite,
			     int nfront, uint32_t begin, int n, int k, float lambda, int64_t u, float *x, int steps,
			     uint32_t *status)
{
	const int tid = threadIdx.x, lane = tid & 31, kp = s.kp, ldy = round4(k) + 4, n4 = round4(nfront);
	float *const t = s.U, *const wv = s.U + n4, *const part = s.U + 2 * n4;
	if constexpr (!GW)
		Gs = nullptr;
	float *const Y = s.U + short_row_front(nfront, k, false) + (Gs ? (size_t)k * ldy : 0);
	const bool weighted = GW && wt.mode == 1;
	float bad_y = 0.0f, bad_t = 0.0f;
	gather_short<LANES>(s, src, wt, begin, n, k, Y, ldy, t, &bad_y, &bad_t, weighted ? wv : nullptr);
	const bool finite_a = block_sum<0>(s, bad_y) == 0.0f && isfinite(lambda) && g_finite; /* also: Y, t, w are in */
	warp_partials<LANES>(Y, ldy, n, k, kp, part, [&](int e, const float(&)[LANES]) { return t[e]; });
	__syncthreads();
	float nonfinite_b = 0.0f;
	for (int d = tid; d < kp; d += kThreads) {
		const float v = d < k ? partials_sum(0.0f, part, kp, d) : 0.0f;
		s.b[d] = v;
		s.x[d] = d < k ? x[d] : 0.0f;
		nonfinite_b += isfinite(v) ? 0.0f : 1.0f;
	}
	const bool finite_b = block_sum<1>(s, nonfinite_b) == 0.0f; /* also: b and x are in, part is read */
	const int failed = solve_cg_with(s, k, steps, [&](const float *p, float *q) {
		float pr[LANES];
#pragma unroll
		for (int l = 0; l < LANES; l++) {
			const int d = lane + 32 * l;
			pr[l] = d < k ? p[d] : 0.0f;
		}
		const int g_rows = Gs ? k : 0; /* G's rows first, then Y's */
		warp_partials<LANES>(Gs ? Gs : Y, ldy, g_rows + n, k, kp, part, [&](int e, const float(&yv)[LANES]) {
			if (GW && e < g_rows) /* G's row e */
				return p[e];
			float dot = 0.0f;
#pragma unroll
			for (int l = 0; l < LANES; l++)
				dot += yv[l] * pr[l];
			dot = warp_sum(dot);
			return weighted ? wv[e - g_rows] * dot : dot;
		});
		__syncthreads();
		for (int d = tid; d < k; d += kThreads) {
			q[d] = partials_sum(lambda * p[d], part, kp, d);
		}
		__syncthreads();
	});
	float nonfinite_x = 0.0f;
	for (int d = tid; d < k; d += kThreads) {
		x[d] = s.x[d];
		nonfinite_x += isfinite(s.x[d]) ? 0.0f : 1.0f;
	}
	/* failed first: CG may have returned straight after a block_sum<0>, whose buffer a second one at once
	 * would overwrite under slower threads' reads (failed is the same in every thread) */
	if ((failed || block_sum<0>(s, nonfinite_x) != 0.0f) && tid == 0)
		record_bad_row(status, u, failed, finite_a, finite_b);
}

/* The items of the short rows (single-part), solved by Cholesky (CHOL, pb.cholesky) or CG (GW: implicit
 * feedback or G); count items from pb.items. nmax: the longest of the launch's rows, which sizes Y and K.
 * Without G, one block an item. With G, a block loads G into shared memory once (k rows in Y's layout,
 * columns k..round4(k) zero, in front of Y) and solves items blockIdx.x, blockIdx.x + gridDim.x, ...:
 * loading G for every row (k^2 floats) cost as much as the solve of a row of a few dozen entries. */
template <int LANES, bool CHOL, bool GW, int PHASE = 0>
__global__ void __launch_bounds__(kThreads, 4) short_rows_kernel(const __grid_constant__ starfa_cuda_rowsolve pb,
								 int nmax, int64_t count, Deferred defer, uint32_t *status)
{
	extern __shared__ __align__(16) unsigned char smem[];
	const int k = (int)pb.k, kp = (int)padded(k + 1);
	const Shared s = carve(smem, kp, false, short_row_floats(nmax, k, CHOL, pb.G != nullptr));
	const RowSource src = {pb.ntiles, pb.tiles};
	const Weights wt = {pb.implicit ? 1 : 0, pb.alpha, pb.mu};
	float *Gs = nullptr;
	bool g_finite = true;
	if constexpr (GW) {
		if (pb.G) {
			const int dk = round4(k), ldy = dk + 4;
			Gs = s.U + short_row_front(nmax, k, false);
			float bad = 0.0f;
			block_elements(k, dk, [&](int r, int c) {
				const float g = c < k ? __ldg(pb.G + (int64_t)r * k + c) : 0.0f;
				Gs[r * ldy + c] = g;
				bad += isfinite(g) ? 0.0f : 1.0f;
			});
			g_finite = block_sum<0>(s, bad) == 0.0f; /* also: G is in */
		}
	}
	const int64_t stride = GW && pb.G ? gridDim.x : count;
	for (int64_t it = blockIdx.x; it < count; it += stride) {
		const uint32_t *item = pb.items + it * STARFA_ROWSOLVE_ITEM_WORDS;
		const uint32_t u = item[0], begin = item[1], end = item[2];
		if (PHASE == 2 && defer.rows[it] == UINT32_MAX)
			continue; /* reported by phase 1 or by the warp's solve */
		if (it != blockIdx.x)
			__syncthreads(); /* the previous row's readers of the shared memory are done */
		row_sources(s, src, u);
		const float lambda = __ldg(pb.lambda + (int64_t)u * pb.info_ld);
		if constexpr (CHOL) /* explicit feedback without G only (short_rows_first) */
			solve_short_row<LANES, PHASE>(s, src, wt, begin, (int)(end - begin), k, lambda, u,
						      pb.X + (int64_t)u * pb.ldx, status, ShortDeferred{defer, nmax, it});
		else
			cg_short_row<LANES, GW>(s, src, wt, Gs, g_finite, Gs ? nmax : (int)(end - begin), begin,
					    (int)(end - begin), k, lambda, u, pb.X + (int64_t)u * pb.ldx, pb.cg_steps,
					    status);
	}
}

/* The fused kernel's padded width: one column more than k, for b_u (gram_rows). */
__host__ __device__ inline int rowsolve_kp(int64_t k)
{
	return (int)padded(k + 1);
}

template <int FPW, int LANES, int PREC>
__global__ void __launch_bounds__(kThreads, FPW >= 7 ? 1 : 2) rowsolve_kernel(const __grid_constant__ starfa_cuda_rowsolve pb,
							   Partials parts, Deferred defer, uint32_t *status)
{
	extern __shared__ __align__(16) unsigned char smem[];
	const int kp = rowsolve_kp(pb.k), k = (int)pb.k, tid = threadIdx.x;
	const Shared s = carve(smem, kp);
	const uint32_t *item = pb.items + (int64_t)blockIdx.x * STARFA_ROWSOLVE_ITEM_WORDS;
	const uint32_t u = item[0], begin = item[1], end = item[2], part = item[3], first = item[4], nparts = item[5];
	const RowSource src = {pb.ntiles, pb.tiles};
	row_sources(s, src, u);
	const Weights wt = {pb.implicit ? 1 : 0, pb.alpha, pb.mu};
	Acc<FPW> acc;
	gram_rows<FPW, LANES, PREC>(s, src, pb.k, wt, begin, end, acc);
	const float lambda = __ldg(pb.lambda + (int64_t)u * pb.info_ld);
	bool finite_a;
	if (nparts > 1) {
		/* A segment: write the partial sums; the row's last segment to finish goes on. */
		store_blocks<FPW>(acc, kp / 16, parts.A + (size_t)part * kp * kp, kp, false);
		__threadfence();
		__syncthreads();
		if (tid == 0)
			s.red[kFlagLast] = atomicAdd(parts.counter + first, 1u) == nparts - 1 ? 1.0f : 0.0f;
		__syncthreads();
		if (s.red[kFlagLast] == 0.0f)
			return;
		__threadfence();
		block_elements(kp, kp, [&](int r, int c) {
			if (r / 16 > c / 16)
				return; /* a lower fragment: not written */
			float sum = 0.0f;
			for (uint32_t q = 0; q < nparts; q++)
				sum += __ldcg(parts.A + (size_t)(first + q) * kp * kp + r * kp + c);
			s.U[r * s.lda + c] = sum;
			if (r / 16 < c / 16)
				s.U[c * s.lda + r] = sum;
		});
		__syncthreads();
		for (int d = tid; d < kp; d += kThreads) /* b_u: column k of the sum */
			s.b[d] = d < k ? s.U[d * s.lda + k] : 0.0f;
		__syncthreads();
		finite_a = finish_system(s, k, lambda, pb.G);
	} else {
		finite_a = block_sum<0>(s, store_system<FPW>(acc, s, k, lambda, pb.G) ? 0.0f : 1.0f) == 0.0f;
	}
	if (defer.sys) {
		/* the finished system's upper triangle and b (column k), packed, in 16-byte pieces */
		const PackedRows m = {defer.sys + (size_t)blockIdx.x * deferred_floats(k), packed_width(k)};
		store_packed_system(s.U, s.lda, s.b, k, m);
		if (tid == 0) {
			*(float4 *)(m.U + packed_floats(k)) = make_float4(finite_a ? 1.0f : 0.0f, 0.0f, 0.0f, 0.0f);
			defer.rows[blockIdx.x] = u;
		}
		return;
	}
	solve_and_store<LANES, true>(s, k, finite_a, u, pb.cholesky != 0, pb.cg_steps, pb.X + (int64_t)u * pb.ldx, status);
}

template <int FPW, int LANES, int PREC>
cudaError_t launch_rowsolve(const starfa_cuda_rowsolve *pb, Partials parts, Deferred defer, uint32_t *status,
			    size_t bytes, cudaStream_t stream)
{
	cudaError_t err = prepare(rowsolve_kernel<FPW, LANES, PREC>, bytes);
	if (err != cudaSuccess)
		return err;
	rowsolve_kernel<FPW, LANES, PREC><<<(unsigned)pb->nitems, kThreads, bytes, stream>>>(*pb, parts, defer, status);
	return cudaGetLastError();
}

/* The systems the Gram kernel left in defer's slots, a warp a system (warp_cholesky). */
__global__ void __launch_bounds__(32) rowsolve_cholesky_kernel(const __grid_constant__ starfa_cuda_rowsolve pb,
							       Deferred defer, uint32_t *status)
{
	extern __shared__ __align__(16) float wsm[];
	const uint32_t u = defer.rows[blockIdx.x];
	if (u == UINT32_MAX)
		return;
	const int k = (int)pb.k, n = (int)deferred_floats(k); /* the packed system and its flag */
	const WarpSystem w = warp_system(wsm, k);
	const float *const src = defer.sys + (size_t)blockIdx.x * n;
	for (int i = 4 * threadIdx.x; i < n; i += 128)
		cp_async16(wsm + i, src + i);
	cp_async_wait_all();
	__syncwarp();
	const bool finite_a = *w.flag != 0.0f;
	warp_solve_and_store(w.m, k, w.inv, w.x, [&] { return finite_a; }, u, pb.X + (int64_t)u * pb.ldx, status);
}

cudaError_t launch_rowsolve_cholesky(const starfa_cuda_rowsolve *pb, Deferred defer, uint32_t *status,
				     cudaStream_t stream)
{
	const size_t bytes = warp_system_floats(pb->k) * sizeof(float);
	cudaError_t err = prepare(rowsolve_cholesky_kernel, bytes);
	if (err != cudaSuccess)
		return err;
	rowsolve_cholesky_kernel<<<(unsigned)pb->nitems, 32, bytes, stream>>>(*pb, defer, status);
	return cudaGetLastError();
}

/* The scratch of the exact solves apart (Deferred): slots for up to nitems systems, at most
 * kDeferredBytes of them, fewer where the device has not that much free (down to kDeferredMin slots).
 * Returns the slots a chunk, or 0 when none could be had: the Gram kernel's blocks then solve their
 * systems themselves. */
constexpr size_t kDeferredBytes = (size_t)512 << 20;
constexpr int64_t kDeferredMin = 1024;

int64_t deferred_alloc(size_t slot, int64_t nitems, Deferred *defer, cudaStream_t stream)
{
	int64_t n = (int64_t)(kDeferredBytes / (slot + sizeof(uint32_t)));
	if (n > nitems)
		n = nitems;
	for (; n >= kDeferredMin || n == nitems; n /= 2) {
		void *p = nullptr;
		if (cudaMallocAsync(&p, (size_t)n * (slot + sizeof(uint32_t)), stream) == cudaSuccess) {
			defer->sys = (float *)p;
			defer->rows = (uint32_t *)((char *)p + (size_t)n * slot);
			return n;
		}
		(void)cudaGetLastError(); /* out of memory is not sticky: clear it for the launches' checks */
	}
	return 0;
}

/* An item's length, or INT64_MAX for a segment of a long row: non-increasing along the work list. */
int64_t item_length(const uint32_t *items, int64_t i)
{
	const uint32_t *it = items + i * STARFA_ROWSOLVE_ITEM_WORDS;
	return it[5] == 1 ? (int64_t)it[2] - (int64_t)it[1] : INT64_MAX;
}

/* The first item in [lo, hi) no longer than n. */
int64_t first_at_most(const uint32_t *items, int64_t lo, int64_t hi, int64_t n)
{
	while (lo < hi) {
		const int64_t mid = lo + (hi - lo) / 2;
		if (item_length(items, mid) <= n)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* The dynamic shared memory of a short rows' launch whose longest row has n entries. */
template <bool CHOL>
size_t short_rows_bytes(const starfa_cuda_rowsolve &pb, int64_t n)
{
	return layout(rowsolve_kp(pb.k), false, short_row_floats(n, pb.k, CHOL, pb.G != nullptr)).bytes;
}

/* The short rows' n x n systems left by phase 1 (ShortDeferred), a warp a system: z written after the
 * system, or the row reported and its slot cleared for phase 2. */
__global__ void __launch_bounds__(32) short_cholesky_kernel(Deferred defer, int nmax, uint32_t *status)
{
	extern __shared__ __align__(16) float wsm[];
	const uint32_t u = defer.rows[blockIdx.x];
	if (u == UINT32_MAX)
		return;
	const ShortDeferred sd = {defer, nmax, (int64_t)blockIdx.x};
	const int n = *(const int *)sd.header(), lane = threadIdx.x;
	const PackedRows src = sd.system();
	const WarpSystem w = warp_system(wsm, nmax); /* rows as wide as the slot's */
	for (int r = 0; r < n; r++) /* what phase 1 wrote: columns 4 floor(r / 4) to packed_width(n) - 1 */
		for (int q = (r >> 2) + lane; q < packed_width(n) / 4; q += 32)
			cp_async16(w.m.row(r) + 4 * q, src.row(r) + 4 * q);
	cp_async_wait_all();
	__syncwarp();
	if (warp_cholesky(w.m, n, w.inv, w.x)) {
		if (lane == 0) {
			record_bad_row(status, u, 1, true, true);
			defer.rows[blockIdx.x] = UINT32_MAX;
		}
		return;
	}
	for (int d = lane; d < n; d += 32)
		sd.z()[d] = w.x[d];
}

template <int LANES, bool CHOL, bool GW>
cudaError_t launch_short_rows(const starfa_cuda_rowsolve &pb, int64_t first, int64_t last, uint32_t *status,
			      cudaStream_t stream)
{
	starfa_cuda_rowsolve q = pb;
	q.items = pb.items + first * STARFA_ROWSOLVE_ITEM_WORDS;
	const int nmax = (int)item_length(pb.items_host, first);
	const size_t bytes = short_rows_bytes<CHOL>(pb, nmax);
	cudaError_t err = prepare(short_rows_kernel<LANES, CHOL, GW>, bytes);
	if (err != cudaSuccess)
		return err;
	const int64_t count = last - first;
	int64_t blocks = count;
	if (GW && pb.G) { /* a block a row until every multiprocessor is full, then rows in turn */
		int per_sm = 0, dev = 0, sms = 0;
		if ((err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, short_rows_kernel<LANES, CHOL, GW>,
									 kThreads, bytes)) != cudaSuccess ||
		    (err = cudaGetDevice(&dev)) != cudaSuccess ||
		    (err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
			return err;
		const int64_t resident = (int64_t)(per_sm > 0 ? per_sm : 1) * sms;
		blocks = count < resident ? count : resident;
	}
	Deferred defer = {nullptr, nullptr};
	if constexpr (CHOL) {
		/* exact solves apart, a chunk of rows at a time: K by the blocks, its Cholesky a warp a row, x by
		 * the blocks (ShortDeferred) */
		const int64_t per =
			pb.fused_cholesky ? 0 : deferred_alloc(short_slot_floats(nmax) * sizeof(float), count, &defer, stream);
		if (per > 0) {
			const size_t wbytes = warp_system_floats(nmax) * sizeof(float);
			err = prepare(short_cholesky_kernel, wbytes);
			if (err == cudaSuccess)
				err = prepare(short_rows_kernel<LANES, CHOL, GW, 1>, bytes);
			if (err == cudaSuccess)
				err = prepare(short_rows_kernel<LANES, CHOL, GW, 2>, bytes);
			for (int64_t a = 0; err == cudaSuccess && a < count; a += per) {
				starfa_cuda_rowsolve c = q;
				c.items = q.items + a * STARFA_ROWSOLVE_ITEM_WORDS;
				const int64_t n = count - a < per ? count - a : per;
				if ((err = cudaMemsetAsync(defer.rows, 0xff, (size_t)n * sizeof(uint32_t), stream)) != cudaSuccess)
					break;
				short_rows_kernel<LANES, CHOL, GW, 1><<<(unsigned)n, kThreads, bytes, stream>>>(c, nmax, n, defer, status);
				short_cholesky_kernel<<<(unsigned)n, 32, wbytes, stream>>>(defer, nmax, status);
				short_rows_kernel<LANES, CHOL, GW, 2><<<(unsigned)n, kThreads, bytes, stream>>>(c, nmax, n, defer, status);
				err = cudaGetLastError();
			}
			cudaError_t e = cudaFreeAsync(defer.sys, stream);
			return err != cudaSuccess ? err : e;
		}
	}
	short_rows_kernel<LANES, CHOL, GW><<<(unsigned)blocks, kThreads, bytes, stream>>>(q, nmax, count, defer, status);
	return cudaGetLastError();
}

/* Items [first, nitems) by the short rows' kernel, the longest first, one launch per number of blocks a
 * multiprocessor holds: a launch's shared memory is sized for its longest row, so the rows short enough
 * for one block more a multiprocessor start a launch of their own. The blocks a multiprocessor holds are
 * the kernel's own limit (registers, threads: the occupancy query without shared memory) and the shared
 * memory's (the CUDA runtime's dynamic shared memory a block may have at B blocks a multiprocessor, which
 * the runtime caps at the kernel's dynamic shared memory attribute as it stands: 48 KiB, or the last
 * launch's size, which is under 48 KiB at k = 100 and below. Raised to the device's opt-in maximum first,
 * the split moved to rows of about 74 entries at four blocks, and the short rows' kernels got slower on
 * the Netflix shape, 25.4 -> 28.7 ms, bench/ALS.md: so the query keeps the cap). Launches by powers of
 * two of the length (48, 96, ...) left the exact solves' rows of 49 to 65 entries at k = 100 at three
 * blocks a multiprocessor where their shared memory allows four: on the Netflix shape their kernels took
 * 26.2-26.5 ms, now 24.6-25.2 (bench/ALS.md). */
template <int LANES, bool CHOL, bool GW>
cudaError_t run_short_range(const starfa_cuda_rowsolve &pb, int64_t first, uint32_t *status, cudaStream_t stream)
{
	/* avail[B - 1]: the dynamic shared memory a block may have with B blocks a multiprocessor */
	constexpr int kMaxPerSm = 8;
	size_t avail[kMaxPerSm];
	int cap = 0;
	cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&cap, short_rows_kernel<LANES, CHOL, GW>, kThreads, 0);
	cap = cap < kMaxPerSm ? cap : kMaxPerSm;
	for (int B = 1; B <= cap && err == cudaSuccess; B++)
		err = cudaOccupancyAvailableDynamicSMemPerBlock(&avail[B - 1], short_rows_kernel<LANES, CHOL, GW>, B, kThreads);
	if (err != cudaSuccess)
		return err;
	const auto per_sm = [&](int64_t n) {
		const size_t bytes = short_rows_bytes<CHOL>(pb, n);
		int B = cap;
		while (B > 0 && bytes > avail[B - 1])
			B--;
		return (int64_t)B;
	};
	for (int64_t a = first, b; a < pb.nitems && err == cudaSuccess; a = b) {
		const int64_t na = item_length(pb.items_host, a), blocks = per_sm(na);
		/* the longest row below na that one block more a multiprocessor would hold (per_sm does not grow
		 * with the length): none, and the launch takes every item left */
		int64_t lo = 0, hi = na - 1;
		while (lo < hi) {
			const int64_t mid = lo + (hi - lo + 1) / 2;
			if (per_sm(mid) > blocks)
				lo = mid;
			else
				hi = mid - 1;
		}
		b = lo > 0 && per_sm(lo) > blocks ? first_at_most(pb.items_host, a, pb.nitems, lo) : pb.nitems;
		err = launch_short_rows<LANES, CHOL, GW>(pb, a, b, status, stream);
	}
	return err;
}

cudaError_t run_short_rows(const starfa_cuda_rowsolve &pb, int64_t first, uint32_t *status, cudaStream_t stream)
{
	const int kp = rowsolve_kp(pb.k);
/* L: the Gram kernel's passes over a row */
#define LAUNCH(F, L) (pb.cholesky ? run_short_range<L, true, false>(pb, first, status, stream)                    \
		      : pb.implicit || pb.G ? run_short_range<L, false, true>(pb, first, status, stream) \
					    : run_short_range<L, false, false>(pb, first, status, stream))
	return STARFA_FPW_DISPATCH(kp, LAUNCH);
#undef LAUNCH
}

/* Where the short rows start in the work list (pb.nitems: none): rows of fewer entries than short_rows
 * (and, for Cholesky's n x n form, than k) whose Y and K fit the shared memory the Gram kernel has (with G,
 * the device's opt-in shared memory). CG
 * takes longer rows too: matrix-free, a step costs 2nk multiply-adds, where forming the system costs nk^2. */
int64_t short_rows_first(const starfa_cuda_rowsolve &pb)
{
	if ((pb.cholesky && (pb.implicit || pb.G)) || pb.short_rows <= 0 || !pb.items_host)
		return pb.nitems;
	const Layout L = layout(rowsolve_kp(pb.k));
	size_t room = (L.vec - L.u) / sizeof(float);
	if (pb.G) {
		/* With G (k rows of it in front of Y) the Gram kernel's room held rows of at most 96 entries at
		 * k = 100; the device's whole opt-in shared memory lets them reach the 1.5 k threshold. Measured on
		 * the Netflix shape on an H100 (bench/ALS.md, 2026-11-27): implicit ALS about 1% faster (0.1116 /
		 * 0.1126 -> 0.1103 / 0.1108 s an iteration); explicit rows (no G) did not gain and keep the Gram room. */
		int dev = 0, optin = 0;
		const Layout S = layout(rowsolve_kp(pb.k), false, 4);
		if (cudaGetDevice(&dev) == cudaSuccess &&
		    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) == cudaSuccess &&
		    (size_t)optin > S.bytes - S.vec && ((size_t)optin - (S.bytes - S.vec)) / sizeof(float) > room)
			room = ((size_t)optin - (S.bytes - S.vec)) / sizeof(float);
	}
	int64_t n = (pb.cholesky && pb.short_rows > pb.k ? pb.k : pb.short_rows) - 1;
	while (n > 0 && short_row_floats(n, pb.k, pb.cholesky != 0, pb.G != nullptr) > room)
		n--;
	return n > 0 ? first_at_most(pb.items_host, 0, pb.nitems, n) : pb.nitems;
}

} // namespace

extern "C" int starfa_cuda_rowsolve_short_rows(int64_t k, int cholesky)
{
	if (k < 1 || k > STARFA_CUDA_ALS_MAX_K)
		return 0;
	return (int)(cholesky ? (4 * k + 4) / 5 : (3 * k + 1) / 2);
}

extern "C" cudaError_t starfa_cuda_rowsolve_run(const starfa_cuda_rowsolve *pb, uint32_t *status, cudaStream_t stream)
{
	if (pb->k < 1 || pb->k > STARFA_CUDA_ALS_MAX_K || pb->ntiles < 0 || pb->ntiles > STARFA_CUDA_ROWSOLVE_MAX_TILES ||
	    pb->nitems < 0 || pb->nitems > INT_MAX || (pb->nparts > 0 && !pb->items) ||
	    !starfa_gram_precision_valid(pb->precision))
		return cudaErrorInvalidValue;
	cudaError_t err = status_init(status, stream);
	if (err != cudaSuccess || pb->nitems == 0)
		return err;
	const int kp = rowsolve_kp(pb->k);
	const size_t bytes = layout(kp).bytes;
	Partials parts = {nullptr, nullptr};
	void *scratch = nullptr;
	if (pb->nparts > 0) {
		size_t a = (size_t)pb->nparts * kp * kp * sizeof(float);
		err = cudaMallocAsync(&scratch, a + (size_t)pb->nparts * sizeof(unsigned), stream);
		if (err != cudaSuccess)
			return err;
		parts.A = (float *)scratch;
		parts.counter = (unsigned *)((char *)scratch + a);
		err = cudaMemsetAsync(parts.counter, 0, (size_t)pb->nparts * sizeof(unsigned), stream);
	}
	/* the rows that take the Gram kernel, then the short ones (a suffix of the list) */
	starfa_cuda_rowsolve gram = *pb;
	gram.nitems = short_rows_first(*pb);
	Deferred defer = {nullptr, nullptr};
	const int64_t per = err == cudaSuccess && gram.nitems > 0 && pb->cholesky && !pb->fused_cholesky
				    ? deferred_alloc(deferred_floats(pb->k) * sizeof(float), gram.nitems, &defer, stream)
				    : 0;
#define LAUNCH(F, L) STARFA_PREC_DISPATCH(pb->precision, launch_rowsolve, F, L, &chunk, parts, defer, status, bytes, stream)
	/* exact solves apart: the Gram kernel over a chunk of items, then a warp a system over its slots */
	for (int64_t a = 0; err == cudaSuccess && a < gram.nitems && per > 0; a += per) {
		starfa_cuda_rowsolve chunk = gram;
		chunk.items = pb->items + a * STARFA_ROWSOLVE_ITEM_WORDS;
		chunk.nitems = gram.nitems - a < per ? gram.nitems - a : per;
		err = cudaMemsetAsync(defer.rows, 0xff, (size_t)chunk.nitems * sizeof(uint32_t), stream);
		if (err == cudaSuccess)
			err = STARFA_FPW_DISPATCH(kp, LAUNCH);
		if (err == cudaSuccess)
			err = launch_rowsolve_cholesky(&chunk, defer, status, stream);
	}
	if (err == cudaSuccess && gram.nitems > 0 && per == 0) {
		starfa_cuda_rowsolve &chunk = gram;
		err = STARFA_FPW_DISPATCH(kp, LAUNCH);
	}
#undef LAUNCH
	if (defer.sys) {
		cudaError_t e = cudaFreeAsync(defer.sys, stream);
		if (err == cudaSuccess)
			err = e;
	}
	if (err == cudaSuccess && gram.nitems < pb->nitems)
		err = run_short_rows(*pb, gram.nitems, status, stream);
	if (scratch) {
		cudaError_t e = cudaFreeAsync(scratch, stream);
		if (err == cudaSuccess)
			err = e;
	}
	return err;
}
