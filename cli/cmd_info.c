/* starfa info: what StarPU sees on this machine, and with --idle SECONDS what its workers cost while
 * they have nothing to run (starfa_idle_cost: the cores they keep busy after a short task each). */
#include "cli/cli.h"

#include <stdio.h>

int cmd_info(int argc, char **argv)
{
	static const struct option longopts[] = {CLI_RUNTIME_OPTIONS, {"idle", required_argument, NULL, 'i'},
						 {"help", no_argument, NULL, 'h'}, {0}};
	double idle = 0;
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
		if (opt == 'i') {
			if (cli_parse_double("idle", optarg, 1e-3, 3600, &idle))
				return EXIT_USAGE;
			continue;
		}
		if (opt == 'h') {
			printf("usage: starfa info [OPTIONS]\n"
			       "  --idle SECONDS   then run a 2 ms task on every worker in turn, leave them idle that long\n"
			       "                   and print the cores they keep busy (the process's CPU seconds over\n"
			       "                   it, this thread asleep)\n" CLI_RUNTIME_HELP);
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
	if (idle > 0) {
		double cpu, wall;
		if (starfa_idle_cost(idle, &cpu, &wall) != 0) {
			cli_library_error();
			return cli_shutdown(&opts, 1);
		}
		printf("idle for %.3f s after a task on every worker: %.3f CPU seconds, %.2f cores busy with no task "
		       "to run\n",
		       wall, cpu, wall > 0 ? cpu / wall : 0.0);
	}
	return cli_shutdown(&opts, 0);
}
