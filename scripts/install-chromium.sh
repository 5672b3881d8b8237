#!/usr/bin/env bash
# Headless Chromium for the report test (`llem report` is rendered and screenshotted):
# Debian's `chromium` package, installed with apt-get when missing. Idempotent.
set -euo pipefail
command -v chromium >/dev/null && exit 0
if ! command -v apt-get >/dev/null; then
  echo "install-chromium: install Chromium and put it on PATH (or set LLEM_CHROMIUM)" >&2
  exit 1
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo=(sudo); else
    echo "install-chromium: need apt-get install chromium, but not root and no sudo" >&2
    exit 1
  fi
fi
echo "install-chromium: installing chromium (the report test renders the HTML report) ..."
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get install -y -qq chromium >/dev/null ||
  { "${sudo[@]}" apt-get update -qq >/dev/null && "${sudo[@]}" apt-get install -y -qq chromium >/dev/null; }
