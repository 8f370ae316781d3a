#!/usr/bin/env bash
# Builds the Containerfile (the leasehold:0.1.0 image deploy/ names) with
# podman or docker when either works on this machine, then checks the image:
# `leasehold version` runs in it and names 0.1.0. Exit 77 (meson: skipped)
# with a message when neither is usable.
set -uo pipefail
src="$1"
engine=""
for e in podman docker; do
  if command -v "$e" >/dev/null 2>&1 && timeout 20 "$e" info >/dev/null 2>&1; then
    engine="$e"
    break
  fi
done
if [ -z "$engine" ]; then
  echo "skipped: neither podman nor docker is usable here (not installed, or no daemon)"
  exit 77
fi
tag="leasehold:0.1.0"
echo "building $tag with $engine"
timeout 1100 "$engine" build -t "$tag" -f "$src/Containerfile" "$src" || {
  echo "FAIL: $engine build of $src/Containerfile"
  exit 1
}
out=$(timeout 60 "$engine" run --rm "$tag" version 2>&1)
echo "leasehold version in the image: $out"
case "$out" in
  *0.1.0*) ;;
  *) echo "FAIL: the image's leasehold does not report 0.1.0"; exit 1 ;;
esac
# The runtime stage carries no build tools.
if timeout 60 "$engine" run --rm --entrypoint /bin/sh "$tag" -c 'command -v g++ || command -v meson'; then
  echo "FAIL: the runtime image contains build tools"
  exit 1
fi
echo "ok: $tag built and runs"
