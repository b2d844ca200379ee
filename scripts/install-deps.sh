#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Installs the Debian packages ringlane needs that are missing, and says which. Needs root (or
# sudo). Usage: scripts/install-deps.sh [GROUP...]; groups:
#   lib     what building and installing the libraries, the CLI and the plugin needs
#           (`make install`): a compiler, cmake, pkg-config and the libraries' -dev packages
#   build   (default) everything `make test` and `make demo` need: lib, and what the tests
#           check against (cmocka, libmemcached, kcat, Python's client, docker-compose, ...)
#   bench, format, fuzz   build and valgrind; clang-format and git; build and clang
set -eu

# The libraries: the ring (xxhash, MD5, CRC-32), the dispatcher (libuv), the Kafka layers.
lib="cmake make gcc libc6-dev pkg-config libxxhash-dev libmd-dev zlib1g-dev libuv1-dev"
lib="$lib librdkafka-dev"

build="$lib libcmocka-dev"
build="$build libmemcached-dev" # the ketama proof
build="$build libssl-dev" # libmemcached.pc requires libcrypto.pc
build="$build kcat" # the plugin's interoperability test
build="$build liblz4-dev libzstd-dev" # what librdkafka.a links: the two-librdkafka test
build="$build python3-confluent-kafka" # the plugin from Python: the client test
build="$build docker-compose" # validates docker-compose.yml (no Docker engine is needed)
build="$build groff-base" # test_cli checks that the manual page, ringlane(1), formats cleanly
build="$build curl python3" # example_metrics_http scrapes metrics_http and checks the text
bench="valgrind"
format="clang-format git" # git lists the files to check
fuzz="clang libclang-rt-14-dev"

groups="${*:-build}"
want=""
for g in $groups; do
  case "$g" in
    lib) want="$want $lib" ;;
    build) want="$want $build" ;;
    bench) want="$want $build $bench" ;;
    format) want="$want $format" ;;
    fuzz) want="$want $build $fuzz" ;;
    *) echo "install-deps: unknown group '$g' (lib, build, bench, format, fuzz)" >&2; exit 2 ;;
  esac
done

missing=""
for p in $want; do
  case " $missing " in *" $p "*) continue ;; esac
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  sudo=""
elif command -v sudo >/dev/null 2>&1; then
  sudo="sudo"
else
  echo "install-deps: missing packages:$missing (run as root, or install them)" >&2
  exit 1
fi
echo "install-deps: installing:$missing"
$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
# shellcheck disable=SC2086
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
