/* SPDX-License-Identifier: BSD-2-Clause */
/* Shared pieces of the ringlane command-line tool. */
#ifndef RINGLANE_CLI_H
#define RINGLANE_CLI_H

#include "ringlane/ringlane.h"

#include <stdio.h>
#include <sys/types.h>

#define CLI_EXIT_FAILURE 1 /* the job ran into bad data (a key the profile cannot route) */
#define CLI_EXIT_USAGE 2   /* a bad argument: nothing was done */
#define CLI_EXIT_REFUSED 3 /* grow: refused by what the cluster or the records hold */
#define CLI_EXIT_FENCED 4  /* grow: another run took the growth over */

#define CLI_PARTITIONS_MAX 100000 /* --partitions: the largest partition count */

/* The Kafka partitioner's default profile (RL_KAFKA_DEFAULT_PROFILE in ringlane/partitioner.h;
 * tests/test_partitioner.c checks that both answer alike): the profile of --partitions. */
#define CLI_PARTITIONS_PROFILE "balanced"

/* A parsed node SPEC: "a,b=2,c". Names point into `buf`. */
typedef struct cli_spec {
    char *buf;
    rl_member *members;
    size_t count;
} cli_spec;

/* Where error messages go (NULL: stderr); the fuzz target silences them. */
void cli_set_error_stream(FILE *f);

/* Prints "ringlane <cmd>: <message>" to stderr and returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "ringlane <cmd>: <message>" to stderr (for errors while running). */
void cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parses a decimal integer in [min, max] with nothing after it. Returns 0 or -1. */
int cli_parse_u64(const char *s, unsigned long long min, unsigned long long max,
                  unsigned long long *out);
int cli_parse_double(const char *s, double *out);

/* Parses a SPEC; on error prints a message naming the bad item and returns CLI_EXIT_USAGE. */
int cli_parse_spec(const char *cmd, const char *option, const char *text, cli_spec *out);
void cli_spec_free(cli_spec *spec);

/* The SPEC of n partitions: the nodes "0", "1", ..., "n-1" in order, weight 1. */
int cli_partition_spec(const char *cmd, unsigned long long n, cli_spec *out);

/* Parses "NAME=VALUE,..." over the ring's members: zones (into zones[node], pointing into a
 * buffer returned in *zone_buf for the caller to free) when zones is set, else loads (integers
 * 0..2^63-1 into loads[node]). Unknown names and bad values print an error and return
 * CLI_EXIT_USAGE. */
int cli_parse_map(const char *cmd, const char *option, const char *text, const rl_ring_t *ring,
                  char **zone_buf, const char **zones, uint64_t *loads);

/* Why rl_ring_build refused with rc under the profile (NULL: "default"), into buf: a line that
 * names what to change. Call it right after the build (it reads rl_last_error_detail()). */
const char *cli_build_why(const char *profile, int rc, char *buf, size_t size);

/* Builds a ring; on error prints why (naming the member where one is at fault). */
int cli_build_ring(const char *cmd, const char *profile, uint32_t vnodes, const cli_spec *spec,
                   rl_ring_t **out);

/* Parses --vnodes V for the profile (NULL: "default"; checked before) by the profile's rule
 * (rl_profile_explain_vnodes), or gives RL_VNODES_PROFILE when text is NULL. */
int cli_parse_vnodes(const char *cmd, const char *profile, const char *text, uint32_t *out);

/* Checks --profile P names a known profile (NULL is "default"). */
int cli_check_profile(const char *cmd, const char *profile);

/* Reads the next key (a line without its newline) from f. Returns its length, or -1 at EOF. */
ssize_t cli_next_key(FILE *f, char **buf, size_t *cap);

/* Writes "<key>\t" to stdout. */
void cli_print_key(const char *key, size_t len);

/* --json (json_out.c): JSON strings on stdout, escaped. Keys are any bytes: cli_json_key writes
 * "key":"..." when they are UTF-8, else "key_hex":"<their bytes in hex>". Node names must be
 * UTF-8 (cli_json_names refuses the others with a usage error). */
int cli_utf8_valid(const char *s, size_t len);
void cli_json_string(const char *s, size_t len);
void cli_json_name(const char *name);
void cli_json_key(const char *key, size_t len);
int cli_json_names(const char *cmd, const char *option, const cli_spec *spec);

/* The commands. argv[0] is the command's name. */
int cmd_route(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_table(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_hash(int argc, char **argv);
int cmd_profiles(int argc, char **argv);
int cmd_offsets(int argc, char **argv);
int cmd_grow(int argc, char **argv); /* with Kafka (RINGLANE_BUILD_KAFKA) only */

/* An option: "--name VALUE" (or --name=VALUE) when value is set, else a flag. */
typedef struct cli_opt {
    const char *name;
    const char **value;
    int *flag;
} cli_opt;

/* Parses argv[1..] against opts (terminated by a {NULL} entry). Positional arguments go to
 * rest (which must hold argc entries), or are an error when rest is NULL. */
int cli_parse_opts(const char *cmd, int argc, char **argv, cli_opt *opts, char **rest, int *nrest);

/* True when argv has -h or --help: the command prints its usage and exits 0. */
int cli_wants_help(int argc, char **argv);

#endif
