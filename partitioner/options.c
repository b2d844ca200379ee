/* SPDX-License-Identifier: BSD-2-Clause */
/* Partitioner options: defaults, checks, and the text properties the plugin accepts. */
#include "partitioner_internal.h"
#include "ringlane/error.h"
#include "ringlane/profile.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void rl_kafka_partitioner_options_init(rl_kafka_partitioner_options *opts)
{
    if (!opts)
        return;
    opts->profile = NULL;
    opts->vnodes = RL_VNODES_PROFILE;
    opts->null_key = RL_KAFKA_NULL_KEY_RANDOM;
    opts->null_key_partition = 0;
    opts->skip_unavailable = 0;
    opts->partitions_used = 0;
}

/* Why profile `info` cannot take these options, into why (0 when it can): vnodes the profile
 * does not take (the one rule of rl_profile_explain_vnodes, which rl_ring_build and the CLI
 * ask too: jump takes none, maglev a prime, ...), skip.unavailable with a profile that has no
 * clockwise order. */
static int combination(const rl_profile_info *info, uint32_t vnodes, int skip, char *why,
                       size_t size)
{
    char rule[160];
    int rc = rl_profile_explain_vnodes(info->name, vnodes, rule, sizeof rule);
    if (rc) {
        snprintf(why, size, "%s, got %u", rule, vnodes);
    } else if (skip && strcmp(info->kind, "ring") != 0) {
        rc = RL_ENOTSUP;
        snprintf(why, size,
                 "profile %s has no ring to walk to the next partition (skip.unavailable needs "
                 "a ring profile)",
                 info->name);
    }
    if (rc == 0 && size)
        why[0] = 0;
    return rc;
}

int rl__kafka_options_explain(const rl_kafka_partitioner_options *opts,
                              rl_kafka_partitioner_options *out, char *why, size_t size)
{
    rl_kafka_partitioner_options o;
    if (opts)
        o = *opts;
    else
        rl_kafka_partitioner_options_init(&o);
    if (size)
        why[0] = 0;
    const rl_profile_info *info = rl_profile_find(o.profile ? o.profile : RL_KAFKA_DEFAULT_PROFILE);
    if (!info) {
        snprintf(why, size, "unknown profile");
        return RL_EPROFILE;
    }
    o.profile = info->name;
    int rc = combination(info, o.vnodes, o.skip_unavailable, why, size);
    if (rc)
        return rc;
    if (o.null_key != RL_KAFKA_NULL_KEY_RANDOM && o.null_key != RL_KAFKA_NULL_KEY_FIXED) {
        snprintf(why, size, "unknown null-key policy %d", (int)o.null_key);
        return RL_EINVAL;
    }
    if (o.null_key == RL_KAFKA_NULL_KEY_FIXED &&
        (o.null_key_partition < 0 || o.null_key_partition > RL_KAFKA_PARTITION_MAX)) {
        snprintf(why, size, "null-key partition %ld is outside 0..%d", (long)o.null_key_partition,
                 RL_KAFKA_PARTITION_MAX);
        return RL_ERANGE;
    }
    if (o.partitions_used < 0) {
        snprintf(why, size, "partitions used %ld is negative (0: every partition)",
                 (long)o.partitions_used);
        return RL_ERANGE;
    }
    o.skip_unavailable = o.skip_unavailable != 0;
    *out = o;
    return 0;
}

int rl__kafka_options_check(const rl_kafka_partitioner_options *opts,
                            rl_kafka_partitioner_options *out)
{
    return rl__kafka_options_explain(opts, out, NULL, 0); /* no text: snprintf(NULL, 0) */
}

static void say(char *errstr, size_t errstr_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes the refusal to errstr and, in the same words, to rl_last_error_detail(). */
static void say(char *errstr, size_t errstr_size, const char *fmt, ...)
{
    char text[RL_ERROR_DETAIL_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    rl_error_detail_set(0, "%s", text);
    if (errstr && errstr_size > 0)
        snprintf(errstr, errstr_size, "%s", text);
}

/* A decimal integer in [min, max] with nothing around it. */
static int parse_uint(const char *s, unsigned long long min, unsigned long long max,
                      unsigned long long *out)
{
    if (!s || !*s)
        return -1;
    unsigned long long v = 0;
    for (const char *c = s; *c; c++) {
        if (*c < '0' || *c > '9')
            return -1;
        v = v * 10 + (unsigned long long)(*c - '0');
        if (v > max)
            return -1;
    }
    if (v < min)
        return -1;
    *out = v;
    return 0;
}

int rl_kafka_partitioner_option_set(rl_kafka_partitioner_options *opts, const char *name,
                                    const char *value, char *errstr, size_t errstr_size)
{
    rl_error_detail_clear();
    if (!opts || !name) {
        say(errstr, errstr_size, "ringlane: no option given");
        return RL_EINVAL;
    }
    const char *key = strncmp(name, "ringlane.", 9) == 0 ? name + 9 : name;
    if (value && !*value) /* librdkafka hands the plugin "" as NULL: mean the same here */
        value = NULL;
    rl_kafka_partitioner_options defaults;
    rl_kafka_partitioner_options_init(&defaults);
    unsigned long long v;

    if (strcmp(key, "profile") == 0) {
        const rl_profile_info *info = value ? rl_profile_find(value) : NULL;
        if (value && !info) {
            char names[256];
            rl_profile_names(names, sizeof names);
            say(errstr, errstr_size, "%s: unknown profile \"%s\" (valid: %s)", name, value, names);
            return RL_EPROFILE;
        }
        char why[256];
        int rc =
            info ? combination(info, opts->vnodes, opts->skip_unavailable, why, sizeof why) : 0;
        if (rc) {
            char vn[32] = "";
            if (opts->vnodes != RL_VNODES_PROFILE)
                snprintf(vn, sizeof vn, "vnodes %u", opts->vnodes);
            say(errstr, errstr_size, "%s: \"%s\" does not go with %s%s%s: %s", name, value, vn,
                *vn && opts->skip_unavailable ? " and " : "",
                opts->skip_unavailable ? "skip.unavailable true" : "", why);
            return rc;
        }
        opts->profile = info ? info->name : defaults.profile;
        return 0;
    }
    if (strcmp(key, "vnodes") == 0) {
        if (!value) {
            opts->vnodes = defaults.vnodes;
            return 0;
        }
        /* With a profile set, any number is checked by the profile's rule now (its range in the
         * message, not the widest); without one, what no profile takes is refused here and the
         * rest when the partitioner is made (a profile may still follow, in any order). */
        char why[256];
        if (parse_uint(value, opts->profile ? 0 : 1,
                       opts->profile ? RL_VNODES_PROFILE - 1 : RL_KAFKA_VNODES_MAX, &v) != 0) {
            if (opts->profile) {
                rl_profile_explain_vnodes(opts->profile, 0, why, sizeof why);
                say(errstr, errstr_size, "%s: %s, got \"%s\"", name, why, value);
            } else {
                say(errstr, errstr_size,
                    "%s: expected an integer 1..%u (vnodes per partition; each profile takes "
                    "its own range), got \"%s\"",
                    name, RL_KAFKA_VNODES_MAX, value);
            }
            return RL_ERANGE;
        }
        int rc = opts->profile ? combination(rl_profile_find(opts->profile), (uint32_t)v,
                                             opts->skip_unavailable, why, sizeof why)
                               : 0;
        if (rc) {
            say(errstr, errstr_size, "%s: %s", name, why);
            return rc;
        }
        opts->vnodes = (uint32_t)v;
        return 0;
    }
    if (strcmp(key, "null.key") == 0) {
        if (!value || strcmp(value, "random") == 0) {
            opts->null_key = RL_KAFKA_NULL_KEY_RANDOM;
            opts->null_key_partition = 0;
            return 0;
        }
        if (parse_uint(value, 0, RL_KAFKA_PARTITION_MAX, &v) != 0) {
            say(errstr, errstr_size,
                "%s: expected \"random\" or a partition number 0..%d, got \"%s\"", name,
                RL_KAFKA_PARTITION_MAX, value);
            return RL_ERANGE;
        }
        opts->null_key = RL_KAFKA_NULL_KEY_FIXED;
        opts->null_key_partition = (int32_t)v;
        return 0;
    }
    if (strcmp(key, "skip.unavailable") == 0) {
        if (!value || strcmp(value, "false") == 0 || strcmp(value, "0") == 0) {
            opts->skip_unavailable = 0;
            return 0;
        }
        if (strcmp(value, "true") == 0 || strcmp(value, "1") == 0) {
            char why[256];
            int rc = opts->profile ? combination(rl_profile_find(opts->profile), opts->vnodes, 1,
                                                 why, sizeof why)
                                   : 0;
            if (rc) {
                say(errstr, errstr_size, "%s: %s", name, why);
                return rc;
            }
            opts->skip_unavailable = 1;
            return 0;
        }
        say(errstr, errstr_size, "%s: expected true or false, got \"%s\"", name, value);
        return RL_ERANGE;
    }
    if (strcmp(key, "partitions.used") == 0) {
        if (!value) {
            opts->partitions_used = 0;
            return 0;
        }
        if (parse_uint(value, 0, RL_KAFKA_PARTITION_MAX, &v) != 0) {
            say(errstr, errstr_size,
                "%s: expected 0 (every partition) or a partition count 1..%d, got \"%s\"", name,
                RL_KAFKA_PARTITION_MAX, value);
            return RL_ERANGE;
        }
        opts->partitions_used = (int32_t)v;
        return 0;
    }
    say(errstr, errstr_size,
        "%s: unknown ringlane property (known: ringlane.profile, ringlane.vnodes, "
        "ringlane.null.key, ringlane.skip.unavailable, ringlane.partitions.used, "
        "ringlane.topics)",
        name);
    return RL_EINVAL;
}
