#!/usr/bin/env bash
# The whole suite on the oldest versions pyproject.toml allows (run by hand, not in CI: ~5 min).
#
#   benchmarks/check_lowest_deps.sh                    # every direct dependency at its floor
#   benchmarks/check_lowest_deps.sh 'polars==1.44.2'   # the same, one floor tried lower
#
# A fresh clone of the committed tree (beside ../shared when this checkout has it), a fresh venv
# filled by uv's lowest-direct resolution (direct dependencies at their lowest allowed version,
# the others at their newest), then the README's pytest command. Exit status is pytest's.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/dbdiag-lowest.XXXXXX)
trap 'rm -rf "$work"' EXIT

git clone -q "$repo" "$work/repo"
if [ -d "$repo/../shared" ]; then
  ln -s "$(cd "$repo/../shared" && pwd)" "$work/shared"
fi
python3 -m venv "$work/uv" && "$work/uv/bin/pip" install -q "uv>=0.13.9"  # --system-certs: the machine's CA store, as pip uses
cd "$work/repo"
python3 -m venv .venv
"$work/uv/bin/uv" pip install -q --python .venv/bin/python --system-certs --resolution lowest-direct -e '.[test]' "$@"
"$work/uv/bin/uv" pip list --python .venv/bin/python
.venv/bin/python -m pytest -q
