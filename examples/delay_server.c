/* SPDX-License-Identifier: BSD-2-Clause */
/* delay_server: see delay_server.h. */
#define _POSIX_C_SOURCE 200809L
#include "delay_server.h"

#include <ringlane/error.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_SIZE 65536
#define BACKLOG 64

typedef struct delay_conn {
    uv_tcp_t tcp;
    delay_server *s;
    struct delay_conn *next;
    size_t len;
    char buf[BUF_SIZE];
} delay_conn;

/* A request waiting for its reply: its timer, then its write. */
typedef struct sreply {
    uv_timer_t timer;
    uv_write_t write;
    delay_conn *c;
    delay_frame f;
} sreply;

static void die(const delay_server *s, const char *what, int rl_err)
{
    fprintf(stderr, "%s: %s: %s\n", s->name, what, rl_strerror(rl_err));
    exit(1);
}

static void die_uv(const delay_server *s, const char *what, int uv_err)
{
    fprintf(stderr, "%s: %s: %s\n", s->name, what, uv_strerror(uv_err));
    exit(1);
}

static void free_data(uv_handle_t *h)
{
    free(h->data);
}

static void reply_written(uv_write_t *w, int status)
{
    sreply *r = w->data;
    (void)status; /* a connection closed by the client; nothing waits for this reply then */
    r->c->s->replies_pending--;
    uv_close((uv_handle_t *)&r->timer, free_data); /* frees the sreply */
}

static void reply_due(uv_timer_t *t)
{
    sreply *r = t->data;
    uv_buf_t b = uv_buf_init((char *)&r->f, sizeof r->f);
    r->write.data = r;
    int rc = uv_write(&r->write, (uv_stream_t *)&r->c->tcp, &b, 1, reply_written);
    if (rc)
        die_uv(r->c->s, "server write", rc);
}

static void server_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    delay_conn *c = h->data;
    *buf = uv_buf_init(c->buf + c->len, (unsigned)(sizeof c->buf - c->len));
}

static void server_drop(delay_conn *c)
{
    for (delay_conn **p = &c->s->conns; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    uv_close((uv_handle_t *)&c->tcp, free_data);
}

static void server_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    delay_conn *c = st->data;
    delay_server *s = c->s;
    if (n < 0) { /* UV_EOF: the client closed the connection */
        server_drop(c);
        return;
    }
    c->len += (size_t)n;
    size_t off = 0;
    for (; c->len - off >= sizeof(delay_frame); off += sizeof(delay_frame)) {
        sreply *r = malloc(sizeof *r);
        if (!r)
            die(s, "malloc", RL_ENOMEM);
        memcpy(&r->f, c->buf + off, sizeof r->f);
        if (s->on_request)
            s->on_request(s->data, &r->f);
        s->requests++;
        r->c = c;
        uv_timer_init(&s->loop, &r->timer);
        r->timer.data = r;
        uv_timer_start(&r->timer, reply_due, s->delay_ms, 0);
        s->replies_pending++;
    }
    memmove(c->buf, c->buf + off, c->len - off);
    c->len -= off;
}

static void server_accept(uv_stream_t *listener, int status)
{
    delay_server *s = listener->data;
    if (status)
        die_uv(s, "accept", status);
    delay_conn *c = malloc(sizeof *c);
    if (!c)
        die(s, "malloc", RL_ENOMEM);
    c->s = s;
    c->len = 0;
    uv_tcp_init(&s->loop, &c->tcp);
    c->tcp.data = c;
    int rc = uv_accept(listener, (uv_stream_t *)&c->tcp);
    if (rc)
        die_uv(s, "accept", rc);
    uv_tcp_nodelay(&c->tcp, 1);
    c->next = s->conns;
    s->conns = c;
    if ((rc = uv_read_start((uv_stream_t *)&c->tcp, server_alloc, server_read)))
        die_uv(s, "server read", rc);
}

static void server_stop(uv_async_t *a)
{
    delay_server *s = a->data;
    while (s->conns)
        server_drop(s->conns);
    uv_close((uv_handle_t *)&s->listener, NULL);
    uv_close((uv_handle_t *)&s->stop, NULL);
}

static void server_run(void *arg)
{
    delay_server *s = arg;
    uv_run(&s->loop, UV_RUN_DEFAULT);
}

void delay_server_start(delay_server *s, const char *name, uint64_t delay_ms,
                        delay_server_hook *on_request, void *data)
{
    memset(s, 0, sizeof *s);
    s->name = name;
    s->delay_ms = delay_ms;
    s->on_request = on_request;
    s->data = data;
    struct sockaddr_in addr;
    uv_loop_init(&s->loop);
    uv_tcp_init(&s->loop, &s->listener);
    s->listener.data = s;
    uv_ip4_addr("127.0.0.1", 0, &addr);
    int rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&addr, 0);
    if (!rc)
        rc = uv_listen((uv_stream_t *)&s->listener, BACKLOG, server_accept);
    if (rc)
        die_uv(s, "server listen", rc);
    struct sockaddr_storage sa;
    int salen = sizeof sa;
    uv_tcp_getsockname(&s->listener, (struct sockaddr *)&sa, &salen);
    s->port = ntohs(((struct sockaddr_in *)&sa)->sin_port);
    uv_async_init(&s->loop, &s->stop, server_stop);
    s->stop.data = s;
    if ((rc = uv_thread_create(&s->thread, server_run, s)))
        die_uv(s, "server thread", rc);
}

int delay_server_port(const delay_server *s)
{
    return s->port;
}

void delay_server_stop(delay_server *s)
{
    uv_async_send(&s->stop);
    uv_thread_join(&s->thread);
    uv_loop_close(&s->loop);
}
