/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane route: the owner (or preference list, or bounded placement) of each key on stdin. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: ringlane route [--profile P] [--vnodes V]\n"
    "         (--nodes SPEC | --partitions N) [--replicas R [--zones NAME=ZONE,...]]\n"
    "         [--bounded C [--loads NAME=L,...]] [--json]\n"
    "\n"
    "Reads keys from stdin, one per line (the line without its newline is the key),\n"
    "and prints <key><TAB><node> for each. SPEC is NAME[=WEIGHT],... e.g. a,b=2,c.\n"
    "  --profile P     ring profile (ringlane profiles lists them; default: default,\n"
    "                  and balanced with --partitions, as the Kafka partitioner);\n"
    "                  maglev, jump and memento take neither --replicas nor\n"
    "                  --bounded\n"
    "  --vnodes V      vnodes per unit of weight (default: the profile's); each\n"
    "                  profile takes its own range, jump and memento none\n"
    "                  (ringlane profiles NAME says which)\n"
    "  --partitions N  the nodes are the partitions 0..N-1 (N up to 100000), in\n"
    "                  order: the ring of the Kafka partitioner with the same\n"
    "                  profile and vnodes (--profile default: ringlane 0.1's)\n"
    "  --replicas R    print the first R distinct nodes clockwise:\n"
    "                  <key><TAB><n1>,<n2>,...\n"
    "  --zones MAP     with --replicas: members' zones; picks distinct zones first\n"
    "  --bounded C     bounded loads with factor C: keys are placed in input order,\n"
    "                  each placement adding one to its node's load\n"
    "  --loads MAP     with --bounded: starting loads, NAME=LOAD,... (default 0)\n"
    "  --json          one JSON object per key (JSON lines): {\"key\":K,\"node\":N}, or\n"
    "                  \"nodes\":[...] with --replicas; a key that is not UTF-8 is\n"
    "                  given as \"key_hex\" (its bytes in hex); names must be UTF-8\n"
    "Exit status: 0 ok, 1 some key could not be routed (reported on stderr),\n"
    "2 bad arguments.\n";

/* Rebuilds the ring with zones attached to its members. */
static int with_zones(const char *cmd, const char *profile, uint32_t vnodes, cli_spec *spec,
                      const char **zones, rl_ring_t **ring)
{
    for (size_t i = 0; i < spec->count; i++)
        spec->members[i].zone = zones[i];
    rl_ring_t *zoned;
    int rc = cli_build_ring(cmd, profile, vnodes, spec, &zoned);
    if (rc)
        return CLI_EXIT_USAGE;
    rl_ring_free(*ring);
    *ring = zoned;
    return 0;
}

/* One line of output: the key and its node(s), as text or as a JSON object. */
static void print_route(int json, const rl_ring_t *ring, const char *key, size_t len,
                        const uint32_t *list, size_t got, int many)
{
    if (!json) {
        cli_print_key(key, len);
        for (size_t i = 0; i < got; i++)
            printf(i ? ",%s" : "%s", rl_ring_node_name(ring, list[i]));
        putchar('\n');
        return;
    }
    putchar('{');
    cli_json_key(key, len);
    fputs(many ? ",\"nodes\":[" : ",\"node\":", stdout);
    for (size_t i = 0; i < got; i++) {
        if (i)
            putchar(',');
        cli_json_name(rl_ring_node_name(ring, list[i]));
    }
    fputs(many ? "]}\n" : "}\n", stdout);
}

int cmd_route(int argc, char **argv)
{
    const char *cmd = "route";
    if (cli_wants_help(argc, argv))
        return fputs(usage, stdout), 0;
    const char *profile = NULL, *vnodes_s = NULL, *nodes_s = NULL, *partitions_s = NULL,
               *replicas_s = NULL, *zones_s = NULL, *bounded_s = NULL, *loads_s = NULL;
    int json = 0;
    cli_opt opts[] = {{"--profile", &profile, NULL},     {"--vnodes", &vnodes_s, NULL},
                      {"--nodes", &nodes_s, NULL},       {"--partitions", &partitions_s, NULL},
                      {"--replicas", &replicas_s, NULL}, {"--zones", &zones_s, NULL},
                      {"--bounded", &bounded_s, NULL},   {"--loads", &loads_s, NULL},
                      {"--json", NULL, &json},           {NULL, NULL, NULL}};
    int nrest, rc = cli_parse_opts(cmd, argc, argv, opts, NULL, &nrest);
    if (rc)
        return rc;
    uint32_t vnodes;
    if (partitions_s && !profile)
        profile = CLI_PARTITIONS_PROFILE;
    if ((rc = cli_check_profile(cmd, profile)) ||
        (rc = cli_parse_vnodes(cmd, profile, vnodes_s, &vnodes)))
        return rc;
    if (!nodes_s == !partitions_s)
        return cli_usage_error(cmd, "give exactly one of --nodes SPEC and --partitions N");
    unsigned long long replicas = 0, partitions = 0;
    double c = 0;
    if (replicas_s && cli_parse_u64(replicas_s, 1, RL_MEMBERS_MAX, &replicas) != 0)
        return cli_usage_error(cmd, "--replicas: expected an integer 1..%u, got '%s'",
                               RL_MEMBERS_MAX, replicas_s);
    if (bounded_s && (cli_parse_double(bounded_s, &c) != 0 || c <= 0 || c > 1e6))
        return cli_usage_error(cmd,
                               "--bounded: expected a number > 0 (below 1 acts as 1), got "
                               "'%s'",
                               bounded_s);
    if (replicas_s && bounded_s)
        return cli_usage_error(cmd, "--replicas and --bounded cannot be combined");
    if (zones_s && !replicas_s)
        return cli_usage_error(cmd, "--zones needs --replicas");
    if (loads_s && !bounded_s)
        return cli_usage_error(cmd, "--loads needs --bounded");
    const rl_profile_info *info = rl_profile_find(profile ? profile : "default");
    if ((replicas_s || bounded_s) && strcmp(info->kind, "ring") != 0)
        return cli_usage_error(cmd, "%s: profile %s has no ring to walk (its lookups are %s)",
                               replicas_s ? "--replicas" : "--bounded", info->name,
                               strcmp(info->kind, "table") == 0 ? "a table" : "computed");
    if (partitions_s && cli_parse_u64(partitions_s, 1, CLI_PARTITIONS_MAX, &partitions) != 0)
        return cli_usage_error(cmd, "--partitions: expected an integer 1..%d, got '%s'",
                               CLI_PARTITIONS_MAX, partitions_s);

    cli_spec spec;
    rl_ring_t *ring = NULL;
    rc = partitions_s ? cli_partition_spec(cmd, partitions, &spec)
                      : cli_parse_spec(cmd, "--nodes", nodes_s, &spec);
    if (rc == 0 && json)
        rc = cli_json_names(cmd, "--nodes", &spec);
    if (rc) {
        cli_spec_free(&spec);
        return rc;
    }
    if (cli_build_ring(cmd, profile, vnodes, &spec, &ring) != 0) {
        cli_spec_free(&spec);
        return CLI_EXIT_USAGE;
    }
    size_t n = rl_ring_member_count(ring);
    uint64_t *loads = calloc(n, sizeof *loads);
    uint32_t *list = calloc(n, sizeof *list);
    const char **zones = calloc(n, sizeof *zones);
    char *zone_buf = NULL;
    if (!loads || !list || !zones)
        rc = cli_usage_error(cmd, "out of memory");
    if (rc == 0 && zones_s &&
        (rc = cli_parse_map(cmd, "--zones", zones_s, ring, &zone_buf, zones, NULL)) == 0)
        rc = with_zones(cmd, profile, vnodes, &spec, zones, &ring);
    if (rc == 0 && loads_s)
        rc = cli_parse_map(cmd, "--loads", loads_s, ring, NULL, NULL, loads);

    char *key = NULL;
    size_t cap = 0;
    ssize_t len;
    unsigned long line = 0, failed = 0;
    while (rc == 0 && (len = cli_next_key(stdin, &key, &cap)) >= 0) {
        line++;
        size_t got = 1;
        int err;
        if (replicas)
            err = zones_s ? rl_ring_replicas_zoned(ring, key, (size_t)len, list, replicas, &got)
                          : rl_ring_replicas(ring, key, (size_t)len, list, replicas, &got);
        else if (bounded_s)
            err = rl_ring_lookup_bounded(ring, key, (size_t)len, loads, c, &list[0]);
        else
            err = rl_ring_lookup(ring, key, (size_t)len, &list[0]);
        if (err) {
            cli_error(cmd, "line %lu: %s%s", line, rl_strerror(err),
                      err == RL_EBADKEY && strcmp(rl_ring_profile(ring), "turnstone") == 0
                          ? " (turnstone keys start with 4 hex digits)"
                          : "");
            failed++;
            continue;
        }
        if (bounded_s)
            loads[list[0]]++;
        print_route(json, ring, key, (size_t)len, list, got, replicas != 0);
    }
    free(key);
    free(loads);
    free(list);
    free(zones);
    free(zone_buf);
    rl_ring_free(ring);
    cli_spec_free(&spec);
    if (rc)
        return rc;
    if (fflush(stdout) != 0) {
        cli_error(cmd, "cannot write the output");
        return CLI_EXIT_FAILURE;
    }
    return failed ? CLI_EXIT_FAILURE : 0;
}
