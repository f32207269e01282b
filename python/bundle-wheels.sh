#!/usr/bin/env bash
# Downloads the wheels the Python GPU checks need on the GPU machine (Python
# 3.12, x86_64, no network) into .gpu/wheels at the repository root, for
# gpu-checks.sh to install offline. numpy is left out: the GPU machine has it
# (with PyTorch), and it is the largest dependency. Run on a networked machine.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$repo/.gpu/wheels}"
pip="${PIP:-$repo/.venv/bin/pip}"
[ -x "$pip" ] || pip="python3 -m pip"
mkdir -p "$dest"
# optuna's dependency tree without numpy, named explicitly because --no-deps
# is the only way to leave one dependency out.
$pip download --quiet --disable-pip-version-check --no-deps --dest "$dest" \
  --python-version 3.12 --implementation cp --abi cp312 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  --only-binary=:all: \
  optuna alembic sqlalchemy greenlet colorlog tqdm PyYAML Mako MarkupSafe packaging typing_extensions
du -sh "$dest" | sed 's/^/wheels: /'
ls "$dest"
