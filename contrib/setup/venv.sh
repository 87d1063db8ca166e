#!/usr/bin/env bash
# Creates .venv with the project installed (editable, with the test tools).
# On a fresh Debian machine it first installs Python's venv support from Debian's packages.
set -euo pipefail
cd "$(dirname "$0")/../.."

# shellcheck source=packages.sh
source contrib/setup/packages.sh

python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null || ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
    ensure_packages python3 python3-venv python3-pip
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "setup: harness needs Python 3.11 or newer; $python is $("$python" --version)" >&2
    exit 1
fi
# python-qpid-proton (the amqp10 extra) builds from source: a C compiler, and OpenSSL's
# headers for its TLS.
build=(libssl-dev)
command -v gcc >/dev/null || build+=(gcc)
if ! "$python" -c 'import os, sysconfig, sys
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
    build+=(python3-dev)
fi
ensure_packages "${build[@]}"
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[dev]"
# The project's own files compiled once, here: where PYTHONDONTWRITEBYTECODE is set (as on
# these machines) Python writes no cache, and every harness process, the suite's thousands
# among them, would compile them again.
.venv/bin/python -m compileall -q -j 0 harness modules tests contrib >/dev/null
