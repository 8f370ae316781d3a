#!/bin/bash
# Embedding as docs/embedding.md ("Build against it") says, word for word:
# its two marked blocks (the shell commands and the CMakeLists.txt) are run
# as they are in a temporary directory, `build` there being this build
# directory and `main.cpp` examples/embedded_agent.cpp. Then: pkg-config's
# paths lie in the stage, the pkg-config program loads the staged shared
# library and the static one none, the flags name no language standard, the
# installed headers include only installed headers, and the example's
# process tests (it leads, greets, releases: at its end and on SIGTERM) pass
# against each of the three programs.
set -euo pipefail
# meson test points LD_LIBRARY_PATH at the build's libleasehold.so: a user's
# shell does not, and the programs must find the staged one themselves.
unset LD_LIBRARY_PATH
build=${LEASEHOLD_BUILD_ROOT:?}
src=${LEASEHOLD_SOURCE_ROOT:?}
doc=$src/docs/embedding.md
tmp=$(mktemp -d /tmp/leasehold-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# The fenced block after the Nth line marking a block the test runs.
block() {
  awk -v want="$1" '
    /^<!-- install-embedding runs this block/ { n++; next }
    n == want && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }' "$doc"
}
block 1 >"$tmp/commands.sh"
block 2 >"$tmp/CMakeLists.txt"
for f in commands.sh CMakeLists.txt; do
  [ -s "$tmp/$f" ] || { echo "docs/embedding.md: no marked block for $f"; exit 1; }
done
ln -s "$build" "$tmp/build"
cp "$src/examples/embedded_agent.cpp" "$tmp/main.cpp"

echo "--- docs/embedding.md's commands, run in $tmp:"
cat "$tmp/commands.sh"
(cd "$tmp" && timeout 480 bash -euo pipefail commands.sh >"$tmp/commands.log" 2>&1) \
  || { cat "$tmp/commands.log"; echo "FAIL: the documented commands failed"; exit 1; }

prefix=$tmp/stage/usr/local
pcdir=$(dirname "$(find "$prefix" -name leasehold.pc)")
pc() { PKG_CONFIG_PATH=$pcdir pkg-config "$@" leasehold; }
flags="$(pc --cflags) $(pc --libs)"
echo "pkg-config --cflags --libs leasehold: $flags"
# Every path the .pc names is in the stage (not /usr/local, not lib/include).
for dir in "$(pc --variable=includedir)" "$(pc --variable=libdir)"; do
  real=$(realpath -m "$dir")
  case "$real" in
    "$prefix"/*) ;;
    *) echo "FAIL: leasehold.pc names $dir ($real), outside the stage $prefix"; exit 1 ;;
  esac
  [ -d "$real" ] || { echo "FAIL: leasehold.pc names $dir, which does not exist"; exit 1; }
done
[ -f "$(pc --variable=includedir)/leasehold/runtime.hpp" ] \
  || { echo "FAIL: no leasehold/runtime.hpp under the .pc's includedir"; exit 1; }
# The language standard is the embedding program's choice, not the .pc's.
if grep -Eq -- '(^| )-std=' <<<"$flags"; then
  echo "FAIL: leasehold.pc forces a language standard on the embedder: $flags"; exit 1
fi
# Only the installed headers: the source tree is not on the include path.
for h in "$prefix"/include/leasehold/*.hpp; do
  if grep -n '#include "' "$h" | grep -v '"leasehold/'; then
    echo "FAIL: $h includes a header that is not installed"; exit 1
  fi
done

shared=$(realpath -ms "$(pc --variable=libdir)")/libleasehold.so.0
for app in app-pkg-config cmake-build/app-cmake; do
  loads=$(ldd "$tmp/$app" | awk '$1 == "libleasehold.so.0" { print $3 }')
  [ "$(realpath -ms "$loads")" = "$shared" ] \
    || { echo "FAIL: $app loads libleasehold.so.0 from '$loads', not $shared"; ldd "$tmp/$app"; exit 1; }
done
if ldd "$tmp/cmake-build/app-static" | grep -q libleasehold; then
  echo "FAIL: app-static (leasehold::leasehold_static) loads a shared libleasehold"; exit 1
fi
echo "ok: the .pc's paths are in the stage; the shared programs load $shared; app-static none"

for app in app-pkg-config cmake-build/app-cmake cmake-build/app-static; do
  echo "--- the example's process tests against $app"
  LEASEHOLD_EXAMPLE_BIN="$tmp/$app" \
    "$build/tests/process/process_runtime_realtime" -tc="the embedding example*"
done
