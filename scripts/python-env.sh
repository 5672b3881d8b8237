#!/usr/bin/env bash
# Python packages the tests use to check llem's files the way users read them:
# pandas and polars reading timeseries.parquet, jsonschema validating BoAmps reports, and
# OpenTelemetry's protocol package decoding what llem pushes over OTLP. Installed from PyPI into target/pyenv
# (ignored by git); idempotent: an environment that already imports them is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/pyenv
want='import pandas, polars, pyarrow, jsonschema, referencing; from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2'
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$want" 2>/dev/null; then
  exit 0
fi
python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null; then
  echo "scripts/python-env.sh: $python not found; the Parquet compatibility test needs Python 3.9+" >&2
  exit 1
fi
mkdir -p target
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check 'pandas>=2' 'polars>=1' 'pyarrow>=15' \
  'jsonschema>=4.18' 'opentelemetry-proto>=1.27'
"$venv/bin/python" -c "$want"
echo "scripts/python-env.sh: pandas, polars, pyarrow, jsonschema and opentelemetry-proto ready in $venv"
