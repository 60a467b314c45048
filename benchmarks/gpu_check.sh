#!/usr/bin/env bash
# The one prepared script for a session that has a GPU: everything issue #4 still needs from hardware,
# within one overall deadline (DEADLINE, default 480 s), most important first; each step is capped at
# what is left, so a slow step costs the steps after it, never the results before it.
#
#   1. `mfu-sweep selftest` (tool vs torch.utils.benchmark / triton do_bench, graphs vs events, numerics, spec lookup)
#   2. the default sweep: bf16 eager over 1 MFLOP .. 10 TFLOP (3 passes, REPEATS overrides) after a 10 s soak
#   3. `mfu-sweep ceilings --into` the sweep file (measured copy bandwidth and best GEMM)
#   4. fp16, fp32, tf32 and fp8 eager into the same file (--resume)
#   5. issue 41, each step into its own file: the device's detected support (detect.json); operand layouts
#      nn/nt/tn/tt (layouts.json); fp8-rowwise, mxfp8, mxfp4, nvfp4 one sweep each (scaled-<dtype>.json);
#      MoE experts as grouped GEMMs from a skewed routing (moe.json); --on-throttle discard with energy per
#      GEMM (throttle.json); benchmarks/profiler_timer.py, --timer profiler against the default timer
#      (profiler_timer.txt). A step the device or torch build cannot run is named with the reason
#      ("=== NAME: not run here: ... ===") and costs nothing.
#   6. benchmarks/cache_policy.py: L2 rotation vs flush on the same shapes
#   7. bf16 under torch.compile, as far as the deadline allows (--resume finishes it later)
#
# Where: the repository root on the GPU machine. Results go to $OUT (default /tmp/gpu-check): sweep.json,
# selftest.txt, cache_policy.txt and log.txt. Validate, fit and export the sweep afterwards on any machine
# (CPU work, no device time); copy it into sweeps/ and the tables into the issue note. Nothing here edits
# a result by hand.
#
# Dependencies: the GPU image has torch, numpy, scipy, seaborn, click, tqdm, attrs and nvidia-ml-py but not
# jsonschema-rs (the schema validator, needed by --resume and ceilings --into); `make gpu-wheels` (here, with
# PyPI) puts its wheel into .whl/, which this script installs into /tmp/site when it is missing. With the device tool:
#   run(command="bash benchmarks/gpu_check.sh", carry=[".whl"], timeout_s=560)
#
# A dry run on a CPU (small range, same steps, ~2 min; on a loaded CPU the selftest's timer rows may FAIL, status 1):
#   DEVICE=cpu DTYPES_MORE="--dtype fp16" MAX_FLOP=3e7 REPEATS=1 CACHE_SIZES=128,256 PYTHON=.venv/bin/python \
#     SHAPES_41="--shape 64x64x64" MOE_ARGS="--shape 96x32x64:nt:m=32,48,16" PROFILER_SIZE=128 \
#     bash benchmarks/gpu_check.sh
# BUDGET_S and CEILING_SIZES shrink it further (tests/test_gpu_check.py: every step, well under a minute); a GPU
# run leaves them empty.
set -uo pipefail

DEVICE=${DEVICE:-cuda}
DTYPES_MORE=${DTYPES_MORE:-"--dtype fp16 --dtype fp32 --dtype tf32 --dtype fp8"}
MAX_FLOP=${MAX_FLOP:-}                  # empty: the device's default range
REPEATS=${REPEATS:-}                    # empty: the device's default number of passes (sweep --repeats)
CACHE_SIZES=${CACHE_SIZES:-256,1024,4096,8192}
LABEL=${LABEL:-}                        # empty: the default label (chip-backend)
DEADLINE=${DEADLINE:-480}               # seconds for the whole script
SOAK=${SOAK:-10}                        # seconds of large-GEMM warm-up before the first sweep
SELFTEST_TOL=${SELFTEST_TOL:-0.2}       # selftest --rel-tol: tool vs torch Timer / do_bench
BUDGET_S=${BUDGET_S:-}                  # empty: each step's own budget per shape (sweep/ceilings --budget-s; 0.5 s
                                        # for cache-policy); a CPU dry run: 0.05
CEILING_SIZES=${CEILING_SIZES:-}        # empty: ceilings' default sizes; a CPU dry run: e.g. 256 (ceilings --size)
# issue 41's steps: the shapes of the layout and scaled sweeps; the MoE step's shapes (default: gpt-oss-20b's
# experts as grouped GEMMs under skewed routing, from `mfu-sweep shapes`); the throttle step's shapes; the profiler
# benchmark's square size and pairs (the goal is stated at 1024^3)
SHAPES_41=${SHAPES_41:-"--shape 1024x1024x1024 --shape 4096x4096x4096 --shape 8192x8192x8192"}
MOE_FAMILY=${MOE_FAMILY:-llm:gpt-oss-20b:moe=grouped:routing=skewed}
MOE_ARGS=${MOE_ARGS:-}                  # empty: the grouped expert GEMMs of MOE_FAMILY, as a shape file
THROTTLE_SHAPES=${THROTTLE_SHAPES:-"--shape 8192x8192x8192 --shape 16384x16384x16384"}
PROFILER_SIZE=${PROFILER_SIZE:-1024}
PROFILER_PAIRS=${PROFILER_PAIRS:-5}
OUT=${OUT:-/tmp/gpu-check}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1  # the whole log comes back with $OUT, whatever the caller keeps
export PYTHONUNBUFFERED=1

if ! $PY -c "import jsonschema_rs" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
$PY -c "import jsonschema_rs" 2>/dev/null || echo "WARNING: no jsonschema-rs: --resume and ceilings --into will fail (make gpu-wheels)"
MS="$PY -m mfu_sweep"
COMMON=(--device "$DEVICE" --quiet -o "$OUT/sweep.json")
[ -n "$MAX_FLOP" ] && COMMON+=(--max-flop "$MAX_FLOP")
[ -n "$REPEATS" ] && COMMON+=(--repeats "$REPEATS")
[ -n "$LABEL" ] && COMMON+=(--label "$LABEL")
[ -n "$BUDGET_S" ] && COMMON+=(--budget-s "$BUDGET_S")
CEILINGS=(--device "$DEVICE" --into "$OUT/sweep.json")
[ -n "$BUDGET_S" ] && CEILINGS+=(--budget-s "$BUDGET_S")
for size in ${CEILING_SIZES//,/ }; do CEILINGS+=(--size "$size"); done
status=0

why_not() {  # why_not dtype NAME | why_not throttle: why detect.json says this device cannot, empty when it can
  $PY - "$OUT/detect.json" "$@" <<'PYEOF'
import json, sys
try:
    found = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    print(f"device detection failed ({exc.__class__.__name__}); see the detect step")
    raise SystemExit(0)
if sys.argv[2] == "dtype":
    print(found.get("unsupported", {}).get("eager", {}).get(sys.argv[3], ""))
else:
    telemetry = found["device"].get("telemetry")
    print("" if telemetry == "nvml" else f"needs NVML throttle readings (this device's telemetry: {telemetry or 'none'})")
PYEOF
}

maybe() {  # maybe NAME CAP REASON CMD...: the step, or one line naming why this device cannot run it
  local name=$1 cap=$2 reason=$3
  shift 3
  if [ -n "$reason" ]; then
    echo "=== $name: not run here: $reason ==="
    return 0
  fi
  step "$name" "$cap" "$@"
}

step() {  # step NAME CAP CMD...: run under min(CAP, time left); SIGINT first, so a sweep saves and says how to resume
  local name=$1 cap=$2 left=$((DEADLINE - SECONDS))
  shift 2
  [ "$cap" -gt "$left" ] && cap=$left
  if [ "$cap" -lt 10 ]; then
    echo "=== $name: skipped, ${left}s left of the ${DEADLINE}s deadline ==="
    status=1
    return 0
  fi
  echo "=== $name (cap ${cap}s, $((DEADLINE - SECONDS))s left) ==="
  local t0=$SECONDS
  timeout -s INT -k 15 "$cap" "$@"
  local rc=$?
  echo "=== $name: exit $rc after $((SECONDS - t0))s ==="
  [ $rc -ne 0 ] && status=1
  return 0
}

step environment 30 bash -c "nvidia-smi -L 2>/dev/null; $PY -c 'import sys, torch; \
print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available())'"
step selftest 120 bash -o pipefail -c "$MS selftest --device $DEVICE --rel-tol $SELFTEST_TOL 2>&1 | tee $OUT/selftest.txt"
step sweep-bf16 150 $MS sweep "${COMMON[@]}" --dtype bf16 --soak "$SOAK" --force
step ceilings 60 $MS ceilings "${CEILINGS[@]}"
# shellcheck disable=SC2086  # DTYPES_MORE is a list of options
step sweep-more-dtypes 120 $MS sweep "${COMMON[@]}" $DTYPES_MORE --resume
# issue 41: layouts, scaled dtypes, grouped MoE GEMMs, throttle discard with energy, the profiler timer
ONE=(--device "$DEVICE" --quiet --repeats 1 --force)
[ -n "$BUDGET_S" ] && ONE+=(--budget-s "$BUDGET_S")
step detect 60 bash -o pipefail -c "$MS specs --detect --device $DEVICE --json > $OUT/detect.json"
# shellcheck disable=SC2086  # SHAPES_41, THROTTLE_SHAPES and MOE_ARGS are lists of options
step layouts 90 $MS sweep "${ONE[@]}" --dtype "$([ "$DEVICE" = cpu ] && echo fp32 || echo bf16)" \
  --layout nn,nt,tn,tt $SHAPES_41 -o "$OUT/layouts.json"
for dt in fp8-rowwise mxfp8 mxfp4 nvfp4; do
  # shellcheck disable=SC2086
  maybe "scaled-$dt" 45 "$(why_not dtype "$dt")" $MS sweep "${ONE[@]}" --dtype "$dt" $SHAPES_41 \
    -o "$OUT/scaled-$dt.json"
done
if [ -z "$MOE_ARGS" ]; then  # the family's grouped rows only (its attention and dense GEMMs are swept elsewhere)
  $MS shapes "$MOE_FAMILY" --csv | $PY -c "import csv, sys
rows = [r for r in csv.DictReader(l for l in sys.stdin if not l.startswith('#')) if r['groups']]
out = csv.DictWriter(sys.stdout, ['batch', 'm', 'n', 'k', 'layout', 'groups', 'family'], extrasaction='ignore')
out.writeheader()
out.writerows(rows)" > "$OUT/moe.csv" && [ "$(wc -l < "$OUT/moe.csv")" -gt 1 ] && MOE_ARGS="--shape-file $OUT/moe.csv"
fi
# shellcheck disable=SC2086
maybe moe-grouped 90 "$([ -z "$MOE_ARGS" ] && echo "no grouped shapes from MOE_FAMILY=$MOE_FAMILY")" $MS sweep \
  "${ONE[@]}" --dtype "$([ "$DEVICE" = cpu ] && echo fp32 || echo bf16)" $MOE_ARGS -o "$OUT/moe.json"
# shellcheck disable=SC2086
maybe throttle-discard 60 "$(why_not throttle)" $MS sweep "${ONE[@]}" --dtype bf16 --on-throttle discard \
  $THROTTLE_SHAPES -o "$OUT/throttle.json"
step profiler-timer 120 bash -o pipefail -c "$PY benchmarks/profiler_timer.py --device $DEVICE --size $PROFILER_SIZE \
  --pairs $PROFILER_PAIRS --budget-s ${BUDGET_S:-1} --json $OUT/profiler_timer.json 2>&1 \
  | grep -v '^USDT:' | tee $OUT/profiler_timer.txt"
step cache-policy 60 bash -o pipefail -c "$PY benchmarks/cache_policy.py --device $DEVICE --sizes $CACHE_SIZES \
  --repeats 1 --budget-s ${BUDGET_S:-0.5} 2>&1 | tee $OUT/cache_policy.txt"
step sweep-bf16-compile 600 $MS sweep "${COMMON[@]}" --dtype bf16 --mode compile --resume
echo "=== done after ${SECONDS}s, status $status ==="
exec >&- 2>&-
wait
exit $status
