#!/usr/bin/env bash
# The Prometheus server and Pushgateway the live-metrics tests use (crates/llem/tests/live.rs):
# Debian's `prometheus` and `prometheus-pushgateway`, installed with apt-get when missing
# (their services are not started: the tests run their own on free ports). Idempotent.
set -euo pipefail
command -v prometheus >/dev/null && command -v prometheus-pushgateway >/dev/null && exit 0
rc=0
"$(dirname "$0")/apt-install.sh" install-prometheus "the live metrics tests scrape and push with them" \
  --no-install-recommends prometheus prometheus-pushgateway || rc=$?
if [ "$rc" -eq 3 ]; then
  echo "install-prometheus: install Prometheus (2.x) and its Pushgateway so that \`prometheus\` and \`prometheus-pushgateway\` are on PATH" >&2
fi
exit "$rc"
