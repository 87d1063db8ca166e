#!/usr/bin/env bash
# Installs the project and runs the quick-start job on the embedded loopback broker:
# 4 sender threads at 1,000 msg/s each to queue Q1, one receiver, 12 s with 2 s warm-up.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash contrib/setup/venv.sh
exec .venv/bin/harness run -n quickstart -m loopback.Sender -nt 4 -rt 1000 -d Q1 \
    -rl 12 -sw 2 -ss 2 -g "-m loopback.Receiver -d Q1" "$@"
