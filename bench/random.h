/* Helpers of the stand-alone benchmark programs (header-only, no starfa needed): splitmix64 draws, so
 * that a seed gives the same data on any machine, and a checked number parser for their options. */
#ifndef STARFA_BENCH_RANDOM_H
#define STARFA_BENCH_RANDOM_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static inline uint64_t bench_next_u64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in (0, 1). */
static inline double bench_unit(uint64_t *s)
{
	return ((bench_next_u64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* Standard normal (Box-Muller). */
static inline double bench_gaussian(uint64_t *s)
{
	return sqrt(-2.0 * log(bench_unit(s))) * cos(6.283185307179586 * bench_unit(s));
}

/* *out = the number in text, in [lo, hi]; else a message naming the program and the option, and -1. */
static inline int bench_parse_number(const char *prog, const char *opt, const char *text, double lo, double hi,
				     double *out)
{
	char *end;
	errno = 0;
	double v = strtod(text, &end);
	if (!*text || *end || errno || !(v >= lo && v <= hi)) {
		fprintf(stderr, "%s: %s expects a number in [%g, %g], not '%s'\n", prog, opt, lo, hi, text);
		return -1;
	}
	*out = v;
	return 0;
}

#endif
