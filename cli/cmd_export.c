/* starfa export: a model's factors or biases as tab-separated text, for other tools. */
#include "cli/cli.h"

#include <stdio.h>

static void usage(FILE *out)
{
	fprintf(out, "usage: starfa export --model MODEL --what WHAT --out FILE.tsv\n"
		     "Writes one of the model's arrays as tab-separated text: a line per user (or item), its id in\n"
		     "the training file, then its values (each float exactly, as %%.9g). The file is written beside\n"
		     "FILE.tsv and renamed into place: a failure leaves no file behind.\n"
		     "  --model MODEL    a model written by starfa train\n"
		     "  --what WHAT      user-factors, item-factors (rank values per line), user-bias or item-bias\n"
		     "                   (one value; explicit models trained with biases); topic-word (topic and\n"
		     "                   non-negative models: a line per topic, W probabilities summing to 1, no\n"
		     "                   ids) or doc-topic (topic models: a line per training document, its K topic\n"
		     "                   proportions, no ids)\n"
		     "  --out FILE.tsv   where to write it (replaced if it exists)\n");
}

int cmd_export(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"model", required_argument, NULL, 'm'},
		{"what", required_argument, NULL, 'w'},
		{"out", required_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	const char *model_path = NULL, *out_path = NULL, *what_name = NULL;
	starfa_export_what what = STARFA_EXPORT_USER_FACTORS;
	int opt;
	while ((opt = getopt_long(argc, argv, "m:w:o:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			model_path = optarg;
			break;
		case 'w':
			what_name = optarg;
			if (starfa_export_parse(optarg, &what) != 0) {
				cli_error("--what must be user-factors, item-factors, user-bias, item-bias, topic-word or doc-topic, "
				  "not '%s'", optarg);
				return EXIT_USAGE;
			}
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
	if (!model_path || !what_name || !out_path) {
		cli_error("export needs --model MODEL, --what WHAT and --out FILE.tsv");
		return EXIT_USAGE;
	}
	starfa_model *m = NULL;
	if (starfa_model_load(model_path, &m) != 0)
		return cli_library_error();
	cli_model_print(stdout, m);
	fflush(stdout); /* before an error message on stderr */
	int rc = 0;
	if (starfa_model_export(m, what, out_path) != 0) {
		rc = cli_library_error();
	} else {
		if (what == STARFA_EXPORT_TOPIC_WORD || what == STARFA_EXPORT_DOC_TOPIC) {
			int tw = what == STARFA_EXPORT_TOPIC_WORD;
			printf("%s: %lld lines of %lld values written to %s\n", starfa_export_name(what),
			       (long long)(tw ? m->rank : m->nusers), (long long)(tw ? m->nitems : m->rank), out_path);
			starfa_model_free(m);
			return 0;
		}
		int bias = what == STARFA_EXPORT_USER_BIAS || what == STARFA_EXPORT_ITEM_BIAS;
		int users = what == STARFA_EXPORT_USER_FACTORS || what == STARFA_EXPORT_USER_BIAS;
		int64_t values = bias ? 1 : m->rank;
		printf("%s: %lld lines of %lld value%s written to %s\n", starfa_export_name(what),
		       (long long)(users ? m->nusers : m->nitems), (long long)values, values == 1 ? "" : "s", out_path);
	}
	starfa_model_free(m);
	return rc;
}
