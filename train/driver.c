/* The one training driver: every algorithm's iterations, timed, profiled and reported the same way. */
#include "runtime/internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

const starfa_param *starfa_param_find(const starfa_algorithm *algo, const char *name)
{
	if (!algo || !algo->params || !name)
		return NULL;
	for (const starfa_param *p = algo->params; p->name; p++)
		if (strcmp(p->name, name) == 0)
			return p;
	return NULL;
}

/* The index of value among the '|'-separated choices, or -1. */
static int choice_index(const char *choices, const char *value)
{
	size_t len = strlen(value);
	int i = 0;
	for (const char *c = choices; c && *c; i++) {
		const char *bar = strchr(c, '|');
		size_t n = bar ? (size_t)(bar - c) : strlen(c);
		if (n == len && strncmp(c, value, n) == 0)
			return i;
		if (!bar)
			break;
		c = bar + 1;
	}
	return -1;
}

int starfa_param_set(const starfa_algorithm *algo, void *params, const char *name, const char *value)
{
	const starfa_param *p = starfa_param_find(algo, name);
	if (!p)
		return starfa_set_error(STARFA_EINVAL, "--%s: %s has no such option", name ? name : "?",
					algo ? algo->name : "no algorithm");
	char *field = (char *)params + p->offset;
	if (p->type == STARFA_PARAM_FLAG) {
		*(int *)field = (int)p->max;
		return 0;
	}
	if (!value)
		return starfa_set_error(STARFA_EINVAL, "--%s needs a value", name);
	if (p->type == STARFA_PARAM_CHOICE) {
		int i = choice_index(p->choices, value);
		if (i < 0)
			return starfa_set_error(STARFA_EINVAL, "--%s must be one of %s, not '%s'", name, p->choices, value);
		*(int *)field = i;
		return 0;
	}
	char *end = NULL;
	errno = 0;
	if (p->type == STARFA_PARAM_DOUBLE) {
		double d = strtod(value, &end);
		if (!*value || *end || errno || !isfinite(d) || d < p->min || d > p->max)
			return starfa_set_error(STARFA_EINVAL, "--%s expects a number in [%g, %g], not '%s'", name, p->min,
						p->max, value);
		*(double *)field = d;
		return 0;
	}
	long long v = strtoll(value, &end, 10);
	if (!*value || *end || errno || (double)v < p->min || (double)v > p->max)
		return starfa_set_error(STARFA_EINVAL, "--%s expects an integer in [%.0f, %.0f], not '%s'", name, p->min,
					p->max, value);
	if (p->type == STARFA_PARAM_INT)
		*(int *)field = (int)v;
	else
		*(int64_t *)field = (int64_t)v;
	return 0;
}

void starfa_param_format(const starfa_param *p, const void *params, char *buf, size_t size)
{
	const char *field = (const char *)params + p->offset;
	switch (p->type) {
	case STARFA_PARAM_INT64: snprintf(buf, size, "%lld", (long long)*(const int64_t *)field); break;
	case STARFA_PARAM_INT: snprintf(buf, size, "%d", *(const int *)field); break;
	case STARFA_PARAM_DOUBLE: snprintf(buf, size, "%g", *(const double *)field); break;
	case STARFA_PARAM_FLAG: snprintf(buf, size, "%s", *(const int *)field == (int)p->max ? "on" : "off"); break;
	case STARFA_PARAM_CHOICE: {
		int want = *(const int *)field, i = 0;
		const char *c = p->choices;
		while (c && i < want && (c = strchr(c, '|')))
			c++, i++;
		size_t n = c ? strcspn(c, "|") : 0;
		snprintf(buf, size, "%.*s", (int)n, c ? c : "");
		break;
	}
	}
}

int starfa_train(const starfa_algorithm *algo, const void *params, const starfa_coo *train, const starfa_coo *test,
		 starfa_train_callback callback, void *user_data, starfa_model **out)
{
	*out = NULL;
	if (!algo || !train)
		return starfa_set_error(STARFA_EINVAL, "starfa_train: need an algorithm and training entries");
	if (!starfa_runtime_started())
		return starfa_set_error(STARFA_EINVAL, "starfa_train: call starfa_init first");
	if (train->nnz < 1 || train->nrows < 1 || train->ncols < 1)
		return starfa_set_error(STARFA_EINVAL, "starfa_train: the training matrix has no entries");
	void *defaults = NULL;
	if (!params) {
		defaults = starfa_calloc(1, algo->params_size);
		if (!defaults)
			return STARFA_ENOMEM;
		algo->defaults(defaults);
		params = defaults;
	}
	int rc = algo->check(params);
	void *state = NULL;
	if (!rc)
		rc = algo->setup(train, test, params, &state);
	int64_t iters = rc ? 0 : algo->iterations(params);
	starfa_profile profile = {0};
	for (int64_t it = 1; !rc && it <= iters; it++) {
		starfa_train_progress p = {.iteration = it, .train_rmse = NAN, .train_loss = NAN};
		starfa_stats_reset();
		double t0 = starfa_monotonic_seconds();
		rc = algo->iterate(state, it);
		if (rc)
			break;
		p.seconds = starfa_monotonic_seconds() - t0;
		starfa_stats_get(&p.stats);
		if ((rc = starfa_profile_get(&profile)) != 0)
			break;
		p.profile = &profile;
		double t1 = starfa_monotonic_seconds();
		rc = algo->evaluate(state, &p);
		p.eval_seconds = starfa_monotonic_seconds() - t1;
		int stop = !rc && ((callback && callback(&p, user_data) != 0) || p.converged);
		starfa_profile_clear(&profile);
		if (stop)
			break;
	}
	starfa_profile_clear(&profile); /* when an iteration failed */
	if (!rc)
		rc = starfa_wait();
	if (!rc)
		rc = algo->model(state, out);
	if (state)
		algo->free(state);
	free(defaults);
	return rc;
}
