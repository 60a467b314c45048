#!/usr/bin/env bash
# make package-check: the wheel and the sdist as a user gets them (minutes; tests/test_packaging.py does the quick
# half in the suite). Usage: bash benchmarks/package_check.sh VENV_PYTHON
#   VENV_PYTHON   the project's .venv python (builds the packages; runs the sdist's tests, which need torch)
#   PYTHON        the interpreter of the fresh venv [python3]; SDIST_TESTS: the sdist's tests to run [tests]
# Prints one line per step and exits non-zero at the first that fails. Everything goes to a temporary folder.
set -euo pipefail
VENV_PY=${1:?usage: package_check.sh VENV_PYTHON}
VENV_PY="$(cd "$(dirname "$VENV_PY")" && pwd)/$(basename "$VENV_PY")"  # absolute, the venv's link kept
PY=${PYTHON:-python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
step() { echo "package-check: $*"; }

step "building the sdist"
SDIST=$(cd "$ROOT" && "$VENV_PY" -c "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))" "$WORK" | tail -1)
mkdir "$WORK/unpacked" && tar -xzf "$WORK/$SDIST" -C "$WORK/unpacked"
UNPACKED=$(ls -d "$WORK"/unpacked/*)
tar -tzf "$WORK/$SDIST" > "$WORK/sdist.txt"  # a listing first: grep -q would cut the pipe (pipefail)
grep -q '/LICENSE$' "$WORK/sdist.txt" || { step "FAIL: no LICENSE in the sdist"; exit 1; }

step "building the wheel from the unpacked sdist"
(cd "$UNPACKED" && "$VENV_PY" -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation -w "$WORK/dist" .)
WHEEL=$(ls "$WORK"/dist/*.whl)
"$VENV_PY" -c "import sys, zipfile; print('\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))" "$WHEEL" > "$WORK/wheel.txt"
grep -q 'licenses/LICENSE$' "$WORK/wheel.txt" || { step "FAIL: no LICENSE in the wheel"; exit 1; }

step "installing the wheel into a fresh venv, no torch, dependencies from the index"
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q --disable-pip-version-check "$WHEEL[api]"
if "$WORK/venv/bin/python" -c "import torch" 2>/dev/null; then step "FAIL: torch got installed"; exit 1; fi

step "running the installed wheel outside the tree"
mkdir "$WORK/elsewhere" && cd "$WORK/elsewhere"
cp "$ROOT/sweeps/published/sm_100_B200.json" "$ROOT/sweeps/published/gfx950.json" .
"$WORK/venv/bin/mfu-sweep" --help > help.txt && grep -q "mfu-sweep docs" help.txt
"$WORK/venv/bin/mfu-sweep" docs api > api.md && grep -q "^# Python API" api.md
"$WORK/venv/bin/mfu-sweep" compare sm_100_B200.json gfx950.json --metric tflops --json > compare.json
"$WORK/venv/bin/python" - <<'EOF'
import json
from mfu_sweep import api
frame = api.bands(["sm_100_B200.json", "gfx950.json"], metric="tflops")
cli = [b for c in json.load(open("compare.json"))["comparisons"] for b in c["bands"]]
assert frame["ratio"].tolist() == [b["ratio"] for b in cli], "api.bands differs from compare --json"
print(f"package-check: api.bands = compare --json over {len(cli)} bands; columns {list(frame.columns[:13])}")
EOF

step "running the sdist's tests (${SDIST_TESTS:-tests}) from the unpacked sdist"
cd "$UNPACKED"
# shellcheck disable=SC2086
PYTHONPATH="$UNPACKED" "$VENV_PY" -m pytest -q -p no:cacheprovider ${SDIST_TESTS:-tests}
step "ok"
