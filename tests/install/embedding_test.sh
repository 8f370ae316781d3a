#!/bin/bash
# Embedding as a C++ user does it: `meson install` into a temporary prefix,
# build examples/embedded_agent.cpp from there with nothing but
# `pkg-config --cflags --libs leasehold` (and the program's own -std=c++17:
# the .pc forces no standard), and run the example's process test
# (it leads, greets, releases its Lease) against that binary.
set -euo pipefail
build=${LEASEHOLD_BUILD_ROOT:?}
src=${LEASEHOLD_SOURCE_ROOT:?}
tmp=$(mktemp -d /tmp/leasehold-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

meson install -C "$build" --destdir "$tmp/root" --no-rebuild --quiet >"$tmp/install.log" 2>&1 \
  || { cat "$tmp/install.log"; exit 1; }
pc=$(find "$tmp/root" -name leasehold.pc | head -n 1)
[ -n "$pc" ] || { echo "no leasehold.pc installed"; exit 1; }
pcdir=$(dirname "$pc")
prefix=$(sed -n 's/^prefix=//p' "$pc")
flags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$tmp/root$prefix" \
          --cflags --libs leasehold)
echo "pkg-config --cflags --libs leasehold: $flags"
# The language standard is the embedding program's choice, not the .pc's.
if grep -Eq -- '(^| )-std=' <<<"$flags"; then
  echo "leasehold.pc forces a language standard on the embedder: $flags"; exit 1
fi
# Only the installed headers: the source tree is not on the include path.
for h in "$tmp/root$prefix"/include/leasehold/*.hpp; do
  if grep -n '#include "' "$h" | grep -v '"leasehold/'; then
    echo "$h includes a header that is not installed"; exit 1
  fi
done
cp "$src/examples/embedded_agent.cpp" "$tmp/main.cpp"
# shellcheck disable=SC2086
c++ -std=c++17 -O1 "$tmp/main.cpp" -o "$tmp/embedded-agent" $flags
LEASEHOLD_EXAMPLE_BIN="$tmp/embedded-agent" \
  "$build/tests/process/process_runtime_realtime" -tc="the embedding example*"
