#!/usr/bin/env bash
# Installs the project and runs the quick-start job on the embedded loopback broker:
# profiles/quickstart.yaml: 4 sender threads at 1,000 msg/s each to queue Q1, one receiver,
# 10 s of which 2 s warm-up.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash contrib/setup/venv.sh
exec .venv/bin/harness run profiles/quickstart.yaml "$@"
