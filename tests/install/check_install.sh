#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The install as a user outside the project meets it (docs/install.md, which must show the
# quick starts tests/install/quickstart*.c as they are, and README.md the first). Into scratch
# prefixes:
# 1. `cmake --install BUILD_DIR --prefix P`: the .pc files name P (written at install time);
#    with pkg-config, the quick starts (tests/install/quickstart*.c, shown in docs/install.md)
#    and app.c (every library) build and run, quickstart.c also against libringlane.a with
#    only what `pkg-config --static` adds; every public header compiles alone under -std=c11
#    -pedantic; the shared library names its SONAME; README.md and docs/*.md are installed in
#    share/doc/ringlane, and the files the manual page's SEE ALSO names exist.
# 2. find_package(ringlane) from tests/install/CMakeLists.txt, in each of its modes: without
#    components and with COMPONENTS consumer, leaving every variable of the caller's as it was
#    (its own find_package(ZLIB) and XXHASH_/LIBMD_/LIBUV_/RDKAFKA_ variables among them);
#    COMPONENTS ring with libuv's and librdkafka's pkg-config files hidden; dispatch, and no
#    components, refused there naming libuv; a libuv.pc of 1.40.0 refused with both versions,
#    by the package and by ringlane's own configure; an unknown component refused by name, and
#    with REQUIRED a failed configure. Each program built runs, shared and static.
# 3. `make install PREFIX=/opt/ringlane-check DESTDIR=D` from SOURCE_DIR: the libraries, CLI and
#    plugin built alone (no tests, benchmarks or examples) and staged under D; the staged tree
#    used with `pkg-config --define-prefix` and find_package; `make uninstall` removes it all,
#    the directories of ringlane's own included.
# Usage: check_install.sh BUILD_DIR SOURCE_DIR
set -eu
build="$1"
src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "install check: $*" >&2
  exit 1
}
cc="${CC:-cc}"
here="$src/tests/install"

# --- 0. docs/install.md shows the quick starts as they are here (all but the SPDX line) ---
mkdir "$tmp/doc"
awk -v dir="$tmp/doc" '/^```c$/ { n++; inside = 1; next } /^```$/ { inside = 0 }
  inside { print > (dir "/block" n ".c") }' "$src/docs/install.md"
for program in quickstart.c quickstart_dispatch.c; do
  tail -n +2 "$here/$program" >"$tmp/doc/$program.body"
  shown=no
  for block in "$tmp"/doc/block*.c; do
    cmp -s "$block" "$tmp/doc/$program.body" && shown=yes
  done
  [ "$shown" = yes ] || fail "docs/install.md does not show tests/install/$program as it is"
done
# and so does the README's quick start.
mkdir "$tmp/readme"
awk -v dir="$tmp/readme" '/^```c$/ { n++; inside = 1; next } /^```$/ { inside = 0 }
  inside { print > (dir "/block" n ".c") }' "$src/README.md"
shown=no
for block in "$tmp"/readme/block*.c; do
  cmp -s "$block" "$tmp/doc/quickstart.c.body" && shown=yes
done
[ "$shown" = yes ] || fail "README.md does not show tests/install/quickstart.c as it is"

# --- 1. cmake --install, pkg-config ---
prefix="$tmp/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
pcdir=$(dirname "$(find "$prefix" -name ringlane.pc | head -n 1)")
libdir=$(dirname "$pcdir")
for pc in ringlane ringlane-dispatch ringlane-kafka ringlane-consumer; do
  [ -f "$pcdir/$pc.pc" ] || fail "no $pc.pc"
  got=$(PKG_CONFIG_PATH="$pcdir" pkg-config --variable=prefix "$pc")
  [ "$got" = "$prefix" ] || fail "$pc.pc says prefix=$got, installed to $prefix"
done
pc() { PKG_CONFIG_PATH="$pcdir" pkg-config "$@"; }
# shellcheck disable=SC2046 # the flags are words
"$cc" -std=c11 -Wall -Wextra -Werror "$here/quickstart.c" -o "$tmp/quickstart_pc" \
  $(pc --cflags --libs ringlane)
LD_LIBRARY_PATH="$libdir" "$tmp/quickstart_pc" >"$tmp/quickstart.out"
[ "$(grep -c '^user:[0-9]* -> cache-[abc]$' "$tmp/quickstart.out")" -eq 3 ] ||
  fail "quickstart printed: $(cat "$tmp/quickstart.out")"
# Static: libringlane.a and what pkg-config --static adds for it (Requires.private, Libs.private).
static_libs=""
for word in $(pc --static --libs ringlane); do
  [ "$word" = -lringlane ] || static_libs="$static_libs $word"
done
# shellcheck disable=SC2046,SC2086
"$cc" -std=c11 -Wall -Wextra -Werror "$here/quickstart.c" -o "$tmp/quickstart_pc_static" \
  $(pc --cflags ringlane) "$libdir/libringlane.a" $static_libs
objdump -p "$tmp/quickstart_pc_static" | grep -q 'NEEDED *libringlane' &&
  fail "the static quick start needs libringlane.so"
"$tmp/quickstart_pc_static" | cmp -s - "$tmp/quickstart.out" ||
  fail "the static quick start answers otherwise than the shared one"
# The dispatcher's quick start, as docs/install.md says: -std=c11 with _POSIX_C_SOURCE.
# shellcheck disable=SC2046
"$cc" -std=c11 -pedantic -Wall -Wextra -Werror "$here/quickstart_dispatch.c" \
  -o "$tmp/quickstart_dispatch_pc" $(pc --cflags --libs ringlane-dispatch)
LD_LIBRARY_PATH="$libdir" "$tmp/quickstart_dispatch_pc" >"$tmp/dispatch.out"
printf 'customer-42 order %s\n' 1 2 3 | cmp -s - "$tmp/dispatch.out" ||
  fail "the dispatcher's quick start printed: $(cat "$tmp/dispatch.out")"
# shellcheck disable=SC2046
"$cc" -std=c11 -Wall -Wextra -Werror "$here/app.c" -o "$tmp/app_pc" \
  $(pc --cflags --libs ringlane-consumer ringlane-kafka ringlane-dispatch ringlane)
LD_LIBRARY_PATH="$libdir" "$tmp/app_pc"
# Every public header compiles alone in strict C11 (dispatcher.h and consumer.h do not include
# uv.h, so they need no feature-test macro).
for header in "$prefix"/include/ringlane/*.h; do
  name=$(basename "$header")
  printf '#include <ringlane/%s>\nint main(void) { return 0; }\n' "$name" >"$tmp/header.c"
  # shellcheck disable=SC2046
  "$cc" -std=c11 -pedantic-errors -Wall -Wextra -Werror -c "$tmp/header.c" -o "$tmp/header.o" \
    $(pc --cflags ringlane-consumer ringlane-kafka) || fail "ringlane/$name alone fails in -std=c11"
done
objdump -p "$libdir/libringlane.so" | grep -q 'SONAME *libringlane\.so\.0' ||
  fail "libringlane.so has no SONAME libringlane.so.0"
# The user documentation is installed beside LICENSE, every guide the source tree has, and the
# files the manual page's SEE ALSO names are there.
docdir="$prefix/share/doc/ringlane"
for doc in LICENSE README.md; do
  [ -f "$docdir/$doc" ] || fail "no share/doc/ringlane/$doc"
done
for doc in "$src"/docs/*.md; do
  [ -f "$docdir/docs/$(basename "$doc")" ] || fail "no share/doc/ringlane/docs/$(basename "$doc")"
done
man_page=$(find "$prefix" -name ringlane.1 | head -n 1)
[ -n "$man_page" ] || fail "no ringlane.1 installed"
grep -o 'share/doc/ringlane/[A-Za-z/._]*' "$man_page" >"$tmp/man_docs" ||
  fail "ringlane.1 names no installed documentation"
while IFS= read -r named; do
  [ -f "$prefix/$named" ] || fail "ringlane.1 names $named, which is not installed"
done <"$tmp/man_docs"
echo "install check: cmake --install, pkg-config (quick starts, app, static, headers in c11)," \
  "documentation: ok"

# --- 2. find_package ---
# configure MODE [extra cmake arguments]: a fresh configure of tests/install in MODE.
configure() {
  mode="$1"
  shift
  rm -rf "$tmp/cmake-$mode"
  cmake -S "$here" -B "$tmp/cmake-$mode" -DRL_CHECK="$mode" "$@" >"$tmp/cmake-$mode.log" 2>&1
}
check_mode() {
  mode="$1"
  shift
  configure "$mode" "$@" || { cat "$tmp/cmake-$mode.log" >&2; fail "find_package, mode $mode"; }
  cmake --build "$tmp/cmake-$mode" >"$tmp/build-$mode.log" 2>&1 ||
    { cat "$tmp/build-$mode.log" >&2; fail "building mode $mode"; }
}
check_mode all -DCMAKE_PREFIX_PATH="$prefix"
"$tmp/cmake-all/app_shared"
"$tmp/cmake-all/app_static"
"$tmp/cmake-all/quickstart_shared" | cmp -s - "$tmp/quickstart.out" || fail "quickstart_shared"
"$tmp/cmake-all/quickstart_static" | cmp -s - "$tmp/quickstart.out" || fail "quickstart_static"
"$tmp/cmake-all/quickstart_dispatch" | cmp -s - "$tmp/dispatch.out" || fail "quickstart_dispatch"
[ -f "$(cat "$tmp/cmake-all/plugin_path.txt")" ] || fail "ringlane::ringlane_partitioner: no file"
check_mode consumer -DCMAKE_PREFIX_PATH="$prefix"
"$tmp/cmake-consumer/quickstart_dispatch" | cmp -s - "$tmp/dispatch.out" || fail "consumer mode"
"$tmp/cmake-consumer/quickstart_dispatch_static" | cmp -s - "$tmp/dispatch.out" ||
  fail "consumer mode, static"

# The ring alone where pkg-config knows only libmd and zlib (no libuv, no librdkafka).
mkdir "$tmp/pc-ring"
for module in libmd zlib; do
  ln -s "$(pkg-config --variable=pcfiledir "$module")/$module.pc" "$tmp/pc-ring/$module.pc"
done
PKG_CONFIG_LIBDIR="$tmp/pc-ring" PKG_CONFIG_PATH="" pkg-config --exists libuv &&
  fail "libuv's pkg-config file is not hidden"
export_hidden() { PKG_CONFIG_LIBDIR="$tmp/pc-ring" PKG_CONFIG_PATH="" "$@"; }
export_hidden check_mode ring -DCMAKE_PREFIX_PATH="$prefix"
"$tmp/cmake-ring/quickstart_shared" | cmp -s - "$tmp/quickstart.out" || fail "ring mode"
"$tmp/cmake-ring/quickstart_static" | cmp -s - "$tmp/quickstart.out" || fail "ring mode, static"
export_hidden check_mode no_libuv -DCMAKE_PREFIX_PATH="$prefix"
# A libuv older than the dispatcher needs, refused with both versions: by the package, and by
# ringlane's own configure.
mkdir "$tmp/pc-old"
sed 's/^Version:.*/Version: 1.40.0/' "$(pkg-config --variable=pcfiledir libuv)/libuv.pc" \
  >"$tmp/pc-old/libuv.pc"
PKG_CONFIG_PATH="$tmp/pc-old" check_mode old_libuv -DCMAKE_PREFIX_PATH="$prefix"
if PKG_CONFIG_PATH="$tmp/pc-old" cmake -S "$src" -B "$tmp/configure-old-libuv" \
  -DRINGLANE_BUILD_TESTS=OFF -DRINGLANE_BUILD_BENCH=OFF -DRINGLANE_BUILD_EXAMPLES=OFF \
  >"$tmp/configure-old-libuv.log" 2>&1; then
  fail "ringlane configured with libuv 1.40.0"
fi
grep -q "ringlane needs libuv >= 1.44.0" "$tmp/configure-old-libuv.log" &&
  grep -q "finds libuv 1.40.0" "$tmp/configure-old-libuv.log" ||
  { cat "$tmp/configure-old-libuv.log" >&2; fail "configure with libuv 1.40.0: no reason given"; }
check_mode nosuch -DCMAKE_PREFIX_PATH="$prefix"
if configure nosuch_required -DCMAKE_PREFIX_PATH="$prefix"; then
  fail "REQUIRED COMPONENTS nosuch configured"
fi
grep -q "no component 'nosuch'" "$tmp/cmake-nosuch_required.log" ||
  { cat "$tmp/cmake-nosuch_required.log" >&2; fail "REQUIRED COMPONENTS nosuch: no reason given"; }
echo "install check: find_package (all, consumer, ring without libuv, refusals; shared, static;" \
  "the caller's variables untouched): ok"

# --- 3. make install PREFIX=... DESTDIR=..., make uninstall ---
stage="$tmp/stage"
staged="$stage/opt/ringlane-check"
# A make of its own: not the jobs, flags and directories of a make that may have started ctest.
make_here() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$src" "$@"; }
make_here install PREFIX=/opt/ringlane-check DESTDIR="$stage" INSTALL_BUILD="$tmp/build-install" \
  JOBS=2 CMAKE_FLAGS= >"$tmp/make-install.log" 2>&1 ||
  { cat "$tmp/make-install.log" >&2; fail "make install"; }
for part in tests bench examples; do
  [ ! -e "$tmp/build-install/$part" ] || fail "make install built $part"
done
[ "$(ls "$staged/bin")" = ringlane ] || fail "make install put in bin: $(ls "$staged/bin")"
spcdir=$(dirname "$(find "$staged" -name ringlane.pc | head -n 1)")
[ "$(PKG_CONFIG_PATH="$spcdir" pkg-config --variable=prefix ringlane)" = /opt/ringlane-check ] ||
  fail "make install: ringlane.pc does not name PREFIX"
# shellcheck disable=SC2046
"$cc" -std=c11 -Wall -Wextra -Werror "$here/quickstart.c" -o "$tmp/quickstart_staged" \
  $(PKG_CONFIG_PATH="$spcdir" pkg-config --define-prefix --cflags --libs ringlane)
LD_LIBRARY_PATH="$(dirname "$spcdir")" "$tmp/quickstart_staged" | cmp -s - "$tmp/quickstart.out" ||
  fail "the quick start against the staged tree"
check_mode consumer -DCMAKE_PREFIX_PATH="$staged"
"$tmp/cmake-consumer/quickstart_dispatch" | cmp -s - "$tmp/dispatch.out" ||
  fail "find_package in the staged tree"
make_here uninstall DESTDIR="$stage" INSTALL_BUILD="$tmp/build-install" >/dev/null
left=$(find "$stage" -type f -o -type l)
[ -z "$left" ] || fail "make uninstall left: $left"
left=$(find "$stage" -type d \( -name ringlane -o -path '*/ringlane/*' \))
[ -z "$left" ] || fail "make uninstall left directories: $left"
echo "install check: make install PREFIX DESTDIR (libraries, CLI, plugin only), make uninstall: ok"
