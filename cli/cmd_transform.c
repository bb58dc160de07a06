/* starfa transform: the topic proportions of new documents under a trained topic model. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>

static void usage(FILE *out)
{
	fprintf(out, "usage: starfa transform --model MODEL --input DOCS --out THETA.tsv [OPTIONS]\n"
		     "Infers each document's topic proportions with the model's topics fixed (LDA's E-step, or the\n"
		     "score updates of GaP and KL-NMF, as a task graph on every worker) and writes one line per\n"
		     "document of DOCS, in its order: K tab-separated proportions summing to 1 (a count model's\n"
		     "proportions are each topic's expected share of the document's words). A document with no words\n"
		     "gets the prior's mean (for GaP, its scores at the prior's mode). The file is written beside\n"
		     "THETA.tsv and renamed into place: a failure leaves no file behind.\n"
		     "  --model MODEL    a model written by starfa train --algo lda, gap or klnmf\n"
		     "  --input DOCS     documents (docword: D, W, NNZ, then 'doc word count' lines; word ids those\n"
		     "                   of the training corpus)\n"
		     "  --format F       mtx, ratings or docword (default: guessed from the name)\n"
		     "  --out THETA.tsv  where to write the proportions (replaced if it exists)\n" CLI_TOPIC_HELP
			     CLI_RUNTIME_HELP);
}

int cmd_transform(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLI_RUNTIME_OPTIONS,
		CLI_TOPIC_OPTIONS,
		{"model", required_argument, NULL, 'm'},
		{"input", required_argument, NULL, 'i'},
		{"format", required_argument, NULL, 'f'},
		{"out", required_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *model_path = NULL, *input = NULL, *out_path = NULL;
	starfa_format format = STARFA_FORMAT_AUTO;
	starfa_topic_options to;
	starfa_topic_options_default(&to);
	starfa_options runtime;
	starfa_options_default(&runtime);
	runtime.silent = 1;
	int opt;
	while ((opt = getopt_long(argc, argv, "m:i:o:h", longopts, NULL)) != -1) {
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
		case 'i':
			input = optarg;
			break;
		case 'f':
			if (cli_parse_format(optarg, &format))
				return EXIT_USAGE;
			break;
		case 'o':
			out_path = optarg;
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
	if (!model_path || !input || !out_path) {
		cli_error("transform needs --model MODEL, --input DOCS and --out THETA.tsv");
		return EXIT_USAGE;
	}
	starfa_model *m = NULL;
	starfa_coo *docs = NULL;
	if (starfa_model_load(model_path, &m) != 0)
		return cli_library_error();
	cli_model_print(stdout, m);
	fflush(stdout);
	if (m->kind != STARFA_MODEL_TOPIC && m->kind != STARFA_MODEL_NONNEG) {
		cli_error("transform needs a topic or count model (starfa train --algo lda, gap or klnmf); %s is %s (%s)", model_path,
			  starfa_model_kind_name(m->kind), m->algorithm);
		starfa_model_free(m);
		return 1;
	}
	if (starfa_read(input, format, &docs) != 0) {
		starfa_model_free(m);
		return cli_library_error();
	}
	int rc = cli_check_vocabulary(input, docs, m);
	float *theta = rc ? NULL : malloc(sizeof(float) * (size_t)((docs->nrows > 0 ? docs->nrows : 1) * m->rank));
	if (!rc && !theta) {
		cli_error("out of memory");
		rc = 1;
	}
	int64_t its = 0;
	if (!rc && starfa_init(&runtime) != 0) {
		rc = cli_library_error();
	} else if (!rc) {
		double t0 = cli_now_seconds();
		if (starfa_topic_infer(m, docs, &to, theta, &its) != 0)
			rc = cli_library_error();
		double seconds = cli_now_seconds() - t0;
		rc = cli_shutdown(&runtime, rc);
		if (!rc)
			printf("inferred %lld documents in %lld iterations, %.3f s\n", (long long)docs->nrows, (long long)its,
			       seconds);
	}
	char *tmp = NULL;
	FILE *f = rc ? NULL : cli_open_output(out_path, &tmp);
	if (!rc && !f)
		rc = 1;
	if (f) {
		for (int64_t d = 0; d < docs->nrows; d++)
			for (int64_t k = 0; k < m->rank; k++)
				fprintf(f, k + 1 < m->rank ? "%.9g\t" : "%.9g\n", theta[d * m->rank + k]);
		rc = cli_close_output(f, tmp, out_path, 1);
		if (!rc)
			printf("theta: %lld lines of %lld proportions written to %s\n", (long long)docs->nrows, (long long)m->rank,
			       out_path);
	}
	free(theta);
	starfa_coo_free(docs);
	starfa_model_free(m);
	return rc;
}
