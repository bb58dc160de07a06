/* starfa info: what StarPU sees on this machine. */
#include "cli/cli.h"

#include <stdio.h>

int cmd_info(int argc, char **argv)
{
	static const struct option longopts[] = {CLI_RUNTIME_OPTIONS, {"help", no_argument, NULL, 'h'}, {0}};
	starfa_options opts;
	starfa_options_default(&opts);
	opts.silent = 1;
	int opt;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		int handled = cli_runtime_option(opt, optarg, &opts);
		if (handled < 0)
			return EXIT_USAGE;
		if (handled)
			continue;
		if (opt == 'h') {
			printf("usage: starfa info [OPTIONS]\n" CLI_RUNTIME_HELP);
			return 0;
		}
		return EXIT_USAGE;
	}
	if (optind < argc) {
		cli_error("info takes no arguments ('%s')", argv[optind]);
		return EXIT_USAGE;
	}
	if (starfa_init(&opts) != 0)
		return cli_library_error();
	starfa_print_info(stdout);
	return cli_shutdown(&opts, 0);
}
