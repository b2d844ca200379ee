/* SPDX-License-Identifier: BSD-2-Clause */
/* Argument parsing and reporting shared by the commands. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static FILE *error_stream;

void cli_set_error_stream(FILE *f)
{
    error_stream = f;
}

static void vreport(const char *cmd, const char *fmt, va_list ap)
{
    FILE *out = error_stream ? error_stream : stderr;
    fprintf(out, "ringlane %s: ", cmd);
    vfprintf(out, fmt, ap);
    fputc('\n', out);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, fmt, ap);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

void cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, fmt, ap);
    va_end(ap);
}

int cli_parse_u64(const char *s, unsigned long long min, unsigned long long max,
                  unsigned long long *out)
{
    if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int cli_parse_double(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || v != v)
        return -1;
    *out = v;
    return 0;
}

int cli_parse_spec(const char *cmd, const char *option, const char *text, cli_spec *out)
{
    memset(out, 0, sizeof *out);
    if (!text || !*text)
        return cli_usage_error(cmd, "%s: expected NAME[=WEIGHT],... with at least one node",
                               option);
    out->buf = strdup(text);
    size_t items = 1;
    for (const char *p = text; *p; p++)
        items += *p == ',';
    out->members = calloc(items, sizeof *out->members);
    if (!out->buf || !out->members) {
        cli_spec_free(out);
        return cli_usage_error(cmd, "out of memory");
    }
    char *p = out->buf;
    for (size_t i = 0; i < items; i++) {
        char *item = p;
        char *comma = strchr(p, ',');
        if (comma) {
            *comma = 0;
            p = comma + 1;
        }
        char *eq = strchr(item, '=');
        unsigned long long w = 1;
        if (eq) {
            *eq = 0;
            if (cli_parse_u64(eq + 1, 1, RL_WEIGHT_MAX, &w) != 0) {
                int rc = cli_usage_error(cmd, "%s: node '%s': weight must be an integer 1..%u",
                                         option, item, RL_WEIGHT_MAX);
                cli_spec_free(out);
                return rc;
            }
        }
        size_t n = strlen(item);
        if (n == 0 || n > RL_NAME_MAX) {
            int rc = cli_usage_error(cmd, "%s: item %zu: a node name must be 1..%u bytes", option,
                                     i + 1, RL_NAME_MAX);
            cli_spec_free(out);
            return rc;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(out->members[j].name, item) == 0) {
                int rc = cli_usage_error(cmd, "%s: node '%s' appears twice", option, item);
                cli_spec_free(out);
                return rc;
            }
        }
        out->members[i] = (rl_member){.name = item, .weight = (uint32_t)w};
    }
    out->count = items;
    return 0;
}

void cli_spec_free(cli_spec *spec)
{
    free(spec->buf);
    free(spec->members);
    memset(spec, 0, sizeof *spec);
}

int cli_check_profile(const char *cmd, const char *profile)
{
    if (profile && !rl_profile_find(profile)) {
        char names[256] = "";
        for (size_t i = 0; i < rl_profile_count(); i++) {
            strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, rl_profile_at(i)->name, sizeof names - strlen(names) - 1);
        }
        return cli_usage_error(cmd, "--profile: unknown profile '%s' (one of: %s)", profile, names);
    }
    return 0;
}

/* The largest vnodes any profile takes (maglev's table size); each profile checks its own. */
static uint32_t largest_vnodes(void)
{
    uint32_t max = RL_VNODES_MAX;
    for (size_t i = 0; i < rl_profile_count(); i++)
        if (rl_profile_at(i)->max_vnodes > max)
            max = rl_profile_at(i)->max_vnodes;
    return max;
}

int cli_parse_vnodes(const char *cmd, const char *text, uint32_t *out)
{
    unsigned long long v;
    if (!text) {
        *out = RL_VNODES_PROFILE;
        return 0;
    }
    if (cli_parse_u64(text, 1, largest_vnodes(), &v) != 0)
        return cli_usage_error(cmd, "--vnodes: expected an integer 1..%u, got '%s'",
                               largest_vnodes(), text);
    *out = (uint32_t)v;
    return 0;
}

/* Why a profile refused to build: a line that names what to change. */
static int build_error(const char *cmd, const char *profile, uint32_t vnodes, int rc)
{
    const rl_profile_info *p = rl_profile_find(profile ? profile : "default");
    if (rc == RL_ETOOBIG)
        return cli_usage_error(cmd,
                               "the ring would have more than %u points: lower --vnodes or "
                               "the weights",
                               RL_POINTS_MAX);
    if (rc == RL_EVNODES && strcmp(p->name, "maglev") == 0)
        return cli_usage_error(cmd,
                               "--vnodes: maglev's table size must be a prime up to %u, got %u",
                               p->max_vnodes, vnodes);
    if (rc == RL_EVNODES)
        return cli_usage_error(cmd, "--vnodes: profile %s takes 1..%u, got %u", p->name,
                               p->max_vnodes, vnodes);
    if (rc == RL_ENAME && strcmp(p->name, "ketama") == 0)
        return cli_usage_error(cmd, "ketama members are HOST or HOST:PORT with a port 1..65535");
    if (rc == RL_EWEIGHT && strcmp(p->kind, "computed") == 0)
        return cli_usage_error(cmd, "%s buckets take no weights (every bucket is one)", p->name);
    return cli_usage_error(cmd, "cannot build the ring: %s", rl_strerror(rc));
}

int cli_build_ring(const char *cmd, const char *profile, uint32_t vnodes, const cli_spec *spec,
                   rl_ring_t **out)
{
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = profile;
    o.vnodes = vnodes;
    int rc = rl_ring_build(spec->members, spec->count, &o, out);
    if (rc)
        return build_error(cmd, profile, vnodes, rc), rc;
    return 0;
}

ssize_t cli_next_key(FILE *f, char **buf, size_t *cap)
{
    ssize_t n = getline(buf, cap, f);
    if (n < 0)
        return -1;
    if (n > 0 && (*buf)[n - 1] == '\n')
        (*buf)[--n] = 0;
    return n;
}

void cli_print_key(const char *key, size_t len)
{
    fwrite(key, 1, len, stdout);
    fputc('\t', stdout);
}

int cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

int cli_parse_opts(const char *cmd, int argc, char **argv, cli_opt *opts, char **rest, int *nrest)
{
    int positional_only = 0;
    *nrest = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (positional_only || arg[0] != '-' || strcmp(arg, "-") == 0) {
            if (!rest)
                return cli_usage_error(cmd, "unexpected argument '%s' (see --help)", arg);
            rest[(*nrest)++] = argv[i];
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            positional_only = 1;
            continue;
        }
        const char *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        cli_opt *o = opts;
        while (o->name && !(strlen(o->name) == name_len && strncmp(o->name, arg, name_len) == 0))
            o++;
        if (!o->name)
            return cli_usage_error(cmd, "unknown option '%.*s' (see --help)", (int)name_len, arg);
        if (!o->value) {
            if (eq)
                return cli_usage_error(cmd, "%s takes no value", o->name);
            *o->flag = 1;
            continue;
        }
        if (eq) {
            *o->value = eq + 1;
        } else {
            if (i + 1 >= argc)
                return cli_usage_error(cmd, "%s needs a value (see --help)", o->name);
            *o->value = argv[++i];
        }
    }
    return 0;
}

/* Applies "NAME=VALUE,..." to the ring's members: zones (strings) or loads (integers). */
int cli_parse_map(const char *cmd, const char *option, const char *text, const rl_ring_t *ring,
                  char **zone_buf, const char **zones, uint64_t *loads)
{
    char *buf = strdup(text ? text : "");
    if (!buf)
        return cli_usage_error(cmd, "out of memory");
    int rc = 0;
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item && rc == 0;
         item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        uint32_t node;
        if (!eq) {
            rc = cli_usage_error(cmd, "%s: expected NAME=VALUE, got '%s'", option, item);
            break;
        }
        *eq = 0;
        if (rl_ring_find(ring, item, &node) != 0) {
            rc = cli_usage_error(cmd, "%s: '%s' is not one of the nodes", option, item);
            break;
        }
        unsigned long long v;
        if (zones) {
            if (strlen(eq + 1) > RL_NAME_MAX)
                rc = cli_usage_error(cmd, "%s: zone of '%s' is over %u bytes", option, item,
                                     RL_NAME_MAX);
            zones[node] = eq + 1;
        } else if (cli_parse_u64(eq + 1, 0, UINT64_MAX / 2, &v) != 0) {
            rc = cli_usage_error(cmd, "%s: load of '%s' must be a non-negative integer, got '%s'",
                                 option, item, eq + 1);
        } else {
            loads[node] = v;
        }
    }
    if (zones && rc == 0)
        *zone_buf = buf; /* the zones point into it */
    else
        free(buf);
    return rc;
}
