#!/usr/bin/env bash
# Installs everything the tests need, starts the real servers (Mosquitto, ActiveMQ, RabbitMQ,
# nats-server, Redis, nginx from Debian's packages), installs Java and Chromium where missing,
# and runs the whole suite (lint, then pytest).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash contrib/setup/venv.sh
bash contrib/brokers/brokers.sh start
# The merge tests run a real local Spark (Java) and load report.html in headless Chromium;
# the TLS tests make their certificates with openssl.
need=()
command -v java >/dev/null || need+=(default-jre-headless)
command -v chromium >/dev/null || need+=(chromium)
command -v openssl >/dev/null || need+=(openssl)
if [ ${#need[@]} -gt 0 ]; then
    as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
    echo "setup: installing ${need[*]} from Debian's packages" >&2
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
.venv/bin/ruff check harness modules contrib tests
exec .venv/bin/python -m pytest -q "$@"
