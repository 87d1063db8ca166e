#!/usr/bin/env bash
# Installs everything the tests need, starts the real brokers (Mosquitto, ActiveMQ,
# RabbitMQ from Debian's packages) and runs the whole suite (lint, then pytest).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash contrib/setup/venv.sh
bash contrib/brokers/brokers.sh start
.venv/bin/ruff check harness modules contrib tests
exec .venv/bin/python -m pytest -q "$@"
