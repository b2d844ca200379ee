/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane_partitioner.so: the ring partitioner as a librdkafka plugin.
 *
 * `plugin.library.paths=.../ringlane_partitioner.so` makes librdkafka call conf_init() on the
 * configuration at once. conf_init() installs the partitioner on the default topic conf and
 * adds interceptors: on_conf_set takes the ringlane.* properties (so they must come after
 * plugin.library.paths), on_conf_dup and on_conf_destroy keep the partitioner alive exactly as
 * long as a configuration or client refers to it, and on_new / on_thread_start create the
 * topics named by ringlane.topics before the application can create them with a topic conf of
 * its own (kcat does), so that librdkafka hands the application the ring-partitioned topic.
 */
#define _GNU_SOURCE /* dladdr */
#include "partitioner_internal.h"
#include "ringlane/error.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IC_NAME "ringlane"
#define TOPICS_MAX 1000     /* names in ringlane.topics */
#define TOPIC_NAME_MAX 249u /* Kafka's limit */

/* One per configuration object the plugin was loaded on. */
typedef struct instance {
    _Atomic int refs; /* the configuration (then its client), plus each copy still using it */
    rl_kafka_partitioner_t *partitioner;
    rl_kafka_partitioner_options opts; /* as set so far by ringlane.* properties */
    int pending; /* opts do not go together yet (vnodes set, no profile that takes it): the
                    partitioner keeps the last options that did, and on_new refuses */
    rd_kafka_topic_conf_t *topic_conf; /* the default topic conf the partitioner was put on */
    char *topics;                      /* ringlane.topics, validated, or NULL */
} instance;

RL_EXTERN rd_kafka_resp_err_t conf_init(rd_kafka_conf_t *conf, void **plug_opaquep, char *errstr,
                                        size_t errstr_size);

static void instance_release(instance *in)
{
    if (atomic_fetch_sub_explicit(&in->refs, 1, memory_order_acq_rel) != 1)
        return;
    rl_kafka_partitioner_destroy(in->partitioner);
    free(in->topics);
    free(in);
}

static rd_kafka_resp_err_t on_conf_destroy(void *ic_opaque)
{
    instance_release(ic_opaque);
    return RD_KAFKA_RESP_ERR_NO_ERROR;
}

/* A copy of the configuration starts with a copy of the default topic conf, whose opaque is
 * this instance's partitioner. When the copy loads the plugin itself (it copies
 * plugin.library.paths), its conf_init() moves that topic conf to a partitioner of its own;
 * when it was filtered out, the copy keeps using this one. Either way, this instance must live
 * until the copy is destroyed too. */
static rd_kafka_resp_err_t on_conf_dup(rd_kafka_conf_t *new_conf, const rd_kafka_conf_t *old_conf,
                                       size_t filter_cnt, const char **filter, void *ic_opaque)
{
    (void)old_conf;
    (void)filter_cnt;
    (void)filter;
    instance *in = ic_opaque;
    atomic_fetch_add_explicit(&in->refs, 1, memory_order_relaxed);
    rd_kafka_conf_interceptor_add_on_conf_destroy(new_conf, IC_NAME, on_conf_destroy, in);
    return RD_KAFKA_RESP_ERR_NO_ERROR;
}

/* Kafka topic names: 1..249 of [a-zA-Z0-9._-]. */
static int valid_topic(const char *s, size_t len)
{
    if (len == 0 || len > TOPIC_NAME_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static rd_kafka_conf_res_t set_topics(instance *in, const char *name, const char *val, char *errstr,
                                      size_t errstr_size)
{
    if (!val || !*val) {
        free(in->topics);
        in->topics = NULL;
        return RD_KAFKA_CONF_OK;
    }
    size_t count = 0;
    for (const char *s = val;; count++) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (!valid_topic(s, len)) {
            snprintf(errstr, errstr_size,
                     "%s: expected a comma-separated list of topic names (1..%u characters of "
                     "a-z A-Z 0-9 . _ -), got \"%.*s\" in it",
                     name, TOPIC_NAME_MAX, (int)(len > 300 ? 300 : len), s);
            return RD_KAFKA_CONF_INVALID;
        }
        if (count + 1 > TOPICS_MAX) {
            snprintf(errstr, errstr_size, "%s: at most %d topics", name, TOPICS_MAX);
            return RD_KAFKA_CONF_INVALID;
        }
        if (!comma)
            break;
        s = comma + 1;
    }
    char *copy = strdup(val);
    if (!copy) {
        snprintf(errstr, errstr_size, "%s: out of memory", name);
        return RD_KAFKA_CONF_INVALID;
    }
    free(in->topics);
    in->topics = copy;
    return RD_KAFKA_CONF_OK;
}

static rd_kafka_conf_res_t on_conf_set(rd_kafka_conf_t *conf, const char *name, const char *val,
                                       char *errstr, size_t errstr_size, void *ic_opaque)
{
    (void)conf;
    instance *in = ic_opaque;
    if (strncmp(name, "ringlane.", 9) != 0)
        return RD_KAFKA_CONF_UNKNOWN;
    if (strcmp(name, "ringlane.topics") == 0)
        return set_topics(in, name, val, errstr, errstr_size);
    rl_kafka_partitioner_options next = in->opts;
    if (rl_kafka_partitioner_option_set(&next, name, val, errstr, errstr_size) != 0)
        return RD_KAFKA_CONF_INVALID;
    int rc = rl__kafka_partitioner_reconfigure(in->partitioner, &next);
    if (rc == RL_ESTATE) {
        snprintf(errstr, errstr_size,
                 "%s: the ring partitioner of this configuration is already in use", name);
        return RD_KAFKA_CONF_INVALID;
    }
    /* rc != 0 here only for vnodes that the default profile does not take while no profile is
     * set: a ringlane.profile may still follow (clients such as the Go one set properties in
     * no fixed order). on_new refuses what is still pending then. */
    in->pending = rc != 0;
    in->opts = next;
    return RD_KAFKA_CONF_OK;
}

/* Runs first on librdkafka's main thread, while rd_kafka_new() still waits for that thread to
 * start: topics made here exist before rd_kafka_new() returns, so the application's own
 * rd_kafka_topic_new() for the same name gets them (and its topic conf is discarded). */
static rd_kafka_resp_err_t on_thread_start(rd_kafka_t *rk, rd_kafka_thread_type_t thread_type,
                                           const char *thread_name, void *ic_opaque)
{
    (void)thread_name;
    instance *in = ic_opaque;
    if (thread_type != RD_KAFKA_THREAD_MAIN || !in->topics ||
        rd_kafka_type(rk) != RD_KAFKA_PRODUCER)
        return RD_KAFKA_RESP_ERR_NO_ERROR;
    char *list = strdup(in->topics);
    if (!list)
        return RD_KAFKA_RESP_ERR__CRIT_SYS_RESOURCE;
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    char *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        rd_kafka_topic_conf_t *tconf = rd_kafka_default_topic_conf_dup(rk);
        if (!tconf) {
            err = RD_KAFKA_RESP_ERR__CRIT_SYS_RESOURCE;
            break;
        }
        rl_kafka_partitioner_install(in->partitioner, tconf);
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, t, tconf);
        if (!rkt) {
            err = rd_kafka_last_error();
            continue;
        }
        /* The topic stays in the client (its partitions hold it) until rd_kafka_destroy(). */
        rd_kafka_topic_destroy(rkt);
    }
    free(list);
    return err;
}

static rd_kafka_resp_err_t on_new(rd_kafka_t *rk, const rd_kafka_conf_t *conf, void *ic_opaque,
                                  char *errstr, size_t errstr_size)
{
    instance *in = ic_opaque;
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    if (in->pending) {
        /* librdkafka cannot be stopped from here: it logs this, and the partitioner refuses
         * every keyed message (librdkafka answers them "Local: Unknown partition"). */
        rl_kafka_partitioner_options o;
        char why[256];
        rl__kafka_options_explain(&in->opts, &o, why, sizeof why);
        snprintf(errstr, errstr_size,
                 "ringlane: ringlane.vnodes=%u without a ringlane.profile that takes it: %s; "
                 "every keyed message is refused",
                 in->opts.vnodes, why);
        rl__kafka_partitioner_refuse(in->partitioner);
        return RD_KAFKA_RESP_ERR__INVALID_ARG;
    }
    if (in->topics)
        rd_kafka_interceptor_add_on_thread_start(rk, IC_NAME, on_thread_start, in);
    /* librdkafka logs a failed on_new(): the one way to tell the application that its own
     * default topic conf replaced the one carrying the partitioner. */
    if (rd_kafka_conf_get_default_topic_conf((rd_kafka_conf_t *)conf) != in->topic_conf) {
        snprintf(errstr, errstr_size,
                 "ringlane: the default topic configuration was replaced after "
                 "plugin.library.paths was set, so topics without a configuration of their own "
                 "do not use the ring partitioner");
        err = RD_KAFKA_RESP_ERR__INVALID_ARG;
    }
    return err;
}

/* The file holding an address, or NULL when the dynamic linker cannot tell. */
static const char *module_of(const void *addr, const void **base)
{
    Dl_info info;
    if (!addr || dladdr(addr, &info) == 0 || !info.dli_fbase)
        return NULL;
    *base = info.dli_fbase;
    return info.dli_fname && *info.dli_fname ? info.dli_fname : "the program";
}

/* The librdkafka that loaded the plugin (the one calling conf_init, found by the return
 * address) must be the one the plugin's own rd_kafka_* calls are bound to. A program that
 * links librdkafka in statically without exporting it (a Node addon built against a bundled
 * librdkafka.a; Go programs export their C symbols, so theirs is one) on a machine that also
 * has the shared librdkafka.so.1 has two: the plugin
 * would then hand the shared copy a configuration made by the program's copy, whose layout may
 * differ (a crash inside conf_init). Refused instead, naming both. */
static int check_one_librdkafka(const void *caller, char *errstr, size_t errstr_size)
{
    union {
        rd_kafka_conf_res_t (*fn)(rd_kafka_conf_t *, const char *, const char *, char *, size_t);
        const void *addr;
    } bound = {.fn = rd_kafka_conf_set};
    const void *caller_base = NULL, *bound_base = NULL;
    const char *caller_file = module_of(caller, &caller_base);
    const char *bound_file = module_of(bound.addr, &bound_base);
    if (!caller_file || !bound_file || caller_base == bound_base)
        return 0;
    snprintf(errstr, errstr_size,
             "ringlane: two copies of librdkafka in this process: the one that loads the "
             "plugin is in %s, the one the plugin's calls go to is in %s (librdkafka %s). The "
             "plugin works only with a client that uses the shared librdkafka it was built for "
             "(e.g. a client built against the system librdkafka.so.1, not one that bundles "
             "its own)",
             caller_file, bound_file, rd_kafka_version_str());
    return -1;
}

rd_kafka_resp_err_t conf_init(rd_kafka_conf_t *conf, void **plug_opaquep, char *errstr,
                              size_t errstr_size)
{
    *plug_opaquep = NULL;
    /* Before anything touches conf: it may belong to another librdkafka. */
    if (check_one_librdkafka(__builtin_return_address(0), errstr, errstr_size) != 0)
        return RD_KAFKA_RESP_ERR__INVALID_ARG;
    instance *in = calloc(1, sizeof *in);
    if (!in || rl_kafka_partitioner_new(NULL, &in->partitioner) != 0) {
        free(in);
        snprintf(errstr, errstr_size, "ringlane: out of memory");
        return RD_KAFKA_RESP_ERR__CRIT_SYS_RESOURCE;
    }
    atomic_init(&in->refs, 1);
    rl_kafka_partitioner_options_init(&in->opts);

    /* librdkafka refuses a second on_conf_set of ours (CONFLICT) when the plugin is already
     * active on this configuration (plugin.library.paths set twice): keep the first. */
    if (rd_kafka_conf_interceptor_add_on_conf_set(conf, IC_NAME, on_conf_set, in) != 0) {
        rl_kafka_partitioner_destroy(in->partitioner);
        free(in);
        *plug_opaquep = NULL;
        return RD_KAFKA_RESP_ERR_NO_ERROR;
    }
    rd_kafka_conf_interceptor_add_on_conf_dup(conf, IC_NAME, on_conf_dup, in);
    rd_kafka_conf_interceptor_add_on_conf_destroy(conf, IC_NAME, on_conf_destroy, in);
    rd_kafka_conf_interceptor_add_on_new(conf, IC_NAME, on_new, in);

    rd_kafka_topic_conf_t *tconf = rd_kafka_conf_get_default_topic_conf(conf);
    if (!tconf) {
        tconf = rd_kafka_topic_conf_new();
        rd_kafka_conf_set_default_topic_conf(conf, tconf); /* conf owns it now */
    }
    rl_kafka_partitioner_install(in->partitioner, tconf);
    in->topic_conf = tconf;
    *plug_opaquep = in;
    return RD_KAFKA_RESP_ERR_NO_ERROR;
}
