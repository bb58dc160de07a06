/* starfa info: what StarPU sees on this machine, and with --idle SECONDS what its workers cost while
 * they have nothing to run: the process's CPU seconds over that stretch (the calling thread sleeps),
 * which is the number of cores the idle workers keep busy. */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

static double process_cpu_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_seconds(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* The idle workers' cores over `seconds`, after a tenth of a second in which the workers started by
 * starfa_init settle (they start awake). */
static void print_idle(double seconds)
{
	sleep_seconds(0.1);
	const double c0 = process_cpu_seconds(), t0 = cli_now_seconds();
	sleep_seconds(seconds);
	const double cpu = process_cpu_seconds() - c0, wall = cli_now_seconds() - t0;
	printf("idle for %.3f s: %.3f CPU seconds, %.2f cores busy with no task to run\n", wall, cpu,
	       wall > 0 ? cpu / wall : 0.0);
}

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
			       "  --idle SECONDS   then leave the workers idle that long and print the cores they keep\n"
			       "                   busy (the process's CPU seconds over it, this thread asleep)\n" CLI_RUNTIME_HELP);
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
		fflush(stdout);
		print_idle(idle);
	}
	return cli_shutdown(&opts, 0);
}
