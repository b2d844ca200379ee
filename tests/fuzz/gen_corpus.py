#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Writes the seed corpora in tests/fuzz/corpus/: a few well-formed inputs per target, so the
fuzzers start from inputs that reach deep into the API. The byte layouts are those the targets
read (see fuzz_ring.c and fuzz_cli_parsers.c)."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def s(b):
    return bytes([len(b)]) + b


def ring_input(profile, vnodes, members, extra=b"new", loads=(), c=62, keys=b""):
    out = bytes([profile, vnodes, len(members)])
    for name, weight, zone in members:
        out += s(name) + bytes([weight]) + (bytes([1]) + s(zone) if zone is not None else b"\0")
    out += s(extra)
    for load in loads:
        out += bytes([0, load])
    return out + bytes([c]) + keys


ABC = [(b"a", 1, None), (b"b", 2, b"east"), (b"c", 1, b"west")]
KEYS = b"\x05user1\x03k42\x0chot-key-0001\x00\x07session"
# profiles by index: 0 default, 1 ds09, 2 turnstone, 3 xmur3, then the compatibility ones
for idx in range(9):
    write("fuzz_ring", "profile-%d" % idx,
          ring_input(idx, 13, ABC, loads=(3, 0, 1), keys=KEYS))  # 13: prime, as maglev needs
write("fuzz_ring", "turnstone-keys", ring_input(2, 13, ABC, keys=b"\x04a3f1\x04ffff\x04zz"))
write("fuzz_ring", "ketama-hosts",
      ring_input(4, 13, [(b"10.0.0.1:11211", 1, None), (b"10.0.0.2:11212", 3, None)],
                 keys=KEYS))
write("fuzz_ring", "empty", ring_input(0, 160, []))
write("fuzz_ring", "zero-vnodes", ring_input(0, 0, ABC))
write("fuzz_ring", "zero-weight", ring_input(1, 8, [(b"a", 0, None)]))
write("fuzz_ring", "duplicate", ring_input(0, 8, [(b"a", 1, None), (b"a", 1, None)]))
write("fuzz_ring", "long-name", ring_input(0, 8, [(b"x" * 255, 1, None)]))
write("fuzz_ring", "many", ring_input(1, 40, [(b"n%d" % i, 1, b"z%d" % (i % 3))
                                               for i in range(20)], keys=KEYS * 3))

CLI = [
    (1, b"a,b=2,c"), (1, b"0,1,2,3,4,5"), (1, b"a,,b"), (1, b"a=0"), (1, b"a=65537"),
    (1, b"a,b,a"), (1, b"=3"), (1, b"10.0.0.1:11211=2,10.0.0.2:11211"),
    (2, b"a=2,b=0"), (2, b"a=x"), (2, b"z=1"), (2, b"a=east,b=west,c=east"), (2, b"a"),
    (0, b"160"), (0, b"-3"), (0, b"1.25"), (0, b"99999999999999999999"), (0, b"nan"),
]
for i, (mode, text) in enumerate(CLI):
    write("fuzz_cli_parsers", "seed-%02d" % i, bytes([mode]) + text)
write("fuzz_ring", "profile-default-vnodes", ring_input(0, 255, ABC, keys=KEYS))
# memento (index 10): weight byte 3 is weight 1; the key bytes double as its script of changes
# (even: remove, odd: add), so removes from the middle come first here.
LANES = [(b"lane-%d" % i, 3, None) for i in range(6)]
write("fuzz_ring", "memento-changes",
      ring_input(10, 255, LANES, keys=b"\x04\x08\x03\x00\x06\x05\x01\x02" + KEYS * 4))
write("fuzz_ring", "memento-empty-and-back",
      ring_input(10, 255, LANES[:2], keys=b"\x02\x00\x01\x01\x00\x03" + KEYS))

PROPS = [
    (0, b"default"), (0, b"ketama"), (0, b"nope"), (1, b"160"), (1, b"0"), (1, b"65537"),
    (1, b"12x"), (2, b"random"), (2, b"3"), (2, b"-1"), (3, b"true"), (3, b"0"), (3, b"maybe"),
    (4, b"orders,payments"), (4, b"bad topic"), (4, b""), (5, b"x"),
]
for i, (sel, value) in enumerate(PROPS):
    write("fuzz_plugin_props", "seed-%02d" % i, bytes([sel]) + value)

# fuzz_dispatch: lanes, capacity, max_jobs, attempts, then (op, arg) pairs, then the close mode.
def ops(*pairs):
    return b"".join(bytes([o, a]) for o, a in pairs)
write("fuzz_dispatch", "submit-run", bytes([2, 4, 16, 2]) + ops(*[(0, k) for k in range(12)], (7, 0)) + b"\0")
write("fuzz_dispatch", "lane-changes", bytes([3, 3, 8, 3]) + ops(
    (0, 1), (0, 2), (0, 9), (2, 4), (0, 1), (3, 0), (0, 2), (7, 0), (3, 1), (2, 5), (0, 3)) + b"\0")
write("fuzz_dispatch", "revoke", bytes([2, 8, 32, 3]) + ops(
    (0, 0), (0, 3), (0, 6), (4, 0), (5, 0), (0, 9), (6, 0), (7, 0)) + b"\1")
write("fuzz_dispatch", "failures", bytes([1, 4, 8, 2]) + ops(*[(0, 8 * f) for f in range(4)]) + b"\0")
write("fuzz_dispatch", "remove-last", bytes([1, 4, 8, 1]) + ops((0, 0), (3, 0), (0, 1), (2, 1)) + b"\1")
write("fuzz_dispatch", "zero-lanes", bytes([0, 4, 8, 1]))

# fuzz_offset_map: even first byte, a metadata text; odd, a map to write (base: 8 bytes, a
# shift, the limit: 2 bytes, then (gap, run) byte pairs).
MAPS = [b"ringlane1:AegHCuwDLa64mQ", b"ringlane1:AOgH6QcB8wMB9AOW2I1M",
        b"ringlane1:AegHCuwDLa64mA", b"ringlane2:AegHCuwDLa64mQ", b"checkpoint 42", b"",
        b"ringlane1:", b"ringlane1:AegHCuwDLa64mQ=="]
for i, text in enumerate(MAPS):
    write("fuzz_offset_map", "text-%02d" % i, b"\0" + text)
write("fuzz_offset_map", "write-small", b"\1" + (1000).to_bytes(8, "big") + b"\0" +
      (4096).to_bytes(2, "big") + bytes([1, 1, 0, 4, 3, 0, 0, 200]))
write("fuzz_offset_map", "write-tight", b"\1" + (2 ** 40).to_bytes(8, "big") + b"\0" +
      (40).to_bytes(2, "big") + bytes([0, 0] * 40))
write("fuzz_offset_map", "write-long-runs", b"\1" + (7).to_bytes(8, "big") + b"\3" +
      (64).to_bytes(2, "big") + bytes([255, 255] * 8))

# fuzz_growth_record: even first byte, a record's value; odd, a record's key.
HEAD = (b"ringlane-growth 1 topic=events from=6 to=8 profile=balanced vnodes=64 "
        b"ring=0123456789abcdef,fedcba9876543210 nonce=5f0c1e9a77b2d403 ")
VALUES = [HEAD + b"state=announced", HEAD + b"state=aborted",
          HEAD + b"state=sealed points=0,1200,1187,9223372036854775807,1190,5",
          HEAD + b"state=sealed points=1,2,3", HEAD + b"state=announced ",
          b"ringlane-growth 1 topic=t from=1 to=2 profile=jump vnodes=0 "
          b"ring=0000000000000000,ffffffffffffffff nonce=0000000000000001 state=sealed points=0",
          b"ringlane-growth 2 topic=events", b"ringlane1:AegHCuwDLa64mQ", b""]
for i, text in enumerate(VALUES):
    write("fuzz_growth_record", "value-%02d" % i, b"\0" + text)
for i, key in enumerate([b"events/6->8", b"a.b_c-d/99999->100000", b"events/06->8", b"x/1->1"]):
    write("fuzz_growth_record", "key-%02d" % i, b"\1" + key)
