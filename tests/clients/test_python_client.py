#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The plugin from Python: Debian's python3-confluent-kafka produces through
ringlane_partitioner.so on librdkafka's mock cluster, and every delivered partition must be the
one `ringlane route --partitions P` prints for the key (same profile, same vnodes). A bad pair
of properties must be refused when the producer is made.

Usage: test_python_client.py MOCK_CLUSTER_HOST RINGLANE_CLI PLUGIN
Exit status 0 on success, 1 on a mismatch, 77 when confluent_kafka cannot be imported.
"""
import subprocess
import sys

try:
    import confluent_kafka
except ImportError:
    print("python3-confluent-kafka is not installed (scripts/install-deps.sh installs it)")
    sys.exit(77)

HOST, CLI, PLUGIN = sys.argv[1:4]
KEYS = [f"user:{i}" for i in range(1000)] + [f"order-{i * 2654435761 % 2**32:08x}" for i in range(1000)]

# (topic, partitions, ringlane properties): the defaults, and profiles with their own vnodes.
CASES = [
    ("py-default-6", 6, {}),
    ("py-default-12", 12, {}),
    ("py-default-100", 100, {}),
    ("py-ds09-8", 8, {"ringlane.profile": "ds09", "ringlane.vnodes": "40"}),
    ("py-old-default-6", 6, {"ringlane.profile": "default"}),
    # vnodes before the profile: the pair is checked whichever comes last.
    ("py-maglev-7", 7, {"ringlane.vnodes": "1000003", "ringlane.profile": "maglev"}),
    ("py-jump-12", 12, {"ringlane.profile": "jump"}),
]


def route(partitions, props):
    args = [CLI, "route", "--partitions", str(partitions)]
    if "ringlane.profile" in props:
        args += ["--profile", props["ringlane.profile"]]
    if "ringlane.vnodes" in props:
        args += ["--vnodes", props["ringlane.vnodes"]]
    out = subprocess.run(args, input="".join(k + "\n" for k in KEYS), capture_output=True,
                         text=True, check=True).stdout
    table = dict(line.split("\t") for line in out.splitlines())
    return {k: int(p) for k, p in table.items()}


def produce(bootstrap, topic, props):
    conf = {"bootstrap.servers": bootstrap, "plugin.library.paths": PLUGIN, "linger.ms": 5}
    conf.update(props)
    producer = confluent_kafka.Producer(conf)
    got, errors = {}, []

    def on_delivery(err, msg):
        if err:
            errors.append(str(err))
        else:
            got[msg.key().decode()] = msg.partition()

    for k in KEYS:
        producer.produce(topic, key=k, value=b"v", on_delivery=on_delivery)
        producer.poll(0)
    left = producer.flush(30)
    if left or errors:
        raise SystemExit(f"{topic}: {left} messages left, errors: {errors[:3]}")
    return got


def main():
    host = subprocess.Popen([HOST, "3"] + [f"{t}:{p}" for t, p, _ in CASES],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        bootstrap = host.stdout.readline().strip()
        failed = 0
        for topic, partitions, props in CASES:
            want = route(partitions, props)
            got = produce(bootstrap, topic, props)
            wrong = [k for k in KEYS if got.get(k) != want[k]]
            print(f"{topic}: {len(got)} delivered, {len(wrong)} off the ring "
                  f"(confluent-kafka {confluent_kafka.version()[0]}, "
                  f"librdkafka {confluent_kafka.libversion()[0]})")
            if wrong:
                k = wrong[0]
                print(f"  e.g. {k}: partition {got.get(k)}, ringlane route says {want[k]}")
                failed += 1
        # A pair that cannot give a ring is refused when the producer is made.
        try:
            confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                      "plugin.library.paths": PLUGIN,
                                      "ringlane.profile": "maglev", "ringlane.vnodes": "1000"})
            print("maglev with vnodes 1000 was accepted")
            failed += 1
        except confluent_kafka.KafkaException as e:
            if "ringlane.vnodes: profile maglev takes a prime" not in str(e):
                print(f"maglev with vnodes 1000 refused with an unexpected message: {e}")
                failed += 1
            else:
                print(f"refused: {e}")
        return 1 if failed else 0
    finally:
        host.stdin.close()
        host.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
