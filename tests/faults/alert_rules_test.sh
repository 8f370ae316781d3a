#!/usr/bin/env bash
# deploy/monitoring/ as Prometheus reads it: `promtool check rules` on the
# alert rules, then `promtool test rules` on their cases (each alert firing
# when it should and silent when it should not). Exit 77 (skipped) only when
# promtool is not installed (Debian package prometheus: scripts/setup).
set -uo pipefail
dir=${LEASEHOLD_SOURCE_ROOT:?}/deploy/monitoring
if ! command -v promtool >/dev/null 2>&1; then
  echo "skipped: promtool is not on PATH (Debian package prometheus)"
  exit 77
fi
cd "$dir" || exit 1
timeout 60 promtool check rules leasehold-alerts.yaml || exit 1
timeout 60 promtool test rules leasehold-alerts.test.yaml
