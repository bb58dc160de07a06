/* starfa stat: dimensions, nonzeros and the tiling a matrix file would get. */
#include "cli/cli.h"

#include <stdio.h>

int cmd_stat(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLI_RUNTIME_OPTIONS,
		{"format", required_argument, NULL, 'f'},
		{"row-tiles", required_argument, NULL, 'r'},
		{"col-tiles", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	starfa_options opts;
	starfa_options_default(&opts);
	opts.silent = 1;
	starfa_format format = STARFA_FORMAT_AUTO;
	starfa_tiling_options tiling = {0, 0, 0};
	int opt;
	while ((opt = getopt_long(argc, argv, "f:h", longopts, NULL)) != -1) {
		int handled = cli_runtime_option(opt, optarg, &opts);
		if (handled < 0)
			return EXIT_USAGE;
		if (handled)
			continue;
		switch (opt) {
		case 'f':
			if (cli_parse_format(optarg, &format))
				return EXIT_USAGE;
			break;
		case 'r':
		case 'c': {
			int64_t v;
			if (cli_parse_int(opt == 'r' ? "row-tiles" : "col-tiles", optarg, 1, 1 << 20, &v))
				return EXIT_USAGE;
			*(opt == 'r' ? &tiling.row_tiles : &tiling.col_tiles) = v;
			break;
		}
		case 'h':
			printf("usage: starfa stat [--format mtx|ratings|docword] [--row-tiles R] [--col-tiles C] FILE\n"
			       "Prints rows=R cols=C nnz=Z, then the tiling starfa would use.\n" CLI_RUNTIME_HELP);
			return 0;
		default:
			return EXIT_USAGE;
		}
	}
	if (optind + 1 != argc) {
		cli_error("stat takes exactly one FILE");
		return EXIT_USAGE;
	}
	starfa_csr *csr = NULL;
	starfa_coo *coo = NULL;
	if (cli_load_csr(argv[optind], format, &csr, &coo))
		return 1;
	/* The file's entry count: duplicates are summed in the CSR, so report both when they differ. */
	printf("rows=%lld cols=%lld nnz=%lld\n", (long long)csr->nrows, (long long)csr->ncols, (long long)csr->nnz);
	if (coo->nnz != csr->nnz)
		printf("entries=%lld (duplicates summed)\n", (long long)coo->nnz);
	starfa_coo_free(coo);
	int rc = 0;
	starfa_tiled *t = NULL;
	if (starfa_init(&opts) != 0) {
		starfa_csr_free(csr);
		return cli_library_error();
	}
	if (starfa_tiled_create(csr, &tiling, &t) != 0)
		rc = cli_library_error();
	else
		starfa_tiled_describe(t, stdout);
	starfa_tiled_free(t);
	rc = cli_shutdown(&opts, rc);
	starfa_csr_free(csr);
	return rc;
}
