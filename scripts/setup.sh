#!/usr/bin/env bash
# Installs what mneme needs on Debian 12 (LLVM 22, clang-22, lld-22, zstd and
# zlib headers; Go modules), the lint tools `make test` runs (clang-format-22;
# staticcheck at the version the Makefile pins), ccache (which keeps `make
# mutate` from recompiling llvm's unchanged C++ for every mutant), Python's
# venv module, the PostgreSQL server the Python tests run a shared Optuna
# study on, and Chromium, in which `make test` opens an optimize report;
# builds the prefix under build/ and installs the Python package
# into .venv. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for p in llvm-22-dev clang-22 lld-22 libzstd-dev zlib1g-dev clang-format-22 ccache python3-venv postgresql chromium; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
go mod download
make tools >/dev/null
make all >/dev/null
# Debian's Python is externally managed (PEP 668): the package and its test
# dependencies go into a virtual environment at the repository root.
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e 'python[test]'
echo "mneme: Python package installed in $(pwd)/.venv"
echo "mneme: built $(pwd)/build/bin/mneme ($(build/bin/mneme version 2>/dev/null | head -1))"
