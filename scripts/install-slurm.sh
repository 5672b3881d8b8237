#!/usr/bin/env bash
# Slurm for the cluster tests (crates/llem/tests/slurm.rs): Debian's slurm-wlm (slurmctld,
# slurmd, sbatch, squeue, sacct, scancel) and munge, installed with apt-get when missing.
# scripts/slurm-cluster.sh starts a one-node cluster from them per test. Idempotent.
set -euo pipefail
command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null && exit 0
rc=0
"$(dirname "$0")/apt-install.sh" install-slurm "the Slurm executor's tests run a real cluster" \
  slurm-wlm munge || rc=$?
if [ "$rc" -eq 3 ]; then
  echo "install-slurm: install Slurm (slurmctld, slurmd, munge) and put it on PATH" >&2
fi
exit "$rc"
