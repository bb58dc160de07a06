/* starfa topics: each topic's most probable words. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>

static void usage(FILE *out)
{
	fprintf(out, "usage: starfa topics --model MODEL [--top N] [--weights]\n"
		     "Prints each topic's N most probable words, most probable first: the words of the vocabulary the\n"
		     "model was trained with (--vocab), else their ids (line numbers of the vocabulary, from 1).\n"
		     "Topic models (lda) and non-negative ones (gap, klnmf: H's columns normalized).\n"
		     "  --model MODEL    a model written by starfa train\n"
		     "  --top N          words per topic (default 10)\n"
		     "  --weights        each word's probability in the topic beside it\n");
}

/* Indices of the n largest of v[0 .. W), largest first (ties: lower index), by a partial selection. */
static void top_words(const float *v, int64_t W, int64_t n, int64_t *out)
{
	int64_t have = 0;
	for (int64_t w = 0; w < W; w++) {
		if (have == n && !(v[w] > v[out[n - 1]]))
			continue;
		int64_t p = have < n ? have++ : n - 1;
		while (p > 0 && v[w] > v[out[p - 1]]) {
			out[p] = out[p - 1];
			p--;
		}
		out[p] = w;
	}
}

int cmd_topics(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"model", required_argument, NULL, 'm'},
		{"top", required_argument, NULL, 'n'},
		{"weights", no_argument, NULL, 'w'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *model_path = NULL;
	int64_t top = 10;
	int weights = 0, opt;
	while ((opt = getopt_long(argc, argv, "m:n:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			model_path = optarg;
			break;
		case 'n':
			if (cli_parse_int("top", optarg, 1, 1000000, &top))
				return EXIT_USAGE;
			break;
		case 'w':
			weights = 1;
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
	if (!model_path) {
		cli_error("topics needs --model MODEL");
		return EXIT_USAGE;
	}
	starfa_model *m = NULL;
	if (starfa_model_load(model_path, &m) != 0)
		return cli_library_error();
	const int64_t K = m->rank, W = m->nitems, n = top < W ? top : W;
	float *beta = malloc(sizeof(float) * (size_t)(K * W));
	int64_t *best = malloc(sizeof(int64_t) * (size_t)n);
	int rc = 0;
	if (!beta || !best) {
		cli_error("out of memory");
		rc = 1;
	} else if (starfa_topic_word(m, beta) != 0) {
		rc = cli_library_error();
	} else {
		cli_model_print(stdout, m);
		for (int64_t k = 0; k < K; k++) {
			top_words(beta + k * W, W, n, best);
			printf("topic %lld:", (long long)k + 1);
			for (int64_t i = 0; i < n; i++) {
				const char *word = m->item_ids ? starfa_idmap_name(m->item_ids, best[i]) : NULL;
				if (word)
					printf(" %s", word);
				else
					printf(" %lld", (long long)best[i] + 1);
				if (weights)
					printf(" (%.4f)", beta[k * W + best[i]]);
			}
			printf("\n");
		}
	}
	free(beta);
	free(best);
	starfa_model_free(m);
	return rc;
}
