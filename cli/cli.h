/* Shared pieces of the starfa command-line tool. */
#ifndef STARFA_CLI_H
#define STARFA_CLI_H

#include "starfa.h"

#include <getopt.h>
#include <stdio.h>
#include <stdint.h>

/* Exit codes. */
enum { EXIT_USAGE = 2, EXIT_CHECK = 3 };

/* Options every command that starts the runtime accepts. */
#define CLI_RUNTIME_OPTIONS                                                                       \
	{"ncpus", required_argument, NULL, 1001}, {"ncuda", required_argument, NULL, 1002},     \
		{"sched", required_argument, NULL, 1003}, {"calibrate", required_argument, NULL, 1004}, \
		{"trace", required_argument, NULL, 1005}
#define CLI_RUNTIME_HELP                                                                          \
	"  --ncpus N        CPU workers (default: STARPU_NCPU or every core)\n"                    \
	"  --ncuda N        CUDA workers (default: STARPU_NCUDA or every GPU)\n"                   \
	"  --sched NAME     StarPU scheduler, e.g. dmda, dmdas, lws, not pheft or peager (default:\n"   \
	"                   STARPU_SCHED, else with GPU workers heteroprio, or dmda under\n"      \
	"                   STARFA_PLACEMENT=any, and lws without GPU workers)\n"                 \
	"  --calibrate N    0 off, 1 calibrate perfmodels, 2 reset and calibrate\n"                \
	"  --trace DIR      write StarPU's FxT trace of the run into DIR: paje.trace (ViTE),\n"     \
	"                   tasks.rec (scripts/gantt.py DIR/tasks.rec OUT.svg draws it per worker)\n"

/* Options of the commands that infer topic mixtures (transform, eval): the E-step's iterations and
 * tolerance. */
#define CLI_TOPIC_OPTIONS {"iters", required_argument, NULL, 1101}, {"tol", required_argument, NULL, 1102}
#define CLI_TOPIC_HELP                                                                            \
	"  --iters N        most E-step iterations inferring the mixtures (default 100)\n"          \
	"  --tol X          stop once the mean absolute change of gamma is under X (default 1e-3)\n"

/* Handles one topic option as cli_runtime_option does runtime ones. */
int cli_topic_option(int opt, const char *arg, starfa_topic_options *to);
/* 0 when the documents of `path` use no more words than topic model m knows; else an error naming the
 * file's line that declares them, and 1. */
int cli_check_vocabulary(const char *path, const starfa_coo *docs, const starfa_model *m);

/* Handles one runtime option (returns 1), or returns 0 when `opt` is not one; -1 on
 * a bad value (message printed). */
int cli_runtime_option(int opt, const char *arg, starfa_options *opts);
/* starfa_shutdown, then the trace's conversion when opts asked for one: returns rc, or 1 after a
 * message when the trace could not be written. */
int cli_shutdown(const starfa_options *opts, int rc);

/* Strict number parsing: the whole string, within [min, max]; prints an error naming
 * the option and returns -1 otherwise. */
int cli_parse_int(const char *option, const char *text, int64_t min, int64_t max, int64_t *out);
int cli_parse_double(const char *option, const char *text, double min, double max, double *out);

/* --format's value into *out; prints the error and returns -1 when it names no format. */
int cli_parse_format(const char *text, starfa_format *out);
/* 0 when argv has nothing left past optind, else prints the error and returns -1. */
int cli_no_operands(int argc, char **argv);

/* Prints "starfa: error: <message>" to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The last library error, printed as above; returns 1. */
int cli_library_error(void);

/* Reads a matrix file and converts it to CSR, printing the error on failure. */
int cli_load_csr(const char *path, starfa_format format, starfa_csr **out, starfa_coo **coo_out);

double cli_now_seconds(void);

/* An output file written whole or not at all: cli_open_output creates a temporary file beside path
 * (NULL after a message on failure, *tmp its name); cli_close_output with keep 1 renames it over path
 * (1 after a message when that or a write failed), with keep 0 removes it. */
FILE *cli_open_output(const char *path, char **tmp);
int cli_close_output(FILE *f, char *tmp, const char *path, int keep);

/* The table of --profile: per worker its tasks and where its time went, then the bytes per link. */
void cli_profile_print(FILE *out, const starfa_profile *p);

/* One line describing a model: "model: explicit (als), 610 users, 9724 items, rank 32, biases". */
void cli_model_print(FILE *out, const starfa_model *m);

int cmd_info(int argc, char **argv);
int cmd_stat(int argc, char **argv);
int cmd_sddmm(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_recommend(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_topics(int argc, char **argv);
int cmd_transform(int argc, char **argv);

#endif
