/* starfa eval: a model's quality on test entries (RMSE, or precision, MAP and NDCG at k), as its kind
 * calls for. */
#include "cli/cli.h"

#include <stdio.h>

static void usage(FILE *out)
{
	fprintf(out, "usage: starfa eval --model MODEL --test FILE [--k K] [--format F] [OPTIONS]\n"
		     "Scores a model on test entries, matched to its users and items by id, as its kind calls for.\n"
		     "Explicit models: RMSE (unknown users and items predicted by the mean and the biases there\n"
		     "are). Implicit models: precision@k, MAP@k and NDCG@k, each test user's training items left\n"
		     "out of its ranking (as top_k tasks where there are GPUs, when users x items x rank is 2^35 or\n"
		     "more). Other non-negative models: RMSE of W·Hᵀ. Topic models (lda) and count\n"
		     "models (gap, klnmf): the document-completion\n"
		     "perplexity of held-out documents (each one's entries, sorted by word id, alternate between an\n"
		     "observed half, from which its mixture is inferred, and an evaluated half, whose tokens are\n"
		     "scored: exp(-sum c log(theta_d . beta_w) / sum c)), as a task graph on every worker.\n"
		     "  --model MODEL    a model written by starfa train\n"
		     "  --test FILE      test entries (ratings file or Matrix Market)\n"
		     "  --format F       mtx, ratings or docword (default: guessed from the name)\n"
		     "  --k K            cut-off of the ranking metrics (default 10)\n"
		     "topic and count models:\n" CLI_TOPIC_HELP CLI_RUNTIME_HELP);
}

int cmd_eval(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLI_RUNTIME_OPTIONS,
		CLI_TOPIC_OPTIONS,
		{"model", required_argument, NULL, 'm'},
		{"test", required_argument, NULL, 't'},
		{"format", required_argument, NULL, 'f'},
		{"k", required_argument, NULL, 'k'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *model_path = NULL, *test_path = NULL;
	starfa_format format = STARFA_FORMAT_AUTO;
	int64_t k = 10;
	starfa_topic_options to;
	starfa_topic_options_default(&to);
	starfa_options runtime;
	starfa_options_default(&runtime);
	runtime.silent = 1;
	int opt;
	while ((opt = getopt_long(argc, argv, "m:t:k:h", longopts, NULL)) != -1) {
		int handled = cli_runtime_option(opt, optarg, &runtime);
		if (!handled)
			handled = cli_topic_option(opt, optarg, &to);
		if (handled < 0)
			return EXIT_USAGE;
		if (handled)
			continue;
		switch (opt) {
		case 'm':
			model_path = optarg;
			break;
		case 't':
			test_path = optarg;
			break;
		case 'f':
			if (cli_parse_format(optarg, &format))
				return EXIT_USAGE;
			break;
		case 'k':
			if (cli_parse_int("k", optarg, 1, 100000, &k))
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
	if (!model_path || !test_path) {
		cli_error("eval needs --model MODEL and --test FILE");
		return EXIT_USAGE;
	}
	starfa_model *m = NULL;
	starfa_coo *test = NULL;
	if (starfa_model_load(model_path, &m) != 0)
		return cli_library_error();
	cli_model_print(stdout, m);
	fflush(stdout); /* before an error message on stderr */
	if (starfa_read(test_path, format, &test) != 0) {
		starfa_model_free(m);
		return cli_library_error();
	}
	/* count models (gap, klnmf) record their prior's shape, at least 1; other non-negative factors get RMSE */
	if (m->kind == STARFA_MODEL_TOPIC || (m->kind == STARFA_MODEL_NONNEG && m->alpha >= 1)) {
		int rc = 0;
		starfa_perplexity p;
		if (cli_check_vocabulary(test_path, test, m)) {
			rc = 1;
		} else if (starfa_init(&runtime) != 0) {
			rc = cli_library_error();
		} else {
			if (starfa_topic_perplexity(m, test, &to, &p) != 0)
				rc = cli_library_error();
			rc = cli_shutdown(&runtime, rc);
		}
		if (!rc) {
			printf("test: %s documents=%lld observed_tokens=%lld evaluated_tokens=%lld e_step_iterations=%lld\n",
			       test_path, (long long)p.documents, (long long)p.observed_tokens, (long long)p.evaluated_tokens,
			       (long long)p.iterations);
			if (p.empty)
				printf("note: %lld documents have no words (kept: their mixture is the prior)\n", (long long)p.empty);
			printf("perplexity=%.4f\n", p.perplexity);
		}
		starfa_coo_free(test);
		starfa_model_free(m);
		return rc;
	}
	/* An implicit model ranks every item for every test user: where that is large (2^35 multiply-adds
	 * and more, users x items x rank), the runtime starts, so that GPUs rank as top_k tasks (on the cores
	 * alone it changes nothing). Smaller ones do not pay the runtime's start, unless a trace is asked
	 * for (it then holds the metrics' tasks). */
	const int with_runtime = runtime.trace_dir || (m->kind == STARFA_MODEL_IMPLICIT &&
						 (double)m->nusers * (double)m->nitems * (double)m->rank >= 34359738368.0);
	if (with_runtime && starfa_init(&runtime) != 0) {
		starfa_coo_free(test);
		starfa_model_free(m);
		return cli_library_error();
	}
	starfa_metrics r;
	int rc = starfa_eval(m, test, k, &r);
	if (rc != 0) {
		rc = cli_library_error();
	} else {
		printf("test: %s entries=%lld cold=%lld\n", test_path, (long long)r.entries, (long long)r.cold);
		if (m->kind == STARFA_MODEL_IMPLICIT)
			printf("precision@%lld=%.4f map@%lld=%.4f ndcg@%lld=%.4f users=%lld\n", (long long)k, r.precision,
			       (long long)k, r.map, (long long)k, r.ndcg, (long long)r.users);
		else
			printf("rmse=%.4f\n", r.rmse);
	}
	if (with_runtime)
		rc = cli_shutdown(&runtime, rc);
	starfa_coo_free(test);
	starfa_model_free(m);
	return rc;
}
