#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Installs a build into a scratch prefix and builds tests/install/app.c against it three ways:
# pkg-config (shared libraries; --define-prefix, so the .pc files must be relocatable), CMake's
# find_package(ringlane) with the shared targets, and with the static ones; each program runs.
# Usage: check_install.sh BUILD_DIR SOURCE_DIR
set -eu
build="$1"
src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null

pcdir=$(dirname "$(find "$prefix" -name ringlane.pc | head -n 1)")
[ -f "$pcdir/ringlane-consumer.pc" ] || { echo "install check: no ringlane-consumer.pc" >&2; exit 1; }
libdir=$(dirname "$pcdir")
flags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-prefix --cflags --libs \
    ringlane-consumer ringlane-kafka ringlane-dispatch ringlane)
case "$flags" in *"$prefix"*) ;; *) echo "install check: pkg-config flags miss the prefix: $flags" >&2; exit 1 ;; esac
# shellcheck disable=SC2086 # the flags are words
${CC:-cc} -std=c11 -Wall -Wextra -Werror "$src/tests/install/app.c" -o "$tmp/app_pc" $flags
LD_LIBRARY_PATH="$libdir" "$tmp/app_pc"
# The installed shared library names its SONAME.
objdump -p "$libdir/libringlane.so" | grep -q 'SONAME *libringlane\.so\.0' ||
    { echo "install check: libringlane.so has no SONAME libringlane.so.0" >&2; exit 1; }

cmake -S "$src/tests/install" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/cmake" >/dev/null
"$tmp/cmake/app_shared"
"$tmp/cmake/app_static"
echo "install check: pkg-config, find_package (shared, static): ok"
