/* starfa_corpus: a bag-of-words corpus drawn from a planted LDA model, in the UCI format (docword and
 * vocabulary files), so that held-out perplexity on a large corpus means something: the planted model's
 * own perplexity on the corpus is printed beside it as the reference.
 *
 *   starfa_corpus --out PREFIX [--docs D] [--vocab W] [--topics K] [--mean-length L] [--alpha A]
 *                 [--eta E] [--zipf S] [--seed S] [--perplexity]
 *
 * The defaults are NYTimes-shaped: 300,000 documents over 102,660 words, about 110 M tokens in about
 * 70 M distinct (document, word) entries (NYTimes: 99.5 M and 69.7 M). Document lengths follow a
 * Pareto law (exponent 2.5, mean L, at most 50 L); topic k's word distribution is drawn from Dirichlet(eta * W * f) with f a Zipf law of
 * exponent S over a random permutation of the words (so the corpus's word frequencies are a power law
 * too); a document's mixture from Dirichlet(alpha); each token's topic from the mixture and its word from
 * the topic. Writes PREFIX.docword.txt (D, W, NNZ, then "doc word count" lines sorted by document and
 * word, 1-based) and PREFIX.vocab.txt (word ids w000001...), each complete or not at all. With
 * --perplexity it prints exp(-sum c log(theta_d . beta_w) / sum c) of the planted model on the corpus.
 * Exit status: 0, 1 on an error, 2 on a usage error. */
#include "random.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Gamma(shape, 1) by Marsaglia and Tsang (shape < 1: boosted by U^(1/shape)). */
static double gamma_draw(double shape, uint64_t *s)
{
	if (shape < 1.0)
		return gamma_draw(shape + 1.0, s) * pow(bench_unit(s), 1.0 / shape);
	const double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
	for (;;) {
		double x = bench_gaussian(s), v = 1.0 + c * x;
		if (v <= 0)
			continue;
		v = v * v * v;
		double u = bench_unit(s);
		if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
			return d * v;
	}
}

/* A Dirichlet draw into p (n entries) with parameters a[i] (or a0 for all when a is NULL), as a CDF. */
static void dirichlet_cdf(double *p, const double *a, double a0, int64_t n, uint64_t *s)
{
	double sum = 0;
	for (int64_t i = 0; i < n; i++) {
		p[i] = gamma_draw(a ? a[i] : a0, s) + 1e-300;
		sum += p[i];
	}
	double acc = 0;
	for (int64_t i = 0; i < n; i++) {
		acc += p[i] / sum;
		p[i] = acc;
	}
	p[n - 1] = 1.0;
}

/* The index i with cdf[i-1] < u <= cdf[i]. */
static int64_t draw_cdf(const double *cdf, int64_t n, double u)
{
	int64_t lo = 0, hi = n - 1;
	while (lo < hi) {
		int64_t mid = (lo + hi) / 2;
		if (cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static double pdf_of(const double *cdf, int64_t i)
{
	return i ? cdf[i] - cdf[i - 1] : cdf[0];
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

static int parse(const char *opt, const char *text, double lo, double hi, double *out)
{
	return bench_parse_number("starfa_corpus", opt, text, lo, hi, out);
}

/* Writes to PREFIX.suffix through a temporary file renamed at the end. */
static FILE *open_out(const char *prefix, const char *suffix, char *path, char *tmp, size_t size)
{
	snprintf(path, size, "%s.%s", prefix, suffix);
	snprintf(tmp, size, "%s.tmp.XXXXXX", path);
	int fd = mkstemp(tmp);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		fprintf(stderr, "starfa_corpus: cannot create a file beside %s: %s\n", path, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
		}
	}
	return f;
}

static int close_out(FILE *f, const char *path, const char *tmp, int keep)
{
	int failed = ferror(f) || fclose(f) != 0;
	mode_t mask = umask(0); /* mkstemp made it 0600: the permissions of a file created the usual way */
	umask(mask);
	if (keep && !failed && chmod(tmp, 0666 & ~mask) == 0 && rename(tmp, path) == 0)
		return 0;
	if (keep)
		fprintf(stderr, "starfa_corpus: cannot write %s: %s\n", path, strerror(errno));
	unlink(tmp);
	return 1;
}

int main(int argc, char **argv)
{
	const char *prefix = NULL;
	double docs = 300000, vocab = 102660, topics = 100, mean_len = 400, alpha = 0.1, eta = 0.01, zipf = 1.0, seed = 1;
	int perplexity = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--help") == 0) {
			printf("usage: starfa_corpus --out PREFIX [--docs D] [--vocab W] [--topics K] [--mean-length L]\n"
			       "                     [--alpha A] [--eta E] [--zipf S] [--seed S] [--perplexity]\n");
			return 0;
		}
		if (strcmp(a, "--perplexity") == 0) {
			perplexity = 1;
			continue;
		}
		if (!v) {
			fprintf(stderr, "starfa_corpus: %s needs a value\n", a);
			return 2;
		}
		i++;
		int bad = 0;
		if (strcmp(a, "--out") == 0)
			prefix = v;
		else if (strcmp(a, "--docs") == 0)
			bad = parse(a, v, 1, 1e8, &docs);
		else if (strcmp(a, "--vocab") == 0)
			bad = parse(a, v, 2, 1e8, &vocab);
		else if (strcmp(a, "--topics") == 0)
			bad = parse(a, v, 1, 10000, &topics);
		else if (strcmp(a, "--mean-length") == 0)
			bad = parse(a, v, 3, 1e6, &mean_len);
		else if (strcmp(a, "--alpha") == 0)
			bad = parse(a, v, 1e-6, 1e6, &alpha);
		else if (strcmp(a, "--eta") == 0)
			bad = parse(a, v, 1e-6, 1e6, &eta);
		else if (strcmp(a, "--zipf") == 0)
			bad = parse(a, v, 0, 5, &zipf);
		else if (strcmp(a, "--seed") == 0)
			bad = parse(a, v, 0, 1e15, &seed);
		else {
			fprintf(stderr, "starfa_corpus: unknown option %s\n", a);
			return 2;
		}
		if (bad)
			return 2;
	}
	if (!prefix) {
		fprintf(stderr, "starfa_corpus: --out PREFIX is required\n");
		return 2;
	}
	const int64_t D = (int64_t)docs, W = (int64_t)vocab, K = (int64_t)topics;
	uint64_t rng = (uint64_t)seed * 0x2545f4914f6cdd1dull + 77;
	/* The topics: Dirichlet(eta W f), f Zipf over a random order of the words. */
	double *base = malloc(sizeof *base * (size_t)W), *beta = malloc(sizeof *beta * (size_t)(K * W));
	int64_t *perm = malloc(sizeof *perm * (size_t)W);
	double *theta = malloc(sizeof *theta * (size_t)K);
	uint32_t *words = NULL;
	if (!base || !beta || !perm || !theta) {
		fprintf(stderr, "starfa_corpus: out of memory for %lld topics of %lld words\n", (long long)K, (long long)W);
		return 1;
	}
	for (int64_t w = 0; w < W; w++)
		perm[w] = w;
	for (int64_t w = W - 1; w > 0; w--) {
		int64_t j = (int64_t)(bench_next_u64(&rng) % (uint64_t)(w + 1)), t = perm[w];
		perm[w] = perm[j];
		perm[j] = t;
	}
	double zsum = 0;
	for (int64_t w = 0; w < W; w++)
		zsum += pow(w + 1.0, -zipf);
	for (int64_t w = 0; w < W; w++)
		base[perm[w]] = eta * (double)W * pow(w + 1.0, -zipf) / zsum;
	for (int64_t k = 0; k < K; k++)
		dirichlet_cdf(beta + k * W, base, 0, W, &rng);
	char path[2][4096], tmp[2][4096];
	FILE *dw = open_out(prefix, "docword.txt", path[0], tmp[0], sizeof path[0]);
	FILE *vf = dw ? open_out(prefix, "vocab.txt", path[1], tmp[1], sizeof path[1]) : NULL;
	if (!dw || !vf) {
		if (dw)
			close_out(dw, path[0], tmp[0], 0);
		return 1;
	}
	for (int64_t w = 0; w < W; w++)
		fprintf(vf, "w%06lld\n", (long long)(w + 1));
	/* The header's NNZ is known at the end: a fixed-width field, rewritten then. */
	fprintf(dw, "%lld\n%lld\n%020lld\n", (long long)D, (long long)W, 0LL);
	int64_t nnz = 0, tokens = 0, cap = 0, empty = 0;
	double loglik = 0;
	const double xm = mean_len / 3.0, max_len = 50.0 * mean_len; /* Pareto 2.5: mean 3 xm */
	for (int64_t d = 0; d < D; d++) {
		int64_t len = (int64_t)fmin(max_len, xm * pow(bench_unit(&rng), -1.0 / 1.5));
		if (len > cap) {
			free(words);
			cap = len * 2;
			words = malloc(sizeof *words * (size_t)cap);
			if (!words) {
				fprintf(stderr, "starfa_corpus: out of memory for a document of %lld tokens\n", (long long)len);
				close_out(dw, path[0], tmp[0], 0);
				close_out(vf, path[1], tmp[1], 0);
				return 1;
			}
		}
		dirichlet_cdf(theta, NULL, alpha, K, &rng);
		for (int64_t t = 0; t < len; t++) {
			int64_t z = draw_cdf(theta, K, bench_unit(&rng));
			words[t] = (uint32_t)draw_cdf(beta + z * W, W, bench_unit(&rng));
		}
		qsort(words, (size_t)len, sizeof *words, cmp_u32);
		empty += len == 0;
		for (int64_t t = 0; t < len;) {
			int64_t u = t;
			while (u < len && words[u] == words[t])
				u++;
			fprintf(dw, "%lld %u %lld\n", (long long)(d + 1), words[t] + 1, (long long)(u - t));
			if (perplexity) {
				double p = 0;
				for (int64_t k = 0; k < K; k++)
					p += pdf_of(theta, k) * pdf_of(beta + k * W, words[t]);
				loglik += (double)(u - t) * log(p);
			}
			nnz++;
			t = u;
		}
		tokens += len;
	}
	int rc = 0;
	if (fseek(dw, 0, SEEK_SET) != 0 || fprintf(dw, "%lld\n%lld\n%020lld\n", (long long)D, (long long)W, (long long)nnz) < 0)
		rc = 1;
	rc |= close_out(dw, path[0], tmp[0], rc == 0);
	rc |= close_out(vf, path[1], tmp[1], rc == 0);
	if (rc == 0) {
		printf("corpus: %lld documents (%lld empty), %lld words, %lld tokens, %lld entries; %lld topics, alpha %g, "
		       "eta %g, zipf %g, seed %.0f\n",
		       (long long)D, (long long)empty, (long long)W, (long long)tokens, (long long)nnz, (long long)K, alpha,
		       eta, zipf, seed);
		if (perplexity)
			printf("planted model's perplexity on the corpus: %.2f\n", exp(-loglik / (double)tokens));
		printf("wrote %s and %s\n", path[0], path[1]);
	}
	free(words);
	free(base);
	free(beta);
	free(perm);
	free(theta);
	return rc;
}
