/* starfa recommend: a user's top k items from a model, in the ids of the training file. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
	fprintf(out, "usage: starfa recommend --model MODEL --user ID [--k K] [--min-ratings N] [--exclude FILE]\n"
		     "Prints the user's k best items (rank, item id, score), leaving out the items the user had in\n"
		     "training (the model keeps them). A user the model does not know gets the items with the best\n"
		     "bias (explicit models) or the most popular ones (the other kinds). The table goes to standard\n"
		     "output, a line describing the model (kind, algorithm, dimensions) to standard error.\n"
		     "  --model MODEL    a model written by starfa train\n"
		     "  --user ID        the user, as its id in the training file\n"
		     "  --k K            how many items (default 10)\n"
		     "  --min-ratings N  leave out items with fewer than N training entries (default 5; 1 keeps\n"
		     "                   all): an item rated once, at five stars, would otherwise top most lists\n"
		     "  --exclude FILE   also leave out this user's items in this ratings file\n"
		     "  --format F       format of the --exclude file (default: guessed from the name)\n");
}

static int compare_int32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

/* Items with fewer than min_ratings training entries (from the model's seen entries), appended to
 * list at *n; list must have room for every item. */
static void rare_items(const starfa_model *m, int64_t min_ratings, int32_t *list, int64_t *n)
{
	if (min_ratings <= 1 || !m->seen)
		return;
	int64_t *support = calloc((size_t)m->nitems, sizeof *support);
	if (!support)
		return; /* the filter is a refinement: without memory for it, recommend unfiltered */
	for (int64_t p = 0; p < m->seen->nnz; p++)
		support[m->seen->colind[p]]++;
	for (int64_t i = 0; i < m->nitems; i++)
		if (support[i] < min_ratings)
			list[(*n)++] = (int32_t)i;
	free(support);
}

/* The excluded items of one user as a CSR of the model's shape with only that row filled, or for a
 * user the model does not know (user -1, named uname) as a one-row CSR: its items in the --exclude
 * file and the rare items. */
static int exclusions(const starfa_model *m, int64_t user, const char *uname, const starfa_coo *extra,
		      int64_t min_ratings, starfa_csr *out)
{
	int64_t nseen = m->seen && user >= 0 ? m->seen->rowptr[user + 1] - m->seen->rowptr[user] : 0, nextra = 0;
	const int64_t row = user >= 0 ? user : 0, nrows = user >= 0 ? m->nusers : 1;
	int64_t extra_user = -1;
	if (extra)
		extra_user = extra->row_ids ? starfa_idmap_find(extra->row_ids, uname)
					    : (user >= 0 && user < extra->nrows ? user : -1);
	if (extra_user >= 0)
		for (int64_t e = 0; e < extra->nnz; e++)
			nextra += extra->row[e] == extra_user;
	out->nrows = nrows;
	out->ncols = m->nitems;
	out->rowptr = calloc((size_t)nrows + 1, sizeof *out->rowptr);
	out->colind = malloc((size_t)(nseen + nextra + m->nitems + 1) * sizeof *out->colind);
	out->val = NULL;
	if (!out->rowptr || !out->colind) {
		cli_error("out of memory");
		return 1;
	}
	int64_t n = 0;
	for (int64_t p = 0; p < nseen; p++)
		out->colind[n++] = m->seen->colind[m->seen->rowptr[row] + p];
	if (extra_user >= 0)
		for (int64_t e = 0; e < extra->nnz; e++) {
			if (extra->row[e] != extra_user)
				continue;
			int64_t item = extra->col_ids ? starfa_idmap_find(m->item_ids, starfa_idmap_name(extra->col_ids, extra->col[e]))
						      : (extra->col[e] < m->nitems ? extra->col[e] : -1);
			if (item >= 0)
				out->colind[n++] = (int32_t)item;
		}
	rare_items(m, min_ratings, out->colind, &n);
	qsort(out->colind, (size_t)n, sizeof *out->colind, compare_int32);
	int64_t distinct = 0;
	for (int64_t p = 0; p < n; p++)
		if (distinct == 0 || out->colind[distinct - 1] != out->colind[p])
			out->colind[distinct++] = out->colind[p];
	for (int64_t u = row + 1; u <= nrows; u++)
		out->rowptr[u] = distinct;
	out->nnz = distinct;
	return 0;
}

int cmd_recommend(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"model", required_argument, NULL, 'm'},
		{"user", required_argument, NULL, 'u'},
		{"k", required_argument, NULL, 'k'},
		{"min-ratings", required_argument, NULL, 'r'},
		{"exclude", required_argument, NULL, 'x'},
		{"format", required_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *model_path = NULL, *user_id = NULL, *exclude_path = NULL;
	starfa_format format = STARFA_FORMAT_AUTO;
	int64_t k = 10, min_ratings = 5;
	int opt;
	while ((opt = getopt_long(argc, argv, "m:u:k:x:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			model_path = optarg;
			break;
		case 'u':
			user_id = optarg;
			break;
		case 'k':
			if (cli_parse_int("k", optarg, 1, 1000000, &k))
				return EXIT_USAGE;
			break;
		case 'x':
			exclude_path = optarg;
			break;
		case 'r':
			if (cli_parse_int("min-ratings", optarg, 1, INT32_MAX, &min_ratings))
				return EXIT_USAGE;
			break;
		case 'f':
			if (cli_parse_format(optarg, &format))
				return EXIT_USAGE;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return EXIT_USAGE;
		}
	}
	if (cli_no_operands(argc, argv))
		return EXIT_USAGE;
	if (!model_path || !user_id) {
		cli_error("recommend needs --model MODEL and --user ID");
		return EXIT_USAGE;
	}
	starfa_model *m = NULL;
	starfa_coo *extra = NULL;
	if (starfa_model_load(model_path, &m) != 0)
		return cli_library_error();
	cli_model_print(stderr, m); /* standard output stays the table alone */
	if (exclude_path && starfa_read(exclude_path, format, &extra) != 0) {
		starfa_model_free(m);
		return cli_library_error();
	}
	int64_t user = starfa_idmap_find(m->user_ids, user_id);
	starfa_csr ex = {0};
	starfa_recommendation *recs = malloc((size_t)k * sizeof *recs);
	int64_t n = 0;
	int rc = 0;
	if (!recs) {
		cli_error("out of memory for %lld recommendations", (long long)k);
		rc = 1;
	} else {
		if (user < 0)
			fprintf(stderr, "starfa: note: user '%s' is not in the model: recommending by %s\n", user_id,
				m->kind == STARFA_MODEL_EXPLICIT ? "item bias" : "popularity");
		if ((rc = exclusions(m, user, user_id, extra, min_ratings, &ex)) == 0 &&
		    starfa_recommend(m, user, k, &ex, recs, &n) != 0)
			rc = cli_library_error();
	}
	if (rc == 0) {
		printf("rank\titem\tscore\n");
		for (int64_t i = 0; i < n; i++)
			printf("%lld\t%s\t%.4f\n", (long long)i + 1, starfa_idmap_name(m->item_ids, recs[i].item), recs[i].score);
	}
	free(ex.rowptr);
	free(ex.colind);
	free(recs);
	starfa_coo_free(extra);
	starfa_model_free(m);
	return rc;
}
