/* SPDX-License-Identifier: BSD-2-Clause */
/* Internal: the Prometheus text exposition format (version 0.0.4) on the JSON writer's counting
 * buffer (json_writer.h: snprintf's contract). A family is its "# HELP" and "# TYPE" lines
 * followed by all of its samples; label values are escaped as the format asks (backslash,
 * double quote, line feed). Header-only, like json_writer.h. */
#ifndef RINGLANE_PROM_WRITER_H
#define RINGLANE_PROM_WRITER_H

#include "json_writer.h"

#include <inttypes.h>
#include <stdint.h>

/* Starts a family: type "counter" (the name ends in _total) or "gauge". The help text must
 * hold no backslash or line feed. */
static inline void rl__prom_family(rl__json *o, const char *name, const char *type,
                                   const char *help)
{
    rl__json_put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value between double quotes, escaped. */
static inline void rl__prom_label_value(rl__json *o, const char *s)
{
    rl__json_put(o, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\\' || *p == '"')
            rl__json_put(o, "\\%c", *p);
        else if (*p == '\n')
            rl__json_put(o, "\\n");
        else
            rl__json_put(o, "%c", *p);
    }
    rl__json_put(o, "\"");
}

/* A sample without labels. */
static inline void rl__prom_u64(rl__json *o, const char *name, uint64_t v)
{
    rl__json_put(o, "%s %" PRIu64 "\n", name, v);
}

static inline void rl__prom_double(rl__json *o, const char *name, double v)
{
    rl__json_put(o, "%s %.9g\n", name, v);
}

/* A family of one sample without labels: its lines, then the value. */
static inline void rl__prom_metric_u64(rl__json *o, const char *name, const char *type,
                                       const char *help, uint64_t v)
{
    rl__prom_family(o, name, type, help);
    rl__prom_u64(o, name, v);
}

static inline void rl__prom_metric_double(rl__json *o, const char *name, const char *type,
                                          const char *help, double v)
{
    rl__prom_family(o, name, type, help);
    rl__prom_double(o, name, v);
}

#endif
