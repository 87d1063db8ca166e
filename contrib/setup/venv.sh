#!/usr/bin/env bash
# Creates .venv with the project installed (editable, with the test tools).
# On a fresh Debian machine it first installs Python's venv support from Debian's packages.
set -euo pipefail
cd "$(dirname "$0")/../.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null || ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
    echo "setup: installing python3 and python3-venv from Debian's packages" >&2
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv \
        python3-pip >/dev/null
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "setup: harness needs Python 3.11 or newer; $python is $("$python" --version)" >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[dev]"
