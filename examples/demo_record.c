/* SPDX-License-Identifier: BSD-2-Clause */
/* The demo's record file (--record FILE): what this process produced, handled, dead-lettered
 * and saw committed, one line per fact (the format is in demo.h). The process-cluster test
 * (tests/cluster/) merges the files of every process and checks them with a program of its
 * own; nothing here decides whether a run passed. */
#define _POSIX_C_SOURCE 200809L
#include "demo.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void demo_record(demo *app, const char *fmt, ...)
{
    if (app->record_fd < 0)
        return;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    /* One write per line: O_APPEND keeps the lines of concurrent handlers whole. */
    const char *p = line;
    while (n > 0) {
        ssize_t w = write(app->record_fd, p, (size_t)n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            fprintf(stderr, "ringlane-demo: --record %s: %s\n", app->record, strerror(errno));
            return;
        }
        p += w;
        n -= (int)w;
    }
}

void demo_record_key(const rd_kafka_message_t *m, char *key, size_t size, long long *seq)
{
    if (!m->key || m->key_len == 0) {
        snprintf(key, size, "-");
    } else {
        bool text = m->key_len < size && m->key_len <= 64;
        for (size_t i = 0; text && i < m->key_len; i++) {
            unsigned char ch = ((const unsigned char *)m->key)[i];
            text = ch > ' ' && ch < 127;
        }
        if (text) {
            memcpy(key, m->key, m->key_len);
            key[m->key_len] = '\0';
        } else {
            snprintf(key, size, "?");
        }
    }
    /* The value is "<run> <k> <seq>" for keyed events, "<run> <word>" for the others. */
    *seq = -1;
    char v[96];
    if (m->payload && m->len < sizeof v) {
        memcpy(v, m->payload, m->len);
        v[m->len] = '\0';
        unsigned long long run;
        int k;
        long long s;
        if (sscanf(v, "%llx %d %lld", &run, &k, &s) == 3)
            *seq = s;
    }
}
