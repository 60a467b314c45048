#!/usr/bin/env bash
# The one prepared script for a session that has a GPU: everything issue #4 still needs from hardware,
# in about 8 minutes, each step capped so a slow step cannot eat the next one's time.
#
#   1. `mfu-sweep selftest` (tool vs torch.utils.benchmark / triton do_bench, graphs vs events, numerics, spec lookup)
#   2. benchmarks/cache_policy.py: L2 rotation vs flush on the same shapes
#   3. the default sweep: bf16 eager over 1 MFLOP .. 2 TFLOP after a 10 s soak, then fp16, fp32, tf32, fp8
#   4. bf16 under torch.compile (as far as its time cap allows; --resume finishes it later)
#   5. `mfu-sweep ceilings --into` the sweep file, then `validate`
#
# Where: the repository root on the GPU machine. Results go to $OUT (default /tmp/gpu-check): copy the
# sweep into sweeps/ and the printed tables into the issue note. Nothing here edits a result by hand.
#
# Dependencies: the GPU image has torch, numpy, scipy, seaborn, click, tqdm and nvidia-ml-py but not
# jsonschema; `make gpu-wheels` (here, with PyPI) puts it and its needs into .whl/, which this script
# installs into /tmp/site when present. With the device tool:
#   run(command="bash benchmarks/gpu_check.sh", carry=[".whl"], timeout_s=590)
#
# A dry run on a CPU (small range, same steps, ~3 min):
#   DEVICE=cpu DTYPES=fp16 MAX_FLOP=3e7 CACHE_SIZES=128,256 PYTHON=.venv/bin/python bash benchmarks/gpu_check.sh
set -uo pipefail

DEVICE=${DEVICE:-cuda}
DTYPES=${DTYPES:-"fp16 fp32 tf32 fp8"}  # after bf16
MAX_FLOP=${MAX_FLOP:-}                  # empty: the device's default range
CACHE_SIZES=${CACHE_SIZES:-256,512,1024,2048,4096,8192}
LABEL=${LABEL:-}                        # empty: the default label (chip-backend)
OUT=${OUT:-/tmp/gpu-check}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1  # the whole log comes back with $OUT, whatever the caller keeps
export PYTHONUNBUFFERED=1

if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
MS="$PY -m mfu_sweep"
RANGE=()
[ -n "$MAX_FLOP" ] && RANGE=(--max-flop "$MAX_FLOP")
NAME=()
[ -n "$LABEL" ] && NAME=(--label "$LABEL")
SWEEP="$OUT/sweep.json"
status=0

step() {  # step NAME SECONDS CMD...: run under a time cap (SIGINT first, so a sweep saves and says how to resume)
  local name=$1 cap=$2
  shift 2
  echo "=== $name (cap ${cap}s) ==="
  local t0=$SECONDS
  timeout -s INT -k 15 "$cap" "$@"
  local rc=$?
  echo "=== $name: exit $rc after $((SECONDS - t0))s ==="
  [ $rc -ne 0 ] && status=1
  return 0
}

step environment 60 bash -c "nvidia-smi -L 2>/dev/null; $PY -c 'import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available())'"
step selftest 150 bash -c "$MS selftest --device $DEVICE 2>&1 | tee $OUT/selftest.txt"
step cache-policy 100 bash -c "$PY benchmarks/cache_policy.py --device $DEVICE --sizes $CACHE_SIZES \
  --repeats 2 --budget-s 0.5 2>&1 | tee $OUT/cache_policy.txt"
step sweep-bf16 150 $MS sweep --device "$DEVICE" --dtype bf16 --soak 10 "${RANGE[@]}" "${NAME[@]}" --quiet -o "$SWEEP" --force
for dt in $DTYPES; do
  step "sweep-$dt" 45 $MS sweep --device "$DEVICE" --dtype "$dt" "${RANGE[@]}" "${NAME[@]}" --quiet -o "$SWEEP" --resume
done
step sweep-bf16-compile 90 $MS sweep --device "$DEVICE" --dtype bf16 --mode compile "${RANGE[@]}" "${NAME[@]}" \
  --quiet -o "$SWEEP" --resume
step ceilings 45 $MS ceilings --device "$DEVICE" --into "$SWEEP"
step validate 30 $MS validate "$SWEEP"
step summary 30 bash -c "$MS export $SWEEP --format markdown -o $OUT/records.md && $MS fit $SWEEP"
exit $status
