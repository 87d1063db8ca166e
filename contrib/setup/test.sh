#!/usr/bin/env bash
# Installs everything the tests need and runs the whole suite (lint, then pytest).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash contrib/setup/venv.sh
.venv/bin/ruff check harness modules contrib tests
exec .venv/bin/python -m pytest -q "$@"
