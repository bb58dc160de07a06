/* Model quality on test entries: RMSE for explicit and non-negative models; precision, MAP and NDCG at k
 * for implicit ones, defined as PyPI implicit's ranking_metrics_at_k defines them so the numbers
 * compare. */
#include "model/model.h"

#include "cpu/topk.h"

#include <math.h>
#include <string.h>

/* Index of every test row (or column) in the model, -1 when unknown. */
static int32_t *match_side(const starfa_idmap *test_ids, int64_t test_n, const starfa_idmap *model_ids, int64_t model_n)
{
	int32_t *map = starfa_malloc((size_t)test_n, sizeof *map);
	if (!map)
		return NULL;
	for (int64_t i = 0; i < test_n; i++) {
		int64_t j = i < model_n ? i : -1;
		if (test_ids && model_ids) {
			const char *name = starfa_idmap_name(test_ids, i);
			j = name ? starfa_idmap_find(model_ids, name) : -1;
		}
		map[i] = (int32_t)j;
	}
	return map;
}

int starfa_match_entries(const starfa_coo *test, const starfa_idmap *users, const starfa_idmap *items,
			 int64_t nusers, int64_t nitems, struct starfa_matched *out)
{
	memset(out, 0, sizeof *out);
	int32_t *rows = match_side(test->row_ids, test->nrows, users, nusers);
	int32_t *cols = rows ? match_side(test->col_ids, test->ncols, items, nitems) : NULL;
	out->user = starfa_malloc((size_t)test->nnz, sizeof *out->user);
	out->item = starfa_malloc((size_t)test->nnz, sizeof *out->item);
	if (!rows || !cols || !out->user || !out->item) {
		free(rows);
		free(cols);
		starfa_matched_free(out);
		return STARFA_ENOMEM;
	}
	for (int64_t e = 0; e < test->nnz; e++) {
		out->user[e] = rows[test->row[e]];
		out->item[e] = cols[test->col[e]];
	}
	out->n = test->nnz;
	out->val = test->val;
	free(rows);
	free(cols);
	return 0;
}

void starfa_matched_free(struct starfa_matched *m)
{
	free(m->user);
	free(m->item);
	free(m->start);
	free(m->by_user);
	memset(m, 0, sizeof *m);
}

static int compare_int32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

/* Ranking metrics: the users are cut into this many chunks (fewer when there are fewer users), each
 * with its own partial sums. */
#define RANK_CHUNKS 256

struct rank_part {
	double relevant, pr_div, mean_ap, ndcg;
	int64_t users;
	int failed;
};

struct rank_ctx {
	const struct starfa_factors *f;
	const struct starfa_top_k_lists *lists; /* NULL: score every item with f */
	const starfa_csr *seen;
	int64_t k;
	const int64_t *start; /* each user's distinct test items, ascending: items[start[u], start[u + 1]) up to a -1 */
	const int32_t *items;
	struct rank_part *part;
};

/* One user's metrics from its top k (heap) and its distinct test items (likes, sorted). */
static void add_user(struct rank_part *part, const struct scored *heap, int64_t got, const int32_t *likes,
		     int64_t distinct, int64_t k)
{
	int64_t cut = distinct < k ? distinct : k;
	double hit = 0, ap = 0, dcg = 0, idcg = 0;
	for (int64_t i = 0; i < cut; i++)
		idcg += 1.0 / log2((double)i + 2.0);
	for (int64_t i = 0; i < got; i++) {
		int32_t item = heap[i].item;
		if (bsearch(&item, likes, (size_t)distinct, sizeof item, compare_int32)) {
			hit += 1;
			ap += hit / (double)(i + 1);
			dcg += 1.0 / log2((double)i + 2.0);
		}
	}
	part->relevant += hit;
	part->pr_div += (double)cut;
	part->mean_ap += ap / (double)cut;
	part->ndcg += dcg / idcg;
	part->users++;
}

/* User u's top k from its top k of each column band (room for lists->n * k entries in heap), best
 * first; how many. */
static int64_t merge_lists(const struct starfa_top_k_lists *lists, int64_t u, int64_t k, struct scored *heap)
{
	int64_t n = 0;
	for (int64_t j = 0; j < lists->n; j++) {
		const float *row = lists->rows[j] + u * lists->ld;
		for (int64_t i = 0; i < k && starfa_top_k_item_at(row, i) >= 0; i++)
			heap[n++] = (struct scored){row[2 * i], (int32_t)(lists->col0[j] + starfa_top_k_item_at(row, i))};
	}
	if (lists->n > 1)
		qsort(heap, (size_t)n, sizeof *heap, starfa_cpu_scored_order);
	return n < k ? n : k;
}

/* The scores of nb users (users[b] the user of row b; X: room for their factor rows) against every item,
 * with the score's mean and biases as starfa_factors_score adds them, into S (nb x nitems). */
static void score_block(const struct starfa_factors *f, const int64_t *users, int64_t nb, float *X, float *S)
{
	const int64_t nitems = f->nitems;
	starfa_cpu_score_rows(users, nb, f->U, f->ldu, f->rank, f->V, f->ldv, nitems, X, S);
	for (int64_t b = 0; b < nb; b++) {
		const int64_t u = users[b];
		float *row = S + b * nitems;
		const double base = f->mu + (f->ub ? f->ub[u * f->ub_stride] : 0.0);
		if (base != 0.0 || f->ib)
			for (int64_t i = 0; i < nitems; i++)
				row[i] = (float)(base + (f->ib ? f->ib[i * f->ib_stride] : 0.0) + row[i]);
	}
}

/* Users [begin, end): those with test items scored a block at a time and their top k selected (or their
 * top k merged from the lists), the sums. */
static void rank_chunk(void *arg, int64_t chunk, int64_t begin, int64_t end)
{
	const struct rank_ctx *c = arg;
	const struct starfa_factors *f = c->f;
	const struct starfa_top_k_lists *lists = c->lists;
	const starfa_csr *seen = c->seen;
	const int64_t k = c->k, nitems = f->nitems, r = f->rank;
	struct rank_part *part = &c->part[chunk];
	const int64_t block = lists ? STARFA_CPU_SCORE_ROWS : starfa_cpu_score_block(nitems);
	/* With lists: room for every band's k; else the block's scores and factor rows. */
	struct scored *heap = malloc((size_t)(lists ? lists->n * k : k) * sizeof *heap);
	float *S = lists ? NULL : malloc((size_t)(block * (nitems > 0 ? nitems : 1)) * sizeof *S);
	float *X = lists ? NULL : malloc((size_t)(block * (r > 0 ? r : 1)) * sizeof *X);
	int64_t users[STARFA_CPU_SCORE_ROWS];
	if (!heap || (!lists && (!S || !X))) {
		part->failed = 1;
		free(heap);
		free(S);
		free(X);
		return;
	}
	for (int64_t u0 = begin; u0 < end;) {
		int64_t nb = 0;
		for (; u0 < end && nb < block; u0++) {
			if (c->start[u0 + 1] == c->start[u0])
				continue;
			users[nb++] = u0;
		}
		if (nb == 0)
			break;
		if (!lists)
			score_block(f, users, nb, X, S);
		for (int64_t b = 0; b < nb; b++) {
			const int64_t u = users[b];
			const int64_t n = c->start[u + 1] - c->start[u];
			const int32_t *likes = c->items + c->start[u];
			int64_t distinct = 0;
			while (distinct < n && likes[distinct] >= 0)
				distinct++;
			const int32_t *ex = seen ? seen->colind + seen->rowptr[u] : NULL;
			int64_t nex = seen ? seen->rowptr[u + 1] - seen->rowptr[u] : 0;
			const int64_t got =
				lists ? merge_lists(lists, u, k, heap) : starfa_cpu_top_k(S + b * nitems, nitems, k, ex, nex, heap);
			add_user(part, heap, got, likes, distinct, k);
		}
	}
	free(heap);
	free(S);
	free(X);
}

/* The known entries' items grouped by user: start (nusers + 1 offsets) and items, each user's sorted and
 * deduplicated in chunks of users, -1 past its distinct ones. */
struct group_ctx {
	const int64_t *start;
	int32_t *items;
};

static void group_chunk(void *arg, int64_t chunk, int64_t begin, int64_t end)
{
	(void)chunk;
	const struct group_ctx *c = arg;
	for (int64_t u = begin; u < end; u++) {
		int32_t *likes = c->items + c->start[u];
		const int64_t n = c->start[u + 1] - c->start[u];
		if (n > 1)
			qsort(likes, (size_t)n, sizeof *likes, compare_int32);
		int64_t distinct = 0;
		for (int64_t i = 0; i < n; i++)
			if (distinct == 0 || likes[distinct - 1] != likes[i])
				likes[distinct++] = likes[i];
		for (int64_t i = distinct; i < n; i++)
			likes[i] = -1;
	}
}

#define GROUP_CHUNKS 256

/* Test entry e's user (of nusers) and item are both known. */
static inline int known_entry(const struct starfa_matched *test, int64_t e, int64_t nusers)
{
	return test->user[e] >= 0 && test->user[e] < nusers && test->item[e] >= 0;
}

static int group_users(const struct starfa_matched *test, int64_t nusers, int64_t **start_out, int32_t **items_out)
{
	*start_out = NULL;
	*items_out = NULL;
	int64_t *start = starfa_calloc((size_t)nusers + 1, sizeof *start);
	int32_t *items = starfa_malloc(test->n > 0 ? (size_t)test->n : 1, sizeof *items);
	int64_t *fill = starfa_malloc(nusers > 0 ? (size_t)nusers : 1, sizeof *fill);
	if (!start || !items || !fill) {
		free(start);
		free(items);
		free(fill);
		return STARFA_ENOMEM;
	}
	for (int64_t e = 0; e < test->n; e++)
		if (known_entry(test, e, nusers))
			start[test->user[e] + 1]++;
	for (int64_t u = 0; u < nusers; u++)
		start[u + 1] += start[u];
	memcpy(fill, start, (size_t)nusers * sizeof *fill);
	for (int64_t e = 0; e < test->n; e++)
		if (known_entry(test, e, nusers))
			items[fill[test->user[e]]++] = test->item[e];
	free(fill);
	struct group_ctx g = {start, items};
	int rc = starfa_host_parallel(nusers, GROUP_CHUNKS, group_chunk, &g);
	if (rc) {
		free(start);
		free(items);
		return rc;
	}
	*start_out = start;
	*items_out = items;
	return 0;
}

int starfa_matched_group_users(struct starfa_matched *m, int64_t nusers)
{
	free(m->start);
	free(m->by_user);
	m->start = NULL;
	m->by_user = NULL;
	m->grouped_users = 0;
	int rc = group_users(m, nusers, &m->start, &m->by_user);
	if (!rc)
		m->grouped_users = nusers;
	return rc;
}

/* Ranking metrics over the known test users, in the manner of implicit's ranking_metrics_at_k. */
static int ranking_metrics(const struct starfa_factors *f, const struct starfa_top_k_lists *lists,
			   const struct starfa_matched *test, const starfa_csr *seen, int64_t k, starfa_metrics *out)
{
	/* Each known user's distinct known test items: grouped once for a training run, else here. */
	int64_t *own_start = NULL;
	int32_t *own_items = NULL;
	const int64_t *start = test->start;
	const int32_t *items = test->by_user;
	if (!start || test->grouped_users != f->nusers) {
		int rc = group_users(test, f->nusers, &own_start, &own_items);
		if (rc)
			return rc;
		start = own_start;
		items = own_items;
	}

	struct rank_ctx ctx = {f, lists, seen, k, start, items, NULL};
	const int64_t nchunks = f->nusers < RANK_CHUNKS ? f->nusers : RANK_CHUNKS;
	ctx.part = starfa_calloc((size_t)nchunks, sizeof *ctx.part);
	int rc = ctx.part ? starfa_host_parallel(f->nusers, nchunks, rank_chunk, &ctx) : STARFA_ENOMEM;
	double relevant = 0, pr_div = 0, mean_ap = 0, ndcg = 0;
	int64_t users = 0;
	int failed = 0;
	for (int64_t c = 0; !rc && c < nchunks; c++) { /* in chunk order: the same sums on any threads */
		relevant += ctx.part[c].relevant;
		pr_div += ctx.part[c].pr_div;
		mean_ap += ctx.part[c].mean_ap;
		ndcg += ctx.part[c].ndcg;
		users += ctx.part[c].users;
		failed |= ctx.part[c].failed;
	}
	free(ctx.part);
	free(own_start);
	free(own_items);
	if (rc)
		return rc;
	if (failed)
		return starfa_set_error(STARFA_ENOMEM, "out of memory ranking items");
	out->users = users;
	out->precision = pr_div > 0 ? relevant / pr_div : NAN;
	out->map = users > 0 ? mean_ap / (double)users : NAN;
	out->ndcg = users > 0 ? ndcg / (double)users : NAN;
	return 0;
}

/* Cold test entries, counted in chunks: the items with training entries marked first (every writer
 * stores the same 1, atomically), then each chunk of test entries counts its own. */
#define COLD_CHUNKS 64

struct cold_ctx {
	const starfa_csr *seen;
	const struct starfa_matched *test;
	uint8_t *item_seen;
	int64_t part[COLD_CHUNKS];
};

static void mark_seen_chunk(void *arg, int64_t chunk, int64_t begin, int64_t end)
{
	(void)chunk;
	struct cold_ctx *c = arg;
	for (int64_t p = begin; p < end; p++)
		__atomic_store_n(&c->item_seen[c->seen->colind[p]], (uint8_t)1, __ATOMIC_RELAXED);
}

static void cold_chunk(void *arg, int64_t chunk, int64_t begin, int64_t end)
{
	struct cold_ctx *c = arg;
	const starfa_csr *seen = c->seen;
	int64_t n = 0;
	for (int64_t e = begin; e < end; e++) {
		int32_t u = c->test->user[e], i = c->test->item[e];
		n += u < 0 || i < 0 ||
		     (seen && (seen->rowptr[u + 1] == seen->rowptr[u] || !__atomic_load_n(&c->item_seen[i], __ATOMIC_RELAXED)));
	}
	c->part[chunk] = n;
}

/* Cold test entries: the user or the item is unknown, or had no training entries in seen. */
static int count_cold(const struct starfa_matched *test, const starfa_csr *seen, int64_t nitems, int64_t *out)
{
	*out = 0;
	struct cold_ctx cold = {seen, test, seen ? starfa_calloc(nitems > 0 ? (size_t)nitems : 1, 1) : NULL, {0}};
	if (seen && !cold.item_seen)
		return STARFA_ENOMEM;
	int rc = seen ? starfa_host_parallel(seen->nnz, COLD_CHUNKS, mark_seen_chunk, &cold) : 0;
	if (!rc)
		rc = starfa_host_parallel(test->n, COLD_CHUNKS, cold_chunk, &cold);
	free(cold.item_seen);
	for (int c = 0; !rc && c < COLD_CHUNKS; c++)
		*out += cold.part[c];
	return rc;
}

int starfa_matched_count_cold(struct starfa_matched *m, const starfa_csr *seen, int64_t nitems)
{
	m->cold_seen = NULL;
	int rc = seen ? count_cold(m, seen, nitems, &m->cold) : 0;
	if (!rc && seen)
		m->cold_seen = seen;
	return rc;
}

/* Test RMSE: the entries cut into this many chunks, each with its partial sum of squared errors. */
#define RMSE_CHUNKS 256

struct sq_ctx {
	const struct starfa_factors *f;
	const struct starfa_matched *test;
	double *part;
};

static void sq_chunk(void *arg, int64_t chunk, int64_t begin, int64_t end)
{
	const struct sq_ctx *c = arg;
	double sum = 0;
	for (int64_t e = begin; e < end; e++) {
		double d = (double)starfa_factors_score(c->f, c->test->user[e], c->test->item[e]) - c->test->val[e];
		sum += d * d;
	}
	c->part[chunk] = sum;
}

static int metrics(const struct starfa_factors *f, const struct starfa_top_k_lists *lists,
		   const struct starfa_matched *test, const starfa_csr *seen, int64_t k, starfa_metrics *out)
{
	memset(out, 0, sizeof *out);
	out->entries = test->n;
	out->k = k;
	out->rmse = out->precision = out->map = out->ndcg = NAN;
	if (f->kind == STARFA_MODEL_TOPIC)
		return starfa_set_error(STARFA_EINVAL,
					"topic models are evaluated by perplexity, which this build does not support yet");
	if ((unsigned)f->kind >= STARFA_MODEL_KINDS)
		return starfa_set_error(STARFA_EINVAL, "cannot evaluate a model of unknown kind %d", (int)f->kind);
	if (f->kind == STARFA_MODEL_IMPLICIT && k < 1)
		return starfa_set_error(STARFA_EINVAL, "ranking metrics need k >= 1");
	int rc = 0;
	if (seen && test->cold_seen == seen)
		out->cold = test->cold;
	else
		rc = count_cold(test, seen, f->nitems, &out->cold);
	if (rc)
		return rc;
	if (f->kind != STARFA_MODEL_IMPLICIT) {
		/* Explicit: the score holds the mean and the biases; non-negative: W·Hᵀ alone (the view has
		 * neither, starfa_model_factors). */
		const int64_t nchunks = test->n < RMSE_CHUNKS ? test->n : RMSE_CHUNKS;
		struct sq_ctx ctx = {f, test, starfa_calloc(nchunks > 0 ? (size_t)nchunks : 1, sizeof(double))};
		rc = ctx.part ? starfa_host_parallel(test->n, nchunks, sq_chunk, &ctx) : STARFA_ENOMEM;
		double sum = 0;
		for (int64_t c = 0; !rc && c < nchunks; c++)
			sum += ctx.part[c];
		free(ctx.part);
		if (rc)
			return rc;
		out->rmse = test->n > 0 ? sqrt(sum / (double)test->n) : NAN;
		return 0;
	}
	return ranking_metrics(f, lists, test, seen, k, out);
}

int starfa_factors_metrics(const struct starfa_factors *f, const struct starfa_matched *test, const starfa_csr *seen,
			   int64_t k, starfa_metrics *out)
{
	return metrics(f, NULL, test, seen, k, out);
}

int starfa_lists_metrics(const struct starfa_factors *f, const struct starfa_top_k_lists *lists,
			 const struct starfa_matched *test, const starfa_csr *seen, int64_t k, starfa_metrics *out)
{
	if (f->kind != STARFA_MODEL_IMPLICIT || !lists || lists->ld < 2 * k)
		return starfa_set_error(STARFA_EINVAL, "top-k lists rank an implicit model's items, k at most half "
						       "their width");
	return metrics(f, lists, test, seen, k, out);
}

int starfa_eval_host(const starfa_model *m, const starfa_coo *test, int64_t k, starfa_metrics *out)
{
	if (!m || !test || !out)
		return starfa_set_error(STARFA_EINVAL, "starfa_eval: missing model, test entries or output");
	struct starfa_matched matched;
	int rc = starfa_match_entries(test, m->user_ids, m->item_ids, m->nusers, m->nitems, &matched);
	if (rc)
		return rc;
	struct starfa_factors f;
	starfa_model_factors(m, &f);
	rc = starfa_factors_metrics(&f, &matched, m->seen, k, out);
	starfa_matched_free(&matched);
	return rc;
}
