#!/usr/bin/env bash
# apt-install.sh WHO WHY PKG...: installs Debian packages with apt-get (through sudo when not
# root), updating the package lists once if the first try fails. Exit 3 when there is no
# apt-get, so the caller can say what to install elsewhere.
set -euo pipefail
who="$1" why="$2"
shift 2
command -v apt-get >/dev/null || exit 3
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo=(sudo); else
    echo "$who: need $* (apt-get install $*), but not root and no sudo" >&2
    exit 1
  fi
fi
echo "$who: installing $* ($why) ..."
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get install -y -qq "$@" >/dev/null ||
  { "${sudo[@]}" apt-get update -qq >/dev/null && "${sudo[@]}" apt-get install -y -qq "$@" >/dev/null; }
