/* SPDX-License-Identifier: BSD-2-Clause */
/* check_records: the judge of the process-cluster test (process_cluster.sh). It shares no code
 * with the demo or the consumer: it reads the record files the processes wrote (their format is
 * described in examples/demo.h and restated here) and proves four things from them alone.
 *
 *   check_records [--progress | --count-across] PRODUCED KILLS CONSUMER_FILE...
 *
 * PRODUCED is the producers' file (several producers' files put together): "P t key seq
 * partition offset" for every message the cluster acknowledged (delivery report without
 * error); each key's sequence numbers come from one producer at a time. KILLS is the driver's log:
 * a line "kill NAME PID SECONDS" for every consumer process it killed with SIGKILL. Each
 * CONSUMER_FILE is one consumer process's file: "N t name pid", then "A t p gen" (partition
 * p assigned, the process's gen-th assignment of it), "H t key seq p offset gen start" (handled:
 * the line is written before the handler returns, so before the offset can be committed; start
 * is when the handling began, and a line without it counts as begun at t), "D t key
 * seq p offset" (dead-lettered, written before its offset completes), "C t p offset" (a commit
 * the group acknowledged: the next offset to read), "F t count" (commits refused so far), "R t
 * p" (revoked, after its final commit), "L t p" (lost: taken away, nothing committed). t is
 * CLOCK_MONOTONIC in ns, one clock for all processes of the machine. A process killed in the
 * middle of a write may leave a last line cut short: it is ignored.
 *
 * A segment is one assignment of a partition in one process: (file, partition, gen), from its
 * A line to the first R, L or A of that partition after it in the same file, or to the end of
 * the file (a killed process, or one that ended without releasing it).
 *
 * What it proves, and why that is enough:
 *
 * The log. PRODUCED says what the cluster holds at the offsets it acknowledged. A cluster may
 *    also hold a copy of an acknowledged event at an offset it never acknowledged: when a broker
 *    goes down with a produce request in flight, the producer's retry can append the batch a
 *    second time, and only one of the two is acknowledged (librdkafka's mock cluster does this;
 *    so can Kafka after an idempotent producer bumps its epoch). Such an offset is learned from
 *    the H lines that name it, which must agree, and must name an acknowledged event (key and
 *    sequence number) of the same partition. Every other H line must name exactly what
 *    PRODUCED says is at its offset.
 *
 * 1. Per-key order in every process. Within a segment the records of one key, in file order
 *    (a key's handlers run one at a time, and each writes its line before it returns, so file
 *    order is handling order), follow the key's messages in the log one by one: each record's
 *    offset is the next offset after the previous record's that holds the key. The first
 *    record of a key in a segment may be anywhere (the segment starts wherever the group's
 *    committed offset was). A skipped message, a repeat or a step back inside a segment is a
 *    violation.
 *
 * 2. Every event was handled at least once: every offset of every partition, from 0 to the
 *    last acknowledged one, has an H or D line in some consumer file (dead letters count: the
 *    poison event and the oversized key go there by design; copies count too).
 *
 * 3. Nothing after a committed offset was lost: for every C line (p, c, t), every offset of p
 *    below c had an H or D line with a time before t. So no commit the group accepted ever
 *    passed an event nobody had handled: whatever a killed consumer had not finished was
 *    above every commit, and its next owner, which starts at the committed offset, read it
 *    again. (1) and (2) then say that the re-reading happened, in order. Commit lines are
 *    sampled (every 50 ms, and at every revoke), so a process may have seen more commits
 *    than it wrote; the proof needs only that the ones written were acknowledged, and after
 *    the handling they cover.
 *
 * 4. Duplicates (an offset handled more than once) are counted, and each is explained by how
 *    the segment that handled it the time before ended: its process was killed with SIGKILL
 *    (listed in KILLS, no R or L line for the partition after); or it was revoked and the last
 *    commit it wrote is at or below the offset while the group refused one of its commits
 *    during the segment (an F line) or it lost the partition (L); or it was revoked, none of
 *    its commits was refused, and an offset between its last commit and this one was never
 *    handled in that segment (the revoke took queued events back, so the commit had to stop
 *    below them; the next owner reads them, and what follows, again). Any other duplicate
 *    (one inside a single segment, one after a segment whose commit had passed the offset,
 *    or after a process that ended without a kill or a release) fails the check.
 *
 * 5. Per-key order across partitions and processes: for every key, in sequence-number order,
 *    no event began its first handling before every earlier event of the key had ended its
 *    first one. Within a partition (1) says more; this is what a topic's growth puts at risk:
 *    a key the producers moved to a new partition has its earlier events in an old one, read
 *    by another process (docs/partition_growth.md). --count-across counts these violations and
 *    prints them without failing on them (a run without the growth fence, to show what it
 *    prevents).
 *
 * Exit status: 0 when all five hold and KILLS lists at least one kill; 1 otherwise; 2 for bad
 * arguments or unreadable files. --progress only counts how many produced offsets have been
 * handled so far and exits 0 once all have (the driver's way to know when to stop). */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PARTITIONS_MAX 256
#define KEY_MAX 32
#define REPORT_MAX 10 /* examples printed per kind of failure */

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "check_records: out of memory\n");
        exit(2);
    }
    return q;
}

/* --- what the producer wrote --- */

typedef struct produced {
    char key[KEY_MAX];
    long long seq;
    int kidx;             /* user:<kidx>, -1 for other keys */
    bool acked;           /* from PRODUCED; false: a copy learned from the H lines */
    int64_t next_key;     /* the next offset of this partition holding the same key, -1: none */
    uint64_t first_t;     /* earliest H or D time, UINT64_MAX: never handled */
    uint64_t first_start; /* earliest start of a handling (an H line's start, a D line's t) */
    int head;             /* handled records of this offset (a list through rec.next), -1: none */
    int count;
} produced;

static produced *prod[PARTITIONS_MAX];
static int64_t prod_n[PARTITIONS_MAX]; /* offsets 0..prod_n-1 known (some may be missing) */
static int64_t prod_cap[PARTITIONS_MAX];
static bool *prod_has[PARTITIONS_MAX];
static long produced_total;

static produced *produced_at(int p, int64_t o)
{
    if (p < 0 || p >= PARTITIONS_MAX || o < 0 || o >= prod_n[p] || !prod_has[p][o])
        return NULL;
    return &prod[p][o];
}

static int key_index(const char *key);

/* A new entry of the log at (p, o), which must be free. */
static produced *log_add(int p, int64_t o, const char *key, long long seq, bool acked)
{
    if (o >= prod_cap[p]) {
        int64_t n = o + 1 > prod_cap[p] * 2 ? o + 1 : prod_cap[p] * 2;
        prod[p] = xrealloc(prod[p], (size_t)n * sizeof *prod[p]);
        prod_has[p] = xrealloc(prod_has[p], (size_t)n);
        memset(prod_has[p] + prod_cap[p], 0, (size_t)(n - prod_cap[p]));
        prod_cap[p] = n;
    }
    if (o >= prod_n[p])
        prod_n[p] = o + 1;
    prod_has[p][o] = true;
    produced *e = &prod[p][o];
    snprintf(e->key, sizeof e->key, "%s", key);
    e->seq = seq;
    e->kidx = key_index(key);
    e->acked = acked;
    e->next_key = -1;
    e->first_t = UINT64_MAX;
    e->first_start = UINT64_MAX;
    e->head = -1;
    e->count = 0;
    return e;
}

/* Acknowledged events by (partition, key, seq), to recognise copies: an open-addressing set. */
typedef struct ackslot {
    char key[KEY_MAX];
    long long seq;
    int partition; /* -1: empty */
} ackslot;
static ackslot *acks;
static size_t ackcap, ackused;

static size_t ack_hash(int p, const char *key, long long seq)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)p;
    for (const char *c = key; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    h = (h ^ (uint64_t)seq) * 1099511628211ull;
    return (size_t)h;
}

static ackslot *ack_slot(int p, const char *key, long long seq)
{
    size_t h = ack_hash(p, key, seq) & (ackcap - 1);
    while (acks[h].partition >= 0 &&
           (acks[h].partition != p || acks[h].seq != seq || strcmp(acks[h].key, key) != 0))
        h = (h + 1) & (ackcap - 1);
    return &acks[h];
}

static void ack_add(int p, const char *key, long long seq)
{
    if (4 * (ackused + 1) > 3 * ackcap) {
        ackslot *old = acks;
        size_t oldcap = ackcap;
        ackcap = ackcap ? ackcap * 2 : 1 << 16;
        acks = xrealloc(NULL, ackcap * sizeof *acks);
        for (size_t i = 0; i < ackcap; i++)
            acks[i].partition = -1;
        for (size_t i = 0; i < oldcap; i++)
            if (old[i].partition >= 0)
                *ack_slot(old[i].partition, old[i].key, old[i].seq) = old[i];
        free(old);
    }
    ackslot *a = ack_slot(p, key, seq);
    if (a->partition < 0) {
        snprintf(a->key, sizeof a->key, "%s", key);
        a->seq = seq;
        a->partition = p;
        ackused++;
    }
}

static bool acked_event(int p, const char *key, long long seq)
{
    return ackcap && ack_slot(p, key, seq)->partition >= 0;
}

/* --- what the consumers wrote --- */

typedef struct segment {
    int file, partition;
    unsigned gen;
    uint64_t t_assigned;
    char end;            /* 'R', 'L', 'A' (assigned again), 'K' (killed), 'E' (file ended) */
    int64_t last_commit; /* the highest C offset written in the segment, -1: none */
    bool refused;        /* an F line while it was open */
    int64_t *offsets;    /* handled (H or D) here, sorted at the end */
    size_t noffsets, cap;
} segment;

typedef struct rec {
    uint64_t t;
    int seg;
    int next;      /* the next record of the same offset */
    int partition; /* -1: a record that names something the log does not hold */
    int64_t offset;
    int kidx; /* user:<kidx> for H lines (the order check), else -1 */
    int file;
} rec;

typedef struct cfile {
    const char *path;
    char name[64];
    long pid;
    bool killed;
    int open_seg[PARTITIONS_MAX]; /* the partition's current segment, -1: none */
    long cut;                     /* a last line cut short */
} cfile;

static segment *segs;
static size_t nsegs, capsegs;
static rec *recs;
static size_t nrecs, caprecs;
static cfile *files;
static int nfiles;

static long violations, mismatches, commits_checked, commits_unsound, anomalies;
static long reports[8];

#define REPORT(kind, ...)                                                                          \
    do {                                                                                           \
        if (reports[kind]++ < REPORT_MAX)                                                          \
            fprintf(stderr, __VA_ARGS__);                                                          \
    } while (0)
enum { REP_ORDER, REP_MISMATCH, REP_COMMIT, REP_LOST, REP_DUP, REP_ANOMALY, REP_ACROSS };

/* Per segment and key: the offset of the key's last record (an open-addressing table). */
typedef struct seqslot {
    int64_t id; /* seg * 2^32 + key index + 1; 0: empty */
    int64_t last;
} seqslot;
static seqslot *seqtab;
static size_t seqcap, seqused;

static seqslot *seq_slot(int64_t id)
{
    if (seqcap == 0 || 4 * (seqused + 1) > 3 * seqcap) {
        size_t ncap = seqcap ? seqcap * 4 : 1 << 16;
        seqslot *t = calloc(ncap, sizeof *t);
        if (!t)
            exit(2);
        for (size_t i = 0; i < seqcap; i++)
            if (seqtab[i].id) {
                size_t h = (size_t)((uint64_t)seqtab[i].id * 0x9E3779B97F4A7C15ull) & (ncap - 1);
                while (t[h].id)
                    h = (h + 1) & (ncap - 1);
                t[h] = seqtab[i];
            }
        free(seqtab);
        seqtab = t;
        seqcap = ncap;
    }
    size_t h = (size_t)((uint64_t)id * 0x9E3779B97F4A7C15ull) & (seqcap - 1);
    while (seqtab[h].id && seqtab[h].id != id)
        h = (h + 1) & (seqcap - 1);
    return &seqtab[h];
}

static int key_index(const char *key)
{
    if (strncmp(key, "user:", 5) != 0 || key[5] < '0' || key[5] > '9')
        return -1;
    char *end;
    long k = strtol(key + 5, &end, 10);
    return *end || k < 0 || k > 100000000 ? -1 : (int)k;
}

/* Reads a file's whole lines; a last line without its newline is counted and skipped. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "check_records: cannot read %s\n", path);
        exit(2);
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = xrealloc(NULL, cap);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n < 4096) {
            cap *= 2;
            buf = xrealloc(buf, cap);
        }
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void read_produced(const char *path)
{
    size_t len;
    char *buf = slurp(path, &len);
    char *line = buf;
    for (char *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        *nl = '\0';
        unsigned long long t;
        char key[KEY_MAX];
        long long seq;
        int p;
        int64_t o;
        if (line[0] != 'P')
            continue;
        if (sscanf(line, "P %llu %31s %lld %d %" SCNd64, &t, key, &seq, &p, &o) != 5 || p < 0 ||
            p >= PARTITIONS_MAX || o < 0) {
            fprintf(stderr, "check_records: %s: bad line: %s\n", path, line);
            exit(2);
        }
        if (produced_at(p, o)) {
            fprintf(stderr, "check_records: %s: partition %d offset %" PRId64 " twice\n", path, p,
                    o);
            exit(2);
        }
        log_add(p, o, key, seq, true);
        ack_add(p, key, seq);
        produced_total++;
    }
    free(buf);
}

static void read_kills(const char *path, long **pids, size_t *n)
{
    size_t len;
    char *buf = slurp(path, &len);
    char *line = buf;
    for (char *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        *nl = '\0';
        char name[64];
        long pid;
        if (sscanf(line, "kill %63s %ld", name, &pid) == 2) {
            *pids = xrealloc(*pids, (*n + 1) * sizeof **pids);
            (*pids)[(*n)++] = pid;
        }
    }
    free(buf);
}

static int new_segment(int f, int p, unsigned gen, uint64_t t)
{
    if (nsegs == capsegs) {
        capsegs = capsegs ? capsegs * 2 : 64;
        segs = xrealloc(segs, capsegs * sizeof *segs);
    }
    segment *s = &segs[nsegs];
    memset(s, 0, sizeof *s);
    s->file = f;
    s->partition = p;
    s->gen = gen;
    s->t_assigned = t;
    s->end = 'E';
    s->last_commit = -1;
    return (int)nsegs++;
}

/* The segment of (file, partition, gen): the open one normally, an earlier one for a handler
 * that outlived a lost partition, or a new one when no A line named it. */
static int find_segment(int f, int p, unsigned gen, uint64_t t)
{
    int open = files[f].open_seg[p];
    if (open >= 0 && segs[open].gen == gen)
        return open;
    for (size_t i = nsegs; i-- > 0;)
        if (segs[i].file == f && segs[i].partition == p && segs[i].gen == gen)
            return (int)i;
    anomalies++;
    REPORT(REP_ANOMALY, "%s: partition %d generation %u handled without an A line\n", files[f].path,
           p, gen);
    return new_segment(f, p, gen, t);
}

static long copies;

static void add_handled(int f, int seg, uint64_t t, uint64_t start, const char *key, long long seq,
                        int p, int64_t o, bool order, const char *line)
{
    produced *e = produced_at(p, o);
    if (!e && acked_event(p, key, seq)) {
        e = log_add(p, o, key, seq, false); /* a copy the cluster holds (see the top) */
        copies++;
    }
    if (!e) {
        mismatches++;
        REPORT(REP_MISMATCH, "%s: handled what was never produced there: %s\n", files[f].path,
               line);
        return;
    }
    if (strcmp(e->key, key) != 0 || e->seq != seq) {
        mismatches++;
        REPORT(REP_MISMATCH, "%s: %s, but the %s %s %lld there\n", files[f].path, line,
               e->acked ? "producer put" : "other records of this copy say", e->key, e->seq);
    }
    if (nrecs == caprecs) {
        caprecs = caprecs ? caprecs * 2 : 1 << 16;
        recs = xrealloc(recs, caprecs * sizeof *recs);
    }
    recs[nrecs] = (rec){.t = t,
                        .seg = seg,
                        .next = e->head,
                        .partition = p,
                        .offset = o,
                        .kidx = order ? e->kidx : -1,
                        .file = f};
    e->head = (int)nrecs++;
    e->count++;
    if (t < e->first_t)
        e->first_t = t;
    if (start < e->first_start)
        e->first_start = start;
    segment *s = &segs[seg];
    if (s->noffsets == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->offsets = xrealloc(s->offsets, s->cap * sizeof *s->offsets);
    }
    s->offsets[s->noffsets++] = o;
}

static void close_segment(int f, int p, char end)
{
    int s = files[f].open_seg[p];
    if (s >= 0)
        segs[s].end = end;
    files[f].open_seg[p] = -1;
}

/* Commits are checked once every file is read (a commit's events may be in later files). */
typedef struct commit {
    int file, partition;
    int64_t offset;
    uint64_t t;
} commit;
static commit *commits;
static size_t ncommits, capcommits;

static void read_consumer(int f)
{
    cfile *cf = &files[f];
    for (int p = 0; p < PARTITIONS_MAX; p++)
        cf->open_seg[p] = -1;
    size_t len;
    char *buf = slurp(cf->path, &len);
    char *line = buf;
    for (char *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        *nl = '\0';
        unsigned long long t, count, start;
        char key[KEY_MAX];
        long long seq;
        int p;
        int64_t o;
        unsigned gen;
        bool ok = true;
        switch (line[0]) {
        case 'N':
            ok = sscanf(line, "N %llu %63s %ld", &t, cf->name, &cf->pid) == 3;
            break;
        case 'A':
            ok = sscanf(line, "A %llu %d %u", &t, &p, &gen) == 3 && p >= 0 && p < PARTITIONS_MAX;
            if (ok) {
                close_segment(f, p, 'A');
                cf->open_seg[p] = new_segment(f, p, gen, t);
            }
            break;
        case 'R':
        case 'L':
            ok = sscanf(line + 1, " %llu %d", &t, &p) == 2 && p >= 0 && p < PARTITIONS_MAX;
            if (ok)
                close_segment(f, p, line[0]);
            break;
        case 'H':
        case 'D':
            start = 0;
            if (line[0] == 'H') {
                int got = sscanf(line, "H %llu %31s %lld %d %" SCNd64 " %u %llu", &t, key, &seq, &p,
                                 &o, &gen, &start);
                ok = got == 6 || got == 7;
                if (got == 6)
                    start = t; /* an older writer: the end stands in for the start */
            } else {
                ok = sscanf(line, "D %llu %31s %lld %d %" SCNd64, &t, key, &seq, &p, &o) == 5;
                start = t;
            }
            ok = ok && p >= 0 && p < PARTITIONS_MAX && start <= t;
            if (ok) {
                int s = line[0] == 'H' ? find_segment(f, p, gen, t) : cf->open_seg[p];
                if (s < 0)
                    s = find_segment(f, p, 0, t);
                add_handled(f, s, t, start, key, seq, p, o, line[0] == 'H', line);
            }
            break;
        case 'C':
            ok =
                sscanf(line, "C %llu %d %" SCNd64, &t, &p, &o) == 3 && p >= 0 && p < PARTITIONS_MAX;
            if (ok) {
                int s = cf->open_seg[p];
                if (s >= 0 && o > segs[s].last_commit)
                    segs[s].last_commit = o;
                if (ncommits == capcommits) {
                    capcommits = capcommits ? capcommits * 2 : 1024;
                    commits = xrealloc(commits, capcommits * sizeof *commits);
                }
                commits[ncommits++] = (commit){f, p, o, t};
            }
            break;
        case 'F':
            ok = sscanf(line, "F %llu %llu", &t, &count) == 2;
            for (int q = 0; ok && q < PARTITIONS_MAX; q++)
                if (cf->open_seg[q] >= 0)
                    segs[cf->open_seg[q]].refused = true;
            break;
        default:
            ok = false;
        }
        if (!ok) {
            fprintf(stderr, "check_records: %s: bad line: %s\n", cf->path, line);
            exit(2);
        }
    }
    if (*line)
        cf->cut++;
    for (int p = 0; p < PARTITIONS_MAX; p++)
        close_segment(f, p, cf->killed ? 'K' : 'E');
    free(buf);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* One keyed event for the order across partitions: when it was first handled. */
typedef struct keyed {
    int kidx, partition;
    long long seq;
    int64_t offset;
    uint64_t start, end; /* the earliest start and the earliest end of its handlings */
} keyed;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->kidx != y->kidx)
        return x->kidx < y->kidx ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The events where a key changed partitions (a topic that grew): the gap between the end of
 * the key's earlier events and the start of the first event in the new partition, in ns
 * (negative: it began before they had ended). */
static int64_t *moves;
static size_t nmoves, capmoves;

/* 5. Each key's events, by sequence number, wherever they are: none began its first handling
 *    before every earlier event of the key had ended one. Returns the violations. */
static long check_across(void)
{
    size_t n = 0, cap = 0;
    keyed *ev = NULL;
    for (int p = 0; p < PARTITIONS_MAX; p++)
        for (int64_t o = 0; o < prod_n[p]; o++) {
            const produced *e = prod_has[p][o] ? &prod[p][o] : NULL;
            if (!e || e->kidx < 0 || e->seq < 0 || !e->count)
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 1 << 16;
                ev = xrealloc(ev, cap * sizeof *ev);
            }
            ev[n++] = (keyed){e->kidx, p, e->seq, o, e->first_start, e->first_t};
        }
    if (n)
        qsort(ev, n, sizeof *ev, cmp_keyed);
    long bad = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i; /* this key's events: i .. j-1 */
        while (j < n && ev[j].kidx == ev[i].kidx)
            j++;
        uint64_t ended = 0; /* the latest first end of the events with a lower seq */
        size_t by = i;
        for (size_t k = i; k < j;) {
            size_t m = k; /* one seq: copies of an event share it */
            uint64_t start = UINT64_MAX, end = UINT64_MAX;
            for (; m < j && ev[m].seq == ev[k].seq; m++) {
                start = ev[m].start < start ? ev[m].start : start;
                end = ev[m].end < end ? ev[m].end : end;
            }
            if (k > i && ev[k].partition != ev[k - 1].partition) {
                if (nmoves == capmoves) {
                    capmoves = capmoves ? capmoves * 2 : 256;
                    moves = xrealloc(moves, capmoves * sizeof *moves);
                }
                moves[nmoves++] = (int64_t)(start - ended);
            }
            if (k > i && start < ended) {
                bad++;
                REPORT(REP_ACROSS,
                       "user:%d seq %lld (partition %d offset %" PRId64 ") began %.3f s before "
                       "seq %lld (partition %d offset %" PRId64 ") had ended\n",
                       ev[k].kidx, ev[k].seq, ev[k].partition, ev[k].offset,
                       (double)(ended - start) / 1e9, ev[by].seq, ev[by].partition, ev[by].offset);
            }
            if (end > ended || k == i) {
                ended = end;
                by = k;
            }
            k = m;
        }
        i = j;
    }
    free(ev);
    return bad;
}

static int cmp_rec_t(const void *a, const void *b)
{
    uint64_t x = recs[*(const int *)a].t, y = recs[*(const int *)b].t;
    return (x > y) - (x < y);
}

static bool seg_handled(const segment *s, int64_t o)
{
    return s->noffsets && bsearch(&o, s->offsets, s->noffsets, sizeof *s->offsets, cmp_i64);
}

enum { DUP_KILL, DUP_REFUSED, DUP_TAKEN_BACK, DUP_UNEXPLAINED, DUP_KINDS };
static const char *dup_names[DUP_KINDS] = {
    "after a kill (SIGKILL)", "after a refused commit or a lost partition",
    "after a revoke that took queued events back", "unexplained"};

/* Why offset o of partition p was handled again in segment `now`, when segment `prev` had
 * handled it before. */
static int dup_cause(int prev, int now, int64_t o)
{
    const segment *s = &segs[prev];
    if (prev == now)
        return DUP_UNEXPLAINED;
    if (s->end == 'K')
        return DUP_KILL;
    if (s->end == 'L')
        return DUP_REFUSED;
    if (s->end != 'R' || s->last_commit > o)
        return DUP_UNEXPLAINED;
    if (s->refused)
        return DUP_REFUSED;
    /* Where its watermark stood: its last commit, or where it started when none came back. */
    int64_t from = s->noffsets ? s->offsets[0] : 0;
    if (s->last_commit > from)
        from = s->last_commit;
    for (int64_t x = from; x < o; x++)
        if (!seg_handled(s, x))
            return DUP_TAKEN_BACK;
    return DUP_UNEXPLAINED;
}

static void free_all(void)
{
    for (int p = 0; p < PARTITIONS_MAX; p++) {
        free(prod[p]);
        free(prod_has[p]);
    }
    for (size_t s = 0; s < nsegs; s++)
        free(segs[s].offsets);
    free(segs);
    free(recs);
    free(files);
    free(commits);
    free(seqtab);
    free(acks);
}

int main(int argc, char **argv)
{
    bool progress = argc > 1 && strcmp(argv[1], "--progress") == 0;
    bool count_across = argc > 1 && strcmp(argv[1], "--count-across") == 0;
    int a = progress || count_across ? 2 : 1;
    if (argc - a < 3) {
        fprintf(stderr, "usage: check_records [--progress | --count-across] PRODUCED KILLS "
                        "CONSUMER_FILE...\n");
        return 2;
    }
    read_produced(argv[a]);
    long *killed_pids = NULL;
    size_t nkilled = 0;
    read_kills(argv[a + 1], &killed_pids, &nkilled);
    nfiles = argc - a - 2;
    files = xrealloc(NULL, (size_t)nfiles * sizeof *files);
    memset(files, 0, (size_t)nfiles * sizeof *files);
    for (int f = 0; f < nfiles; f++) {
        files[f].path = argv[a + 2 + f];
        /* The pid is in the file's first line; read it ahead to know whether it was killed. */
        FILE *in = fopen(files[f].path, "r");
        unsigned long long t;
        char name[64];
        if (in && fscanf(in, "N %llu %63s %ld", &t, name, &files[f].pid) == 3)
            for (size_t k = 0; k < nkilled; k++)
                files[f].killed |= killed_pids[k] == files[f].pid;
        if (in)
            fclose(in);
        read_consumer(f);
    }

    long handled_offsets = 0, calls = 0;
    for (int p = 0; p < PARTITIONS_MAX; p++)
        for (int64_t o = 0; o < prod_n[p]; o++)
            if (prod_has[p][o] && prod[p][o].count) {
                handled_offsets += prod[p][o].acked;
                calls += prod[p][o].count;
            }
    if (progress) {
        printf("handled %ld of %ld produced events\n", handled_offsets, produced_total);
        free(killed_pids);
        free_all();
        return handled_offsets == produced_total && produced_total > 0 ? 0 : 1;
    }

    /* 1. Order: each key's records in a segment follow the key's offsets in the log. */
    int kmax = 0;
    for (int p = 0; p < PARTITIONS_MAX; p++)
        for (int64_t o = 0; o < prod_n[p]; o++)
            if (prod_has[p][o] && prod[p][o].kidx >= kmax)
                kmax = prod[p][o].kidx + 1;
    int64_t *last_of_key = xrealloc(NULL, (size_t)(kmax + 1) * sizeof *last_of_key);
    for (int p = 0; p < PARTITIONS_MAX; p++) {
        for (int k = 0; k <= kmax; k++)
            last_of_key[k] = -1;
        for (int64_t o = prod_n[p]; o-- > 0;) {
            if (!prod_has[p][o] || prod[p][o].kidx < 0)
                continue;
            prod[p][o].next_key = last_of_key[prod[p][o].kidx];
            last_of_key[prod[p][o].kidx] = o;
        }
    }
    free(last_of_key);
    for (size_t i = 0; i < nrecs; i++) { /* file order within each file */
        const rec *r = &recs[i];
        if (r->kidx < 0)
            continue;
        int64_t id = (int64_t)r->seg << 32 | (int64_t)(r->kidx + 1);
        seqslot *slot = seq_slot(id);
        if (slot->id) {
            int64_t want = prod[r->partition][slot->last].next_key;
            if (r->offset != want) {
                violations++;
                REPORT(REP_ORDER,
                       "%s: user:%d at offset %" PRId64 " after offset %" PRId64
                       " in one assignment of partition %d (its next message is at %" PRId64 ")\n",
                       files[r->file].path, r->kidx, r->offset, slot->last, r->partition, want);
            }
        } else {
            seqused++;
            slot->id = id;
        }
        slot->last = r->offset;
    }

    /* 2. Completeness. */
    long lost = 0;
    for (int p = 0; p < PARTITIONS_MAX; p++)
        for (int64_t o = 0; o < prod_n[p]; o++) {
            if (!prod_has[p][o]) {
                lost++;
                REPORT(REP_LOST,
                       "lost: partition %d offset %" PRId64 ": nothing acknowledged there, and "
                       "nobody handled what it holds\n",
                       p, o);
            } else if (!prod[p][o].count) {
                lost++;
                REPORT(REP_LOST, "lost: partition %d offset %" PRId64 " (%s %lld) never handled\n",
                       p, o, prod[p][o].key, prod[p][o].seq);
            }
        }

    /* 3. Commits never passed an unhandled event: a prefix maximum of first-handling times. */
    uint64_t *prefix[PARTITIONS_MAX] = {0};
    for (int p = 0; p < PARTITIONS_MAX; p++) {
        if (!prod_n[p])
            continue;
        prefix[p] = xrealloc(NULL, (size_t)(prod_n[p] + 1) * sizeof *prefix[p]);
        prefix[p][0] = 0;
        for (int64_t o = 0; o < prod_n[p]; o++) {
            uint64_t t = prod_has[p][o] ? prod[p][o].first_t : UINT64_MAX;
            prefix[p][o + 1] = t > prefix[p][o] ? t : prefix[p][o];
        }
    }
    int64_t final_commit[PARTITIONS_MAX];
    for (int p = 0; p < PARTITIONS_MAX; p++)
        final_commit[p] = -1;
    for (size_t i = 0; i < ncommits; i++) {
        const commit *c = &commits[i];
        commits_checked++;
        if (c->offset > final_commit[c->partition])
            final_commit[c->partition] = c->offset;
        bool sound = c->offset <= prod_n[c->partition] &&
                     (c->offset == 0 || prefix[c->partition][c->offset] < c->t);
        if (!sound) {
            commits_unsound++;
            REPORT(REP_COMMIT,
                   "%s: commit of partition %d at %" PRId64 " passed an event not handled "
                   "before it\n",
                   files[c->file].path, c->partition, c->offset);
        }
    }

    /* 4. Duplicates and their causes. */
    for (size_t s = 0; s < nsegs; s++)
        if (segs[s].noffsets)
            qsort(segs[s].offsets, segs[s].noffsets, sizeof *segs[s].offsets, cmp_i64);
    long dups[DUP_KINDS] = {0};
    int *order = NULL;
    size_t order_cap = 0;
    for (int p = 0; p < PARTITIONS_MAX; p++)
        for (int64_t o = 0; o < prod_n[p]; o++) {
            if (!prod_has[p][o] || prod[p][o].count < 2)
                continue;
            size_t n = 0;
            for (int r = prod[p][o].head; r >= 0; r = recs[r].next) {
                if (n == order_cap) {
                    order_cap = order_cap ? order_cap * 2 : 16;
                    order = xrealloc(order, order_cap * sizeof *order);
                }
                order[n++] = r;
            }
            qsort(order, n, sizeof *order, cmp_rec_t);
            for (size_t i = 1; i < n; i++) {
                int cause = dup_cause(recs[order[i - 1]].seg, recs[order[i]].seg, o);
                dups[cause]++;
                if (cause == DUP_UNEXPLAINED) {
                    const segment *prev = &segs[recs[order[i - 1]].seg];
                    REPORT(REP_DUP,
                           "duplicate without a cause: partition %d offset %" PRId64
                           " in %s after %s (its assignment ended '%c', last commit %" PRId64 ")\n",
                           p, o, files[segs[recs[order[i]].seg].file].path, files[prev->file].path,
                           prev->end, prev->last_commit);
                }
            }
        }
    free(order);

    long across = check_across();

    /* The report. */
    long killed_files = 0, cut = 0, segments_with_kill = 0;
    for (int f = 0; f < nfiles; f++) {
        killed_files += files[f].killed;
        cut += files[f].cut;
        if (files[f].cut && !files[f].killed) {
            anomalies++;
            REPORT(REP_ANOMALY, "%s: its last line is cut short, yet it was not killed\n",
                   files[f].path);
        }
    }
    for (size_t s = 0; s < nsegs; s++)
        segments_with_kill += segs[s].end == 'K';
    long dup_total = 0;
    for (int i = 0; i < DUP_KINDS; i++)
        dup_total += dups[i];
    int committed_to_end = 0, partitions = 0;
    for (int p = 0; p < PARTITIONS_MAX; p++)
        if (prod_n[p]) {
            partitions++;
            committed_to_end += final_commit[p] >= prod_n[p];
        }

    printf("process-cluster check: %d consumer processes (%zu killed with SIGKILL, %ld of them "
           "listed in the files), %zu assignments (%ld ended by a kill)\n",
           nfiles, nkilled, killed_files, nsegs, segments_with_kill);
    printf("  produced            %ld events acknowledged on %d partitions\n", produced_total,
           partitions);
    printf("  handled             %ld of them at least once (%ld handler calls and dead "
           "letters in all)\n",
           handled_offsets, calls);
    printf("  lost                %ld\n", lost);
    printf("  order violations    %ld (each key's messages in log order within each assignment "
           "of each process)\n",
           violations);
    printf("  order across        %ld (each key's events by sequence number, across partitions and "
           "processes: none began before every earlier one had ended a handling)%s\n",
           across, count_across ? ", counted only (--count-across)" : "");
    if (nmoves) {
        qsort(moves, nmoves, sizeof *moves, cmp_i64);
        printf("  partition changes   %zu (a key's next event in another partition: it began %.3f "
               "s after the key's earlier events had ended at the median, %.3f s at the least, "
               "%.3f s at the most)\n",
               nmoves, (double)moves[nmoves / 2] / 1e9, (double)moves[0] / 1e9,
               (double)moves[nmoves - 1] / 1e9);
    }
    printf("  wrong records       %ld (a handled record that is not what was produced there)\n",
           mismatches);
    printf("  commits             %ld checked, %ld passed an event not handled before them; "
           "%d of %d partitions committed to their end\n",
           commits_checked, commits_unsound, committed_to_end, partitions);
    printf("  duplicates          %ld", dup_total);
    for (int i = 0; i < DUP_KINDS; i++)
        printf("%s %ld %s", i ? "," : ":", dups[i], dup_names[i]);
    printf("\n");
    if (copies)
        printf("  copies              %ld events the cluster holds twice (a retried produce "
               "request, acknowledged once), handled in log order like the others\n",
               copies);
    if (cut || anomalies)
        printf("  notes               %ld last lines cut by a kill, %ld anomalies\n", cut,
               anomalies);
    bool pass = lost == 0 && violations == 0 && (count_across || across == 0) && mismatches == 0 &&
                commits_unsound == 0 && dups[DUP_UNEXPLAINED] == 0 && anomalies == 0 &&
                nkilled > 0 && produced_total > 0;
    printf("  result: %s\n",
           pass ? "order, completeness and commits hold (exit 0)" : "FAILED (exit 1)");
    for (int p = 0; p < PARTITIONS_MAX; p++)
        free(prefix[p]);
    free(killed_pids);
    free(moves);
    free_all();
    return pass ? 0 : 1;
}
