#!/usr/bin/env bash
# Headless Chromium for the report test (`llem report` is rendered and screenshotted):
# Debian's `chromium` package, installed with apt-get when missing. Idempotent.
set -euo pipefail
command -v chromium >/dev/null && exit 0
rc=0
"$(dirname "$0")/apt-install.sh" install-chromium "the report test renders the HTML report" chromium || rc=$?
if [ "$rc" -eq 3 ]; then
  echo "install-chromium: install Chromium and put it on PATH (or set LLEM_CHROMIUM)" >&2
fi
exit "$rc"
