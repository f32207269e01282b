#!/usr/bin/env bash
# Installs what mneme needs on Debian 12 (LLVM 22, clang-22, lld-22, zstd and
# zlib headers; Go modules) and builds the prefix under build/. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for p in llvm-22-dev clang-22 lld-22 libzstd-dev zlib1g-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
go mod download
make all >/dev/null
echo "mneme: built $(pwd)/build/bin/mneme ($(build/bin/mneme version 2>/dev/null | head -1))"
