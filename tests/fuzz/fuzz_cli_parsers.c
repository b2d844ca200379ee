/* SPDX-License-Identifier: BSD-2-Clause */
/* Fuzz target: the CLI's parsers for node SPECs ("a,b=2,c"), --loads and --zones maps, and
 * numbers (--vnodes by each profile's rule). A SPEC that parses must build a ring or be refused
 * with a usage error; parsed values must be in their documented ranges. */
#include "cli.h"
#include "fuzz_input.h"

#include <stdio.h>
#include <stdlib.h>

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_cli_parsers: broken promise: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *quiet;
    if (!quiet) { /* the parsers' usage errors are expected here: keep them off the log */
        quiet = fopen("/dev/null", "w");
        cli_set_error_stream(quiet);
    }
    fuzz_input in = {data, size, 0};
    uint8_t mode = fuzz_byte(&in);
    size_t len;
    const uint8_t *rest = fuzz_rest(&in, &len);
    char *text = malloc(len + 1);
    if (!text)
        return 0;
    memcpy(text, rest, len);
    text[len] = 0;

    if (mode % 3 == 0) { /* numbers */
        unsigned long long v;
        if (cli_parse_u64(text, 1, 65536, &v) == 0)
            check(v >= 1 && v <= 65536, "u64 within its range");
        double d;
        if (cli_parse_double(text, &d) == 0)
            check(d == d, "a parsed double is not NaN");
        /* --vnodes takes exactly what the profile's rule (the library's) takes */
        const rl_profile_info *p = rl_profile_at(mode / 3 % rl_profile_count());
        uint32_t vnodes;
        if (cli_parse_vnodes("fuzz", p->name, text, &vnodes) == 0)
            check(rl_profile_check_vnodes(p->name, vnodes) == 0, "--vnodes by the profile's rule");
        free(text);
        return 0;
    }

    cli_spec spec;
    if (mode % 3 == 1) { /* a SPEC */
        if (cli_parse_spec("fuzz", "--nodes", text, &spec) == 0) {
            check(spec.count >= 1, "a SPEC has a node");
            for (size_t i = 0; i < spec.count; i++) {
                size_t n = strlen(spec.members[i].name);
                check(n >= 1 && n <= RL_NAME_MAX, "names within the limit");
                check(spec.members[i].weight >= 1 && spec.members[i].weight <= RL_WEIGHT_MAX,
                      "weights within the limit");
                check(!strchr(spec.members[i].name, ',') && !strchr(spec.members[i].name, '='),
                      "names hold no separator");
            }
            uint64_t weight = 0; /* big weights make big rings: keep each run fast */
            for (size_t i = 0; i < spec.count; i++)
                weight += spec.members[i].weight;
            rl_ring_t *r = NULL;
            if (weight <= 4096 && cli_build_ring("fuzz", NULL, 4, &spec, &r) == 0) {
                check(rl_ring_member_count(r) == spec.count, "the ring has the SPEC's nodes");
                rl_ring_free(r);
            }
            cli_spec_free(&spec);
        }
        free(text);
        return 0;
    }

    /* --loads and --zones over a fixed ring */
    check(cli_parse_spec("fuzz", "--nodes", "a,b,c=2,d", &spec) == 0, "fixed SPEC parses");
    rl_ring_t *r = NULL;
    check(cli_build_ring("fuzz", NULL, 4, &spec, &r) == 0, "fixed ring builds");
    uint64_t loads[4] = {0};
    const char *zones[4] = {0};
    char *zone_buf = NULL;
    if (cli_parse_map("fuzz", "--loads", text, r, NULL, NULL, loads) == 0)
        for (int i = 0; i < 4; i++)
            check(loads[i] <= UINT64_MAX / 2, "loads within the limit");
    if (cli_parse_map("fuzz", "--zones", text, r, &zone_buf, zones, NULL) == 0)
        for (int i = 0; i < 4; i++)
            check(!zones[i] || strlen(zones[i]) <= RL_NAME_MAX, "zones within the limit");
    free(zone_buf);
    rl_ring_free(r);
    cli_spec_free(&spec);
    free(text);
    return 0;
}
