/* starfa: the command-line tool. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{"info", cmd_info, "StarPU version, scheduler and every worker"},
	{"stat", cmd_stat, "dimensions, nonzeros and tiling of a matrix file"},
	{"sddmm", cmd_sddmm, "sampled dense-dense product over the tiles, on every worker"},
	{"train", cmd_train, "train a model (ALS, SGD, CCD++, LDA, ...) on ratings or a corpus, save it"},
	{"eval", cmd_eval, "score a model on test entries (RMSE, precision/MAP/NDCG at k, or perplexity)"},
	{"recommend", cmd_recommend, "a user's top items from a model"},
	{"export", cmd_export, "write a model's factors, biases or topic proportions as tab-separated text"},
	{"topics", cmd_topics, "each topic's most probable words"},
	{"transform", cmd_transform, "the topic proportions of new documents under a topic model"},
	{"calibrate", cmd_calibrate, "calibrate StarPU's performance models of every operation"},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: starfa COMMAND [OPTIONS]   (starfa COMMAND --help for its options)\n\ncommands:\n");
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("starfa %s\n", STARFA_VERSION_STRING);
		return 0;
	}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].run(argc - 1, argv + 1);
	cli_error("unknown command '%s'", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}
