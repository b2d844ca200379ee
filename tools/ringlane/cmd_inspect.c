/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane table, stats and hash: looking at rings and hashes. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char table_usage[] =
    "usage: ringlane table --profile turnstone [--vnodes V] --nodes SPEC\n"
    "\n"
    "Prints the full assignment table of a 16-bit ring: <bucket><TAB><node> for the\n"
    "buckets 0..65535. SPEC is NAME[=WEIGHT],... (turnstone gives each member\n"
    "weight x 150 points).\n";

static const char stats_usage[] =
    "usage: ringlane stats [--profile P] [--vnodes V] --nodes SPEC [--json]\n"
    "\n"
    "Prints each node's arc share (the fraction of the ring it owns) as\n"
    "<node><TAB><share>, then points<TAB><count>, gap_cv<TAB><coefficient of\n"
    "variation of the gaps between points> and max/mean<TAB><largest share divided\n"
    "by the mean share>. For maglev the shares are table entries, points is the\n"
    "table size and gap_cv is 0; jump and memento have nothing to measure.\n"
    "  --json   one JSON document: {\"profile\",\"vnodes\",\"nodes\":[{\"node\",\"share\"}],\n"
    "           \"points\",\"gap_cv\",\"max_mean\"}; node names must be UTF-8\n";

static const char hash_usage[] =
    "usage: ringlane hash --hash NAME STRING...\n"
    "\n"
    "Prints the hash of each STRING (its bytes) in decimal, one per line. NAME is\n"
    "one of: fnv1a32, fnv1a64, hash64, xmur3, xxh3, xxh64 (seed 0), md5 (first 4\n"
    "bytes little-endian: ketama's key hash), crc32.\n";

/* --profile, --vnodes, --nodes (and --json where json is set): the options every
 * ring-inspecting command shares. */
static int ring_from_args(const char *cmd, int argc, char **argv, int *json, cli_spec *spec,
                          rl_ring_t **ring)
{
    const char *profile = NULL, *vnodes_s = NULL, *nodes_s = NULL;
    cli_opt opts[] = {{"--profile", &profile, NULL},
                      {"--vnodes", &vnodes_s, NULL},
                      {"--nodes", &nodes_s, NULL},
                      {json ? "--json" : NULL, NULL, json},
                      {NULL, NULL, NULL}};
    int nrest, rc = cli_parse_opts(cmd, argc, argv, opts, NULL, &nrest);
    uint32_t vnodes;
    if (rc || (rc = cli_check_profile(cmd, profile)) ||
        (rc = cli_parse_vnodes(cmd, profile, vnodes_s, &vnodes)))
        return rc;
    if (!nodes_s)
        return cli_usage_error(cmd, "--nodes SPEC is required");
    if ((rc = cli_parse_spec(cmd, "--nodes", nodes_s, spec)))
        return rc;
    if (json && *json && (rc = cli_json_names(cmd, "--nodes", spec))) {
        cli_spec_free(spec);
        return rc;
    }
    if (cli_build_ring(cmd, profile, vnodes, spec, ring) != 0) {
        cli_spec_free(spec);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

static int finish(const char *cmd, int rc)
{
    if (rc == 0 && fflush(stdout) != 0) {
        cli_error(cmd, "cannot write the output");
        return CLI_EXIT_FAILURE;
    }
    return rc;
}

int cmd_table(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return fputs(table_usage, stdout), 0;
    cli_spec spec;
    rl_ring_t *ring = NULL;
    int rc = ring_from_args("table", argc, argv, NULL, &spec, &ring);
    if (rc)
        return rc;
    uint32_t *table = malloc(65536 * sizeof *table);
    if (!table) {
        rc = cli_usage_error("table", "out of memory");
    } else {
        int err = rl_ring_bucket_table(ring, table, 65536);
        if (err == RL_ENOTSUP)
            rc = cli_usage_error("table",
                                 "--profile %s has a %u-bit ring; table needs a 16-bit "
                                 "profile (turnstone)",
                                 rl_ring_profile(ring), rl_ring_hash_bits(ring));
        else if (err)
            rc = cli_usage_error("table", "%s", rl_strerror(err));
        for (uint32_t b = 0; rc == 0 && b < 65536; b++)
            printf("%u\t%s\n", b, rl_ring_node_name(ring, table[b]));
    }
    free(table);
    rl_ring_free(ring);
    cli_spec_free(&spec);
    return finish("table", rc);
}

int cmd_stats(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return fputs(stats_usage, stdout), 0;
    cli_spec spec;
    rl_ring_t *ring = NULL;
    int json = 0;
    int rc = ring_from_args("stats", argc, argv, &json, &spec, &ring);
    if (rc)
        return rc;
    size_t n = rl_ring_member_count(ring);
    double *shares = calloc(n, sizeof *shares);
    rl_ring_stats st;
    int err = shares ? rl_ring_stats_get(ring, &st, shares) : RL_ENOMEM;
    if (err == RL_ENOTSUP) {
        rc = cli_usage_error("stats",
                             "profile %s computes each key's bucket: there are no arcs or "
                             "table entries to measure (each of the %zu buckets gets 1/%zu of "
                             "the keys in expectation)",
                             rl_ring_profile(ring), n, n);
    } else if (err) {
        rc = cli_usage_error("stats", "%s", rl_strerror(err));
    } else if (json) {
        fputs("{\"profile\":", stdout);
        cli_json_name(rl_ring_profile(ring));
        printf(",\"vnodes\":%u,\"nodes\":[", rl_ring_vnodes(ring));
        for (uint32_t i = 0; i < n; i++) {
            printf("%s{\"node\":", i ? "," : "");
            cli_json_name(rl_ring_node_name(ring, i));
            printf(",\"share\":%.9g}", shares[i]);
        }
        printf("],\"points\":%zu,\"gap_cv\":%.9g,\"max_mean\":%.9g}\n", st.points, st.gap_cv,
               st.max_mean_share);
    } else {
        for (uint32_t i = 0; i < n; i++)
            printf("%s\t%.6f\n", rl_ring_node_name(ring, i), shares[i]);
        printf("points\t%zu\n", st.points);
        printf("gap_cv\t%.6f\n", st.gap_cv);
        printf("max/mean\t%.6f\n", st.max_mean_share);
    }
    free(shares);
    rl_ring_free(ring);
    cli_spec_free(&spec);
    return finish("stats", rc);
}

int cmd_hash(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return fputs(hash_usage, stdout), 0;
    const char *name = NULL;
    cli_opt opts[] = {{"--hash", &name, NULL}, {NULL, NULL, NULL}};
    char **rest = calloc((size_t)argc, sizeof *rest);
    int nrest = 0, rc = rest ? cli_parse_opts("hash", argc, argv, opts, rest, &nrest)
                             : cli_usage_error("hash", "out of memory");
    uint64_t h;
    if (rc == 0 && !name)
        rc = cli_usage_error("hash", "--hash NAME is required (fnv1a32, fnv1a64, hash64, xmur3, "
                                     "xxh3, xxh64, md5, crc32)");
    if (rc == 0 && rl_hash_by_name(name, "", 0, &h) != 0)
        rc = cli_usage_error("hash",
                             "--hash: unknown hash '%s' (fnv1a32, fnv1a64, hash64, "
                             "xmur3, xxh3, xxh64, md5, crc32)",
                             name);
    if (rc == 0 && nrest == 0)
        rc = cli_usage_error("hash", "give at least one STRING to hash");
    for (int i = 0; rc == 0 && i < nrest; i++) {
        rl_hash_by_name(name, rest[i], strlen(rest[i]), &h);
        printf("%llu\n", (unsigned long long)h);
    }
    free(rest);
    return finish("hash", rc);
}
