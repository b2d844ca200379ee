#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Checks examples/metrics_http: starts it on a free port of 127.0.0.1, scrapes GET /metrics
with curl and checks every line of the text with check_prometheus.py's strict parser (and with
promtool's `check metrics` when it is installed), then sends what a server must refuse (another
path: 404; another method: 405; malformed request lines and headers: 400; a request head over
the limit: 413) and clients that disconnect mid-request or before reading the answer, scrapes
again, and stops the program with SIGTERM: it must still be serving, and end with status 0.
The parser is shown first to refuse each kind of fault.

    metrics_http_check.py PATH/TO/metrics_http
"""
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_prometheus  # noqa: E402

GOOD = """# HELP ringlane_x_total A counter.
# TYPE ringlane_x_total counter
ringlane_x_total{lane="a\\"b\\\\c\\nd"} 3
ringlane_x_total{lane="e"} 4
# HELP ringlane_y A gauge.
# TYPE ringlane_y gauge
ringlane_y 1.5e-06
"""

# Each must be refused: (what, text).
BAD = [
    ("no final line feed", GOOD[:-1]),
    ("a sample before its TYPE", "ringlane_y 1\n"),
    ("TYPE without HELP", "# TYPE ringlane_y gauge\nringlane_y 1\n"),
    ("a family twice", GOOD + "# HELP ringlane_y A.\n# TYPE ringlane_y gauge\nringlane_y 2\n"),
    ("samples not contiguous", GOOD + "ringlane_x_total{lane=\"f\"} 1\n"),
    ("a counter without _total", "# HELP ringlane_c C.\n# TYPE ringlane_c counter\nringlane_c 1\n"),
    ("a bad escape", GOOD.replace('\\"b', '\\tb')),
    ("a raw quote", GOOD.replace('lane="e"', 'lane="e"x"')),
    ("a value that is no float", GOOD.replace("1.5e-06", "1,5")),
    ("a bad label name", GOOD.replace('lane="e"', '1ane="e"')),
    ("a label twice", GOOD.replace('lane="e"', 'lane="e",lane="f"')),
    ("a series twice", GOOD.replace('lane="e"', 'lane="a\\"b\\\\c\\nd"')),
    ("a blank line", GOOD.replace("\n# HELP ringlane_y", "\n\n# HELP ringlane_y")),
    ("another prefix", GOOD.replace("ringlane_y", "other_y")),
    ("a negative counter", GOOD.replace("} 4", "} -4")),
    ("a quantile on a gauge", GOOD.replace("ringlane_y 1.5e-06", 'ringlane_y{quantile="0.5"} 1')),
]

# Families the dispatcher's text must hold (docs/operations.md lists them all).
WANT = [
    "ringlane_dispatch_lanes", "ringlane_dispatch_lanes_busy", "ringlane_dispatch_jobs",
    "ringlane_dispatch_submitted_total", "ringlane_dispatch_refused_total",
    "ringlane_dispatch_jobs_ended_total", "ringlane_dispatch_lane_changes_total",
    "ringlane_dispatch_removed_lanes_total", "ringlane_dispatch_removed_processed_total",
    "ringlane_dispatch_lane_queued", "ringlane_dispatch_lane_in_flight",
    "ringlane_dispatch_lane_processed_total", "ringlane_dispatch_lane_latency_p99_seconds",
]


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def selftest():
    check_prometheus.check(GOOD)
    for what, text in BAD:
        try:
            check_prometheus.check(text)
        except check_prometheus.FormatError:
            continue
        fail(f"the parser accepted {what}")
    print(f"parser: refuses {len(BAD)} kinds of fault, accepts the good text")


def curl(url, *args):
    """(HTTP status, headers text, body text) of one request with curl."""
    with tempfile.TemporaryDirectory() as tmp:
        head, body = os.path.join(tmp, "head"), os.path.join(tmp, "body")
        r = subprocess.run(["curl", "-sS", "--max-time", "10", "-D", head, "-o", body,
                            "-w", "%{http_code}", *args, url],
                           capture_output=True, text=True, timeout=20)
        if r.returncode not in (0, 52, 56):  # 52, 56: the server closed without a full answer
            fail(f"curl {args} {url}: exit {r.returncode}: {r.stderr.strip()}")
        read = lambda p: open(p, encoding="utf-8").read() if os.path.exists(p) else ""
        return int(r.stdout or 0), read(head), read(body)


def raw(port, data, close_early=False):
    """Sends bytes on a TCP connection; the status line answered ('' if none)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(data)
        if close_early:
            return ""
        answer = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
        return answer.split(b"\r\n", 1)[0].decode("latin-1")
    except ConnectionResetError:
        return "reset"
    finally:
        s.close()


def scrape(base):
    code, head, body = curl(base + "/metrics")
    if code != 200:
        fail(f"GET /metrics: {code}")
    ctype = re.search(r"(?im)^content-type:\s*(.*?)\s*$", head)
    if not ctype or not ctype.group(1).startswith("text/plain; version=0.0.4"):
        fail(f"GET /metrics: Content-Type {ctype.group(1) if ctype else None!r}")
    try:
        families = check_prometheus.check(body)
    except check_prometheus.FormatError as e:
        fail(f"the scraped text: {e}")
    for name in WANT:
        if name not in families:
            fail(f"the scraped text has no {name}")
    lanes = {labels["lane"] for labels, _ in families["ringlane_dispatch_lane_queued"][1]}
    if len(lanes) > 16:
        fail(f"{len(lanes)} lanes listed, more than the 16 busiest")
    return families, body


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    selftest()
    proc = subprocess.Popen([sys.argv[1], "--port", "0", "--lanes", "256", "--seconds", "100"],
                            stdout=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline() if ready else ""
        m = re.match(r"listening on http://127\.0\.0\.1:(\d+)/metrics$", line.strip())
        if not m:
            fail(f"no listening line (got {line!r}): the default bind must be 127.0.0.1")
        port = int(m.group(1))
        base = f"http://127.0.0.1:{port}"

        families, body = scrape(base)
        first = families["ringlane_dispatch_submitted_total"][1][0][1]
        print(f"scrape: {len(body)} bytes, {len(families)} families, every line well formed")
        promtool = shutil.which("promtool")
        if promtool:
            r = subprocess.run([promtool, "check", "metrics"], input=body, text=True,
                               capture_output=True, timeout=30)
            if r.returncode != 0:
                fail(f"promtool check metrics: {r.stdout}{r.stderr}")
            print("promtool check metrics: passed")
        else:
            print("promtool: not installed, the strict parser is the check")

        # What the server refuses.
        for args, path, want in [((), "/", 404), ((), "/metricsx", 404), ((), "/other", 404),
                                 (("-X", "POST"), "/metrics", 405),
                                 (("-X", "DELETE"), "/metrics", 405),
                                 (("-I",), "/metrics", 405),
                                 (("-H", "X-Big: " + "a" * 10000), "/metrics", 413)]:
            code, head, _ = curl(base + path, *args)
            if code != want and not (want == 413 and code == 0):
                fail(f"curl {args} {path}: {code}, want {want}")
            if want == 405 and not re.search(r"(?im)^allow:\s*GET\s*$", head):
                fail(f"curl {args} {path}: 405 without Allow: GET")
        code, _, _ = curl(base + "/metrics?name=x")
        if code != 200:
            fail(f"GET /metrics?name=x: {code}")
        for data in [b"GARBAGE\r\n\r\n", b"GET /metrics\r\n\r\n", b"GET /metrics HTTP/2.0\r\n\r\n",
                     b"GET metrics HTTP/1.1\r\n\r\n", b"GET  /metrics HTTP/1.1\r\n\r\n",
                     b"GET /metrics HTTP/1.1\r\nNoColon\r\n\r\n",
                     b"GET /metrics HTTP/1.1\r\nBad Name: x\r\n\r\n",
                     b"GE\x00T /metrics HTTP/1.1\r\n\r\n", b"\r\n\r\n"]:
            status = raw(port, data)
            if not status.startswith("HTTP/1.1 400 "):
                fail(f"{data!r}: answered {status!r}, want 400")
        status = raw(port, b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * 20000)
        if not (status.startswith("HTTP/1.1 413 ") or status in ("", "reset")):
            fail(f"a 20 KB head: answered {status!r}, want 413 or a close")
        print("refusals: 404, 405 (Allow: GET), 400 for 9 malformed heads, 413 for long ones")

        # Clients that go away: mid-request, and before reading the answer.
        for _ in range(20):
            raw(port, b"GET /metr", close_early=True)
            raw(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", close_early=True)
        families, _ = scrape(base)
        if families["ringlane_dispatch_submitted_total"][1][0][1] < first:
            fail("ringlane_dispatch_submitted_total went down between two scrapes")
        if proc.poll() is not None:
            fail(f"metrics_http ended (status {proc.returncode})")
        print("clients that disconnect: the server goes on serving")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            status = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            fail("metrics_http did not end within 20 s of SIGTERM")
    if status != 0:
        fail(f"metrics_http ended with status {status} after SIGTERM")
    print("SIGTERM: ended cleanly")
    return 0


if __name__ == "__main__":
    sys.exit(main())
