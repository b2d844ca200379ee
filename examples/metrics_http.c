/* SPDX-License-Identifier: BSD-2-Clause */
/* metrics_http: a dispatcher's statistics served to Prometheus over HTTP, on the dispatcher's
 * own libuv loop.
 *
 * The program runs an asynchronous dispatcher with some work (jobs of many keys, each held in
 * flight for a few milliseconds, a hot key, and a lane added and removed now and then), and
 * answers GET /metrics with rl_dispatch_stats_prometheus: the text exposition format 0.0.4,
 * the totals and the busiest lanes. Everything runs on one loop thread: the scrape reads the
 * statistics between jobs, as any libuv handle would.
 *
 * The server is deliberately small and strict, a pattern to copy rather than a web server:
 *   - it listens on 127.0.0.1 unless --bind says otherwise (metrics are not for the world);
 *   - it serves GET /metrics only: another path is 404, another method 405 (with Allow: GET);
 *   - a request (line and headers) longer than MAX_REQUEST bytes is 413, one that is not
 *     HTTP/1.x (a bad request line, a header line without a colon) is 400;
 *   - every answer carries Connection: close and the connection is closed once it is written;
 *     a client that sends nothing for IDLE_MS is closed; one that disconnects mid-request
 *     just goes away.
 *
 *   build/examples/metrics_http [--bind ADDR] [--port N] [--lanes N] [--seconds N]
 *
 * --port 0 (the default) takes a free port; the program prints "listening on
 * http://ADDR:PORT/metrics" once it listens. --seconds 0 (the default) runs until SIGINT or
 * SIGTERM; either ends it cleanly (exit 0).
 */
#define _POSIX_C_SOURCE 200809L
#include <ringlane/dispatcher.h>
#include <ringlane/error.h>

#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define MAX_REQUEST 8192 /* bytes of request line and headers */
#define IDLE_MS 5000     /* a connection that sends nothing for this long is closed */
#define KEYS 10000       /* keys of the work */
#define FEED_MS 10       /* the work: a batch of jobs every FEED_MS */
#define FEED_JOBS 200
#define WORK_MS 5      /* ... each held in flight until the next work tick */
#define CHANGE_MS 2000 /* a lane added or removed every CHANGE_MS */

/* --- the work: an asynchronous dispatcher with jobs in flight --- */

typedef struct app {
    uv_loop_t *loop;
    rl_dispatcher_t *d;
    uv_tcp_t server;
    uv_timer_t feed, work, change, stop;
    uv_signal_t sigint, sigterm;
    uint64_t *pending; /* tickets of jobs in flight */
    size_t npending, pending_cap;
    uint64_t seed;
    int changes;
    char *text; /* the last scrape's text, reused */
    size_t text_cap;
    bool stopping;
} app;

static void start_job(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    app *a = rl_dispatch_get_data(d);
    if (a->npending == a->pending_cap) {
        size_t cap = a->pending_cap ? 2 * a->pending_cap : 1024;
        uint64_t *p = realloc(a->pending, cap * sizeof *p);
        if (!p) {
            rl_dispatch_complete(d, job->ticket, RL_ENOMEM); /* retried later */
            return;
        }
        a->pending = p;
        a->pending_cap = cap;
    }
    a->pending[a->npending++] = job->ticket;
}

/* Ends the jobs in flight; their lanes start the next ones (which wait for the next tick). */
static void on_work(uv_timer_t *t)
{
    app *a = t->data;
    size_t n = a->npending;
    a->npending = 0;
    for (size_t i = 0; i < n; i++)
        rl_dispatch_complete(a->d, a->pending[i], 0);
}

static uint64_t next_rand(app *a)
{
    a->seed = a->seed * 6364136223846793005ull + 1442695040888963407ull;
    return a->seed >> 33;
}

static void on_feed(uv_timer_t *t)
{
    app *a = t->data;
    for (int i = 0; i < FEED_JOBS; i++) {
        char key[24];
        /* One job in ten is the hot key's: its lane is the busiest. */
        if (i % 10 == 0)
            snprintf(key, sizeof key, "hot");
        else
            snprintf(key, sizeof key, "key-%u", (unsigned)(next_rand(a) % KEYS));
        if (rl_dispatch_try_submit(a->d, key, strlen(key), NULL, 0) == RL_EAGAIN)
            break; /* full: the next feed tries again */
    }
}

static void on_change(uv_timer_t *t)
{
    app *a = t->data;
    char name[32];
    snprintf(name, sizeof name, "extra-%d", a->changes / 2);
    if (a->changes++ % 2 == 0)
        rl_dispatch_add_lane(a->d, name);
    else
        rl_dispatch_remove_lane(a->d, name);
}

/* --- the HTTP side --- */

typedef struct conn {
    uv_tcp_t tcp;
    uv_timer_t idle;
    uv_write_t write;
    app *a;
    char req[MAX_REQUEST];
    size_t len;
    char head[256];
    char *body; /* owned: the response's text */
    int open_handles;
    bool answered;
} conn;

static void on_conn_handle_closed(uv_handle_t *h)
{
    conn *c = h->data;
    if (--c->open_handles == 0) {
        free(c->body);
        free(c);
    }
}

static void conn_close(conn *c)
{
    if (!uv_is_closing((uv_handle_t *)&c->tcp)) {
        uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
        uv_close((uv_handle_t *)&c->idle, on_conn_handle_closed);
    }
}

static void on_written(uv_write_t *w, int status)
{
    (void)status; /* a client that went away: closed all the same */
    conn_close(w->data);
}

/* Writes the status line, the headers and body (may be NULL), then closes. */
static void respond(conn *c, const char *status, const char *extra, char *body, size_t body_len)
{
    c->answered = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->body = body;
    int n = snprintf(c->head, sizeof c->head,
                     "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
                     "Connection: close\r\n\r\n",
                     status, body ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain",
                     body_len, extra ? extra : "");
    uv_buf_t bufs[2] = {uv_buf_init(c->head, (unsigned)n),
                        uv_buf_init(body ? body : "", (unsigned)body_len)};
    c->write.data = c;
    if (uv_write(&c->write, (uv_stream_t *)&c->tcp, bufs, body ? 2 : 1, on_written) != 0)
        conn_close(c);
}

/* The statistics as Prometheus text, in a buffer of its own for this response. */
static char *metrics_text(app *a, size_t *len)
{
    size_t need = 0;
    int rc =
        rl_dispatch_stats_prometheus(a->d, RL_DISPATCH_STATS_LANES, a->text, a->text_cap, &need);
    for (int tries = 0; rc == RL_ERANGE && tries < 4; tries++) {
        size_t cap = need + need / 8 + 1024; /* busy lanes may come between two calls */
        char *p = realloc(a->text, cap);
        if (!p)
            return NULL;
        a->text = p;
        a->text_cap = cap;
        rc = rl_dispatch_stats_prometheus(a->d, RL_DISPATCH_STATS_LANES, a->text, a->text_cap,
                                          &need);
    }
    if (rc)
        return NULL;
    char *body = malloc(need + 1); /* the response owns its copy until it is written */
    if (body)
        memcpy(body, a->text, need + 1);
    *len = need;
    return body;
}

static bool is_token_char(char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch));
}

/* The request is complete (its head ends at `end`, the blank line): answer it. */
static void serve(conn *c, size_t end)
{
    if (memchr(c->req, '\0', end)) { /* no NUL in a request head */
        respond(c, "400 Bad Request", NULL, NULL, 0);
        return;
    }
    c->req[end] = '\0';
    char *line_end = strstr(c->req, "\r\n");
    *line_end = '\0';
    /* METHOD SP TARGET SP HTTP/1.x */
    char *method = c->req, *sp1 = strchr(method, ' ');
    char *target = sp1 ? sp1 + 1 : NULL, *sp2 = target ? strchr(target, ' ') : NULL;
    bool ok = sp1 && sp2 && sp1 > method && sp2 > target && target[0] == '/' &&
              (strcmp(sp2 + 1, "HTTP/1.1") == 0 || strcmp(sp2 + 1, "HTTP/1.0") == 0);
    for (char *p = method; ok && p < sp1; p++)
        ok = is_token_char(*p);
    for (char *p = target; ok && p < sp2; p++)
        ok = *p > ' ' && *p < 0x7f;
    /* Each header line is NAME: value. */
    for (char *h = line_end + 2; ok && *h;) {
        char *nl = strstr(h, "\r\n");
        if (!nl)
            nl = h + strlen(h);
        char *colon = memchr(h, ':', (size_t)(nl - h));
        ok = colon && colon > h;
        for (char *p = h; ok && p < colon; p++)
            ok = is_token_char(*p);
        h = *nl ? nl + 2 : nl;
    }
    if (!ok) {
        respond(c, "400 Bad Request", NULL, NULL, 0);
        return;
    }
    *sp1 = *sp2 = '\0';
    size_t path_len = strcspn(target, "?");
    if (path_len != 8 || strncmp(target, "/metrics", 8) != 0) {
        respond(c, "404 Not Found", NULL, NULL, 0);
    } else if (strcmp(method, "GET") != 0) {
        respond(c, "405 Method Not Allowed", "Allow: GET\r\n", NULL, 0);
    } else {
        size_t len = 0;
        char *body = metrics_text(c->a, &len);
        if (body)
            respond(c, "200 OK", NULL, body, len);
        else
            respond(c, "503 Service Unavailable", NULL, NULL, 0);
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    conn *c = h->data;
    /* One byte more than the limit may come in: it says the request is too long. */
    *buf = uv_buf_init(c->req + c->len, (unsigned)(sizeof c->req - c->len));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    conn *c = s->data;
    if (nread < 0) { /* the client went away, or an error: nothing to answer */
        conn_close(c);
        return;
    }
    if (nread == 0 || c->answered)
        return;
    size_t from = c->len > 3 ? c->len - 3 : 0; /* the blank line may straddle two reads */
    c->len += (size_t)nread;
    uv_timer_again(&c->idle);
    for (size_t i = from; i + 4 <= c->len; i++)
        if (memcmp(c->req + i, "\r\n\r\n", 4) == 0) {
            serve(c, i + 2); /* keep the last header's CRLF, drop the blank line */
            return;
        }
    if (c->len >= sizeof c->req - 1)
        respond(c, "413 Content Too Large", NULL, NULL, 0);
}

static void on_idle(uv_timer_t *t)
{
    conn_close(t->data);
}

static void on_connection(uv_stream_t *server, int status)
{
    app *a = server->data;
    if (status < 0)
        return;
    conn *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->a = a;
    uv_tcp_init(a->loop, &c->tcp);
    uv_timer_init(a->loop, &c->idle);
    c->tcp.data = c->idle.data = c;
    c->open_handles = 2;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
        conn_close(c);
        return;
    }
    uv_timer_start(&c->idle, on_idle, IDLE_MS, IDLE_MS);
}

/* --- start and stop --- */

static void on_closed(rl_dispatcher_t *d)
{
    app *a = rl_dispatch_get_data(d);
    a->d = NULL;
    uv_close((uv_handle_t *)&a->work, NULL); /* it ended the jobs in flight until now */
}

static void stop(app *a)
{
    if (a->stopping)
        return;
    a->stopping = true;
    uv_close((uv_handle_t *)&a->server, NULL);
    uv_close((uv_handle_t *)&a->feed, NULL);
    uv_close((uv_handle_t *)&a->change, NULL);
    uv_close((uv_handle_t *)&a->stop, NULL);
    uv_close((uv_handle_t *)&a->sigint, NULL);
    uv_close((uv_handle_t *)&a->sigterm, NULL);
    /* Queued jobs are handed back; the work timer ends those in flight, then the close ends. */
    rl_dispatch_close(a->d, RL_DISPATCH_STOP, on_closed);
}

static void on_signal(uv_signal_t *s, int signum)
{
    (void)signum;
    stop(s->data);
}

static void on_stop(uv_timer_t *t)
{
    stop(t->data);
}

static int usage(void)
{
    fprintf(stderr, "usage: metrics_http [--bind ADDR] [--port N] [--lanes N] [--seconds N]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *bind = "127.0.0.1";
    long port = 0, lanes = 64, seconds = 0;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (i + 1 >= argc)
            return usage();
        if (strcmp(argv[i], "--bind") == 0) {
            bind = argv[++i];
            continue;
        }
        long *v = strcmp(argv[i], "--port") == 0      ? &port
                  : strcmp(argv[i], "--lanes") == 0   ? &lanes
                  : strcmp(argv[i], "--seconds") == 0 ? &seconds
                                                      : NULL;
        if (!v)
            return usage();
        *v = strtol(argv[++i], &end, 10);
        if (!*argv[i] || *end || *v < 0 || (v == &port && *v > 65535) || (v == &lanes && !*v))
            return usage();
    }

    app a = {.loop = uv_default_loop(), .seed = 29};
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lane_count = (size_t)lanes;
    o.async_handler = start_job;
    o.data = &a;
    int rc = rl_dispatch_init(a.loop, &o, &a.d);
    if (rc) {
        fprintf(stderr, "rl_dispatch_init: %s: %s\n", rl_strerror(rc), rl_last_error_detail());
        return 1;
    }
    struct sockaddr_storage addr;
    int err = strchr(bind, ':') ? uv_ip6_addr(bind, (int)port, (struct sockaddr_in6 *)&addr)
                                : uv_ip4_addr(bind, (int)port, (struct sockaddr_in *)&addr);
    uv_tcp_init(a.loop, &a.server);
    a.server.data = &a;
    if (!err)
        err = uv_tcp_bind(&a.server, (const struct sockaddr *)&addr, 0);
    if (!err)
        err = uv_listen((uv_stream_t *)&a.server, 128, on_connection);
    char host[64];
    int namelen = sizeof addr;
    if (!err)
        err = uv_tcp_getsockname(&a.server, (struct sockaddr *)&addr, &namelen);
    if (!err)
        err = addr.ss_family == AF_INET6
                  ? uv_ip6_name((struct sockaddr_in6 *)&addr, host, sizeof host)
                  : uv_ip4_name((struct sockaddr_in *)&addr, host, sizeof host);
    if (err) {
        fprintf(stderr, "metrics_http: cannot listen on %s port %ld: %s\n", bind, port,
                uv_strerror(err));
        return 1;
    }
    int bound = ntohs(addr.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&addr)->sin6_port
                                                 : ((struct sockaddr_in *)&addr)->sin_port);
    printf("listening on http://%s%s%s:%d/metrics\n", addr.ss_family == AF_INET6 ? "[" : "", host,
           addr.ss_family == AF_INET6 ? "]" : "", bound);
    fflush(stdout);

    uv_timer_t *timers[] = {&a.feed, &a.work, &a.change, &a.stop};
    for (size_t i = 0; i < sizeof timers / sizeof timers[0]; i++) {
        uv_timer_init(a.loop, timers[i]);
        timers[i]->data = &a;
    }
    uv_timer_start(&a.feed, on_feed, FEED_MS, FEED_MS);
    uv_timer_start(&a.work, on_work, WORK_MS, WORK_MS);
    uv_timer_start(&a.change, on_change, CHANGE_MS, CHANGE_MS);
    if (seconds)
        uv_timer_start(&a.stop, on_stop, (uint64_t)seconds * 1000, 0);
    uv_signal_init(a.loop, &a.sigint);
    uv_signal_init(a.loop, &a.sigterm);
    a.sigint.data = a.sigterm.data = &a;
    uv_signal_start(&a.sigint, on_signal, SIGINT);
    uv_signal_start(&a.sigterm, on_signal, SIGTERM);
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-write is an error code, not a signal */

    uv_run(a.loop, UV_RUN_DEFAULT);
    free(a.pending);
    free(a.text);
    int closed = uv_loop_close(a.loop);
    if (closed != 0 || a.d) {
        fprintf(stderr, "metrics_http: handles left open at the end\n");
        return 1;
    }
    return 0;
}
