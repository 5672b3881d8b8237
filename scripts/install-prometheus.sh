#!/usr/bin/env bash
# The Prometheus server the live-metrics test scrapes llem with (crates/llem/tests/live.rs):
# Debian's `prometheus`, installed with apt-get when missing (its service is not started:
# the test runs its own on a free port). Idempotent.
set -euo pipefail
command -v prometheus >/dev/null && exit 0
rc=0
"$(dirname "$0")/apt-install.sh" install-prometheus "the live metrics test scrapes llem with it" \
  --no-install-recommends prometheus || rc=$?
if [ "$rc" -eq 3 ]; then
  echo "install-prometheus: install Prometheus (2.x) so that \`prometheus\` is on PATH" >&2
fi
exit "$rc"
