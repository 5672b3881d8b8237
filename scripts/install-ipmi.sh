#!/usr/bin/env bash
# The BMC for the node power tests (crates/llem/tests/node.rs): OpenIPMI's simulator
# (`ipmi_sim`, Debian's openipmi) with its headers (libopenipmi-dev: the test builds a module
# that answers DCMI power readings), and ipmitool, which llem runs to read a BMC. Installed
# with apt-get when missing. Idempotent.
set -euo pipefail
command -v ipmi_sim >/dev/null && command -v ipmitool >/dev/null &&
  [ -f /usr/include/OpenIPMI/mcserv.h ] && exit 0
rc=0
"$(dirname "$0")/apt-install.sh" install-ipmi "the node power tests run a simulated BMC" \
  openipmi ipmitool libopenipmi-dev || rc=$?
if [ "$rc" -eq 3 ]; then
  echo "install-ipmi: install OpenIPMI (ipmi_sim and its headers) and ipmitool" >&2
fi
exit "$rc"
