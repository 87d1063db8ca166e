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
# The many-clients tests read the broker's side of their connections with ss.
command -v ss >/dev/null || need+=(iproute2)
# The .hlog is read by HdrHistogram's reference Java implementation (its log processor).
[ -f /usr/share/java/hdrhistogram.jar ] || need+=(libhdrhistogram-java)
# shellcheck source=packages.sh
source contrib/setup/packages.sh
[ ${#need[@]} -eq 0 ] || ensure_packages "${need[@]}"
.venv/bin/ruff check harness modules contrib tests
# The tests that time the machine (marked alone in tests/conftest.py) run one after another;
# those that load all of it (marked paired) two at a time, beside nothing else (three Spark
# tests at once thrash the two cores); the rest three at a time, which wait on brokers and
# paced runs more than they compute (four at a time was faster, and made paced runs miss
# their rates). Both parallel parts hand out a test or two at a time, the longest first, the
# tests that share a slow module fixture together (pytest-xdist; conftest.py's
# LONGEST_FIRST). Exit 5 (nothing selected, where the arguments name tests of one kind only)
# is no failure.
status=0
part() {
    local code=0
    .venv/bin/python -m pytest -q "$@" || code=$?
    [ "$code" -ne 5 ] || code=0
    [ "$code" -le "$status" ] || status=$code
}
part -m alone "$@"
part -m paired -n 2 --dist loadgroup --no-loadscope-reorder "$@"
part -m "not alone and not paired" -n 3 --maxschedchunk 2 "$@"
exit "$status"
