#!/usr/bin/env bash
# The one prepared script for a lent GPU (issue 46): one call of the device tool, everything back in <= 8 files.
#
# A lent machine gives a check about 15 minutes (starts included), one call at most 10, and hands back at most 8
# files from $OUT; it starts bare every time. So the whole check has a budget of at most 450 s (a second try fits),
# cheap hardware checks run first and long sweeps last, each step is capped at min(its budget, time left) and
# stopped with SIGINT (a sweep saves what it has), and everything it writes goes into one tarball:
#
#   $OUT/results.tar.gz   every step's files (sweeps, detect.json, selftest.txt, ...), journals included
#   $OUT/summary.json     each step (passed / failed / skipped and why, exit code, seconds, cap) and every
#                         result file's record statuses
#   $OUT/log.txt          the whole log
#
# It ends with `mfu-sweep validate` on every result file and a count of record statuses per file. It exits 0
# when every step that ran passed its criteria (a skip is listed with its reason, never a failure; a sweep
# passes with at least one ok record, even when its cap stopped it, and fails when every record is error,
# mismatch, oom or timeout), and non-zero naming the failing steps.
#
#   bash benchmarks/gpu_check.sh --plan     each step, its budget and files; total budget and files returned
#   bash benchmarks/gpu_check.sh            the check ($OUT, default /tmp/gpu-check)
#
# With the device tool, after `make gpu-wheels` here (orjson and jsonschema-rs for cp312, which the image lacks):
#   run(command="bash benchmarks/gpu_check.sh", carry=[".whl"], timeout_s=540)
#
# --soak runs once for the whole check (the short sweep's; the sweep soaks once per run, not per worker), and
# operands are drawn on the GPU. A CPU dry run (tests/test_gpu_check.py) sets DEVICE=cpu and shrinks every knob.
set -uo pipefail

DEVICE=${DEVICE:-cuda}
DEADLINE=${DEADLINE:-450}               # seconds for the whole check
SCALE=${SCALE:-1}                       # every budget and the deadline times this (a CPU dry run on a loaded VM)
SOAK=${SOAK:-10}                        # seconds of large-GEMM warm-up, once, before the first sweep
SELFTEST_TOL=${SELFTEST_TOL:-0.2}       # selftest --rel-tol
BUDGET_S=${BUDGET_S:-}                  # empty: each sweep's own budget per shape; a CPU dry run: 0.05
MAX_FLOP=${MAX_FLOP:-}                  # empty: the device's default range (the long bf16 sweep)
SHORT_MAX_FLOP=${SHORT_MAX_FLOP:-1e11}  # the short sweep's range
REPEATS=${REPEATS:-1}                   # passes of the long sweeps
DTYPES_MORE=${DTYPES_MORE:-"--dtype fp16 --dtype fp32 --dtype tf32"}
SHAPES=${SHAPES:-"--shape 1024x1024x1024 --shape 4096x4096x4096 --shape 8192x8192x8192"}
THROTTLE_SHAPES=${THROTTLE_SHAPES:-"--shape 8192x8192x8192"}
MOE_FAMILY=${MOE_FAMILY:-llm:gpt-oss-20b:moe=grouped:routing=skewed}
MOE_ARGS=${MOE_ARGS:-}                  # empty: the grouped expert GEMMs of MOE_FAMILY
STEP_MODEL=${STEP_MODEL:-llm:llama-3-8b:hidden=1024:layers=2}
CEILING_SIZES=${CEILING_SIZES:-}        # empty: ceilings' default sizes
CACHE_SIZES=${CACHE_SIZES:-1024,4096}
PROFILER_SIZE=${PROFILER_SIZE:-1024}
PROFILER_PAIRS=${PROFILER_PAIRS:-3}
ONLY=${ONLY:-}                          # comma-separated step names: run these only (the rest are skipped)
OUT=${OUT:-/tmp/gpu-check}
PY=${PYTHON:-python3}
DT=$([ "$DEVICE" = cpu ] && echo fp32 || echo bf16)

# name|budget s|files (in the tarball)|what
STEP_TABLE="environment|15|-|nvidia-smi, python, torch, CUDA
detect|20|detect.json|specs --detect: what the device and torch build run
selftest|45|selftest.txt|timers vs torch Timer / do_bench, graphs vs events, numerics (fp8 in nt)
sweep-short|30|short.json|a short $DT sweep after the one --soak of the check
layouts|30|layouts.json|nn/nt/tn/tt on SHAPES
fp8|25|fp8.json|fp8 and fp8-rowwise on SHAPES (fast accumulation, the default)
scaled-mx|20|scaled.json|mxfp8, mxfp4, nvfp4 where detect says they run
moe-grouped|30|moe.json|gpt-oss-20b's experts as grouped GEMMs (skewed routing)
throttle|25|throttle.json|--on-throttle discard with energy per GEMM (NVML)
profiler-timer|25|profiler_timer.txt profiler_timer.json|--timer profiler against the default timer
step|45|step.json|one real training step: mfu-sweep steps, eager and compile, cold and warm cache
sweep-bf16|50|sweep.json|the default $DT sweep, REPEATS passes
ceilings|15|sweep.json|measured copy bandwidth and best GEMM, into sweep.json
sweep-more-dtypes|40|dtypes.json|DTYPES_MORE on the default range
cache-policy|20|cache_policy.txt|L2 rotation vs flush on CACHE_SIZES
validate|10|-|mfu-sweep validate on every result file, record statuses per file"
RETURNED="results.tar.gz summary.json log.txt"

plan() {
  local total=0 name cap files what
  printf '%-18s %6s  %-40s %s\n' step budget files what
  while IFS='|' read -r name cap files what; do
    printf '%-18s %5ss  %-40s %s\n' "$name" "$cap" "$files" "$what"
    total=$((total + cap))
  done <<< "$STEP_TABLE"
  echo "returned: $RETURNED (every step's files are in results.tar.gz)"
  echo "total budget: $total s"
  echo "files: $(wc -w <<< "$RETURNED")"
}
if [ "${1:-}" = "--plan" ]; then plan; exit 0; fi

mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-work.XXXXXX")  # outside $OUT: only the 3 files come back
: > "$OUT/steps.tsv"
exec > >(tee "$OUT/log.txt") 2>&1
export PYTHONUNBUFFERED=1
if ! $PY -c "import jsonschema_rs, orjson" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
$PY -c "import jsonschema_rs" 2>/dev/null || echo "WARNING: no jsonschema-rs: validate and --into will fail (make gpu-wheels)"
MS="$PY -m mfu_sweep"
ONE=(--device "$DEVICE" --quiet --repeats 1 --force)
[ -n "$BUDGET_S" ] && ONE+=(--budget-s "$BUDGET_S")

record() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$OUT/steps.tsv"; }

finish() {  # the tarball and the summary, also when the caller's limit stops the check
  trap - EXIT INT TERM
  tar -czf "$OUT/results.tar.gz" -C "$WORK" . 2>/dev/null
  $PY benchmarks/gpu_check_eval.py summary "$OUT/steps.tsv" "$WORK" > "$OUT/summary.json"
  local rc=$?
  rm -rf "$OUT/steps.tsv" "$WORK"
  if [ $rc -eq 0 ]; then
    echo "=== done after ${SECONDS}s: every step that ran passed ==="
  else
    echo "=== done after ${SECONDS}s: FAILED: $($PY -c "import json,sys; print(', '.join(json.load(open(sys.argv[1]))['failed']))" "$OUT/summary.json") ==="
  fi
  exec >&- 2>&-
  wait
  exit $rc
}
trap finish EXIT
trap 'exit 130' INT TERM

why_not() {  # why_not dtype NAME... | why_not throttle: why detect.json says this device cannot, empty when it can
  $PY - "$WORK/detect.json" "$@" <<'PYEOF'
import json, sys
try:
    found = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    print(f"device detection failed ({exc.__class__.__name__}); see the detect step")
    raise SystemExit(0)
if sys.argv[2] == "dtype":
    refused = found.get("unsupported", {}).get("eager", {})
    reasons = [refused[d] for d in sys.argv[3:] if d in refused]
    print("; ".join(reasons) if len(reasons) == len(sys.argv[3:]) else "")
else:
    telemetry = found["device"].get("telemetry")
    print("" if telemetry == "nvml" else f"needs NVML throttle readings (this device's telemetry: {telemetry or 'none'})")
PYEOF
}

supported() {  # supported DTYPE...: the --dtype options of those detect.json does not refuse
  $PY - "$WORK/detect.json" "$@" <<'PYEOF'
import json, sys
refused = json.load(open(sys.argv[1])).get("unsupported", {}).get("eager", {})
print(" ".join(f"--dtype {d}" for d in sys.argv[2:] if d not in refused))
PYEOF
}

cap_of() { awk -F'|' -v n="$1" -v k="$SCALE" '$1 == n {print $2 * k}' <<< "$STEP_TABLE"; }
DEADLINE=$((DEADLINE * SCALE))

skip() {  # skip NAME REASON
  echo "=== $1: skipped: $2 ==="
  record "$1" skipped "" 0 "$(cap_of "$1")" "$2"
}

step() {  # step NAME KIND CMD...: KIND sweep:FILE (judged by its records) or cmd (by its exit code)
  local name=$1 kind=$2 cap left t0 rc verdict status reason=""
  shift 2
  if [ -n "$ONLY" ] && [[ ",$ONLY," != *",$name,"* ]]; then skip "$name" "not in ONLY=$ONLY"; return 0; fi
  cap=$(cap_of "$name")
  left=$((DEADLINE - SECONDS))
  [ "$cap" -gt "$left" ] && cap=$left
  if [ "$cap" -lt 3 ]; then skip "$name" "${left}s left of the ${DEADLINE}s budget"; return 0; fi
  echo "=== $name (cap ${cap}s, $((DEADLINE - SECONDS))s left) ==="
  t0=$SECONDS
  timeout -s INT -k 10 "$cap" "$@"
  rc=$?
  status=passed
  if [ "${kind%%:*}" = sweep ]; then
    verdict=$($PY benchmarks/gpu_check_eval.py sweep "$WORK/${kind#sweep:}")
    case $? in
      0) reason="$verdict" ;;
      3) status=skipped; reason="$verdict" ;;
      *) status=failed; reason="$verdict" ;;
    esac
    [ $rc -eq 124 ] && reason="capped at ${cap}s; $reason"
  elif [ $rc -ne 0 ]; then
    status=failed; reason="exit $rc"
  fi
  echo "=== $name: $status after $((SECONDS - t0))s (exit $rc) ${reason:+: $reason} ==="
  record "$name" "$status" "$rc" "$((SECONDS - t0))" "$cap" "$reason"
  return 0
}

maybe() {  # maybe NAME REASON KIND CMD...: the step, or a skip naming why this device cannot run it
  local name=$1 reason=$2
  shift 2
  if [ -n "$reason" ]; then skip "$name" "not run here: $reason"; return 0; fi
  step "$name" "$@"
}

step environment cmd bash -c "nvidia-smi -L 2>/dev/null; $PY -c 'import sys, torch; \
print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available())'"
step detect cmd bash -o pipefail -c "$MS specs --detect --device $DEVICE --json > $WORK/detect.json"
step selftest cmd bash -o pipefail -c "$MS selftest --device $DEVICE --rel-tol $SELFTEST_TOL 2>&1 | tee $WORK/selftest.txt"
# shellcheck disable=SC2086  # SHAPES, THROTTLE_SHAPES, MOE_ARGS and DTYPES_MORE are lists of options
step sweep-short sweep:short.json $MS sweep "${ONE[@]}" --dtype "$DT" --max-flop "$SHORT_MAX_FLOP" --soak "$SOAK" \
  -o "$WORK/short.json"
# shellcheck disable=SC2086
step layouts sweep:layouts.json $MS sweep "${ONE[@]}" --dtype "$DT" --layout nn,nt,tn,tt $SHAPES -o "$WORK/layouts.json"
# shellcheck disable=SC2086
maybe fp8 "$(why_not dtype fp8 fp8-rowwise)" sweep:fp8.json $MS sweep "${ONE[@]}" \
  $(supported fp8 fp8-rowwise 2>/dev/null) $SHAPES -o "$WORK/fp8.json"
# shellcheck disable=SC2086
maybe scaled-mx "$(why_not dtype mxfp8 mxfp4 nvfp4)" sweep:scaled.json $MS sweep "${ONE[@]}" \
  $(supported mxfp8 mxfp4 nvfp4 2>/dev/null) $SHAPES -o "$WORK/scaled.json"
if [ -z "$MOE_ARGS" ]; then  # the family's grouped rows only (its attention and dense GEMMs are swept elsewhere)
  $MS shapes "$MOE_FAMILY" --csv | $PY -c "import csv, sys
rows = [r for r in csv.DictReader(l for l in sys.stdin if not l.startswith('#')) if r['groups']]
out = csv.DictWriter(sys.stdout, ['batch', 'm', 'n', 'k', 'layout', 'groups', 'family'], extrasaction='ignore')
out.writeheader()
out.writerows(rows)" > "$WORK/moe.csv" && [ "$(wc -l < "$WORK/moe.csv")" -gt 1 ] && MOE_ARGS="--shape-file $WORK/moe.csv"
fi
# shellcheck disable=SC2086
maybe moe-grouped "$([ -z "$MOE_ARGS" ] && echo "no grouped shapes from MOE_FAMILY=$MOE_FAMILY")" sweep:moe.json \
  $MS sweep "${ONE[@]}" --dtype "$DT" $MOE_ARGS -o "$WORK/moe.json"
# shellcheck disable=SC2086
maybe throttle "$(why_not throttle)" sweep:throttle.json $MS sweep "${ONE[@]}" --dtype "$DT" --on-throttle discard \
  $THROTTLE_SHAPES -o "$WORK/throttle.json"
step profiler-timer cmd bash -o pipefail -c "$PY benchmarks/profiler_timer.py --device $DEVICE --size $PROFILER_SIZE \
  --pairs $PROFILER_PAIRS --budget-s ${BUDGET_S:-0.5} --json $WORK/profiler_timer.json 2>&1 \
  | grep -v '^USDT:' | tee $WORK/profiler_timer.txt"
maybe step "$($MS steps --help >/dev/null 2>&1 || echo "this checkout has no mfu-sweep steps command (issue 45)")" \
  cmd $MS steps --device "$DEVICE" --model "$STEP_MODEL" --kind train --mode eager --mode compile --cache cold \
  --cache warm --repeats 1 --timeout 120 -o "$WORK/step.json"
LONG=(--device "$DEVICE" --quiet --repeats "$REPEATS" --force)
[ -n "$BUDGET_S" ] && LONG+=(--budget-s "$BUDGET_S")
[ -n "$MAX_FLOP" ] && LONG+=(--max-flop "$MAX_FLOP")
step sweep-bf16 sweep:sweep.json $MS sweep "${LONG[@]}" --dtype "$DT" -o "$WORK/sweep.json"
CEILINGS=(--device "$DEVICE" --into "$WORK/sweep.json")
[ -n "$BUDGET_S" ] && CEILINGS+=(--budget-s "$BUDGET_S")
for size in ${CEILING_SIZES//,/ }; do CEILINGS+=(--size "$size"); done
step ceilings cmd $MS ceilings "${CEILINGS[@]}"
# shellcheck disable=SC2086
step sweep-more-dtypes sweep:dtypes.json $MS sweep "${LONG[@]}" $DTYPES_MORE -o "$WORK/dtypes.json"
step cache-policy cmd bash -o pipefail -c "$PY benchmarks/cache_policy.py --device $DEVICE --sizes $CACHE_SIZES \
  --repeats 1 --budget-s ${BUDGET_S:-0.5} 2>&1 | tee $WORK/cache_policy.txt"
step validate cmd bash -c "ls $WORK/*.json | grep -v -e detect.json -e profiler_timer.json | xargs $MS validate \
  && $PY -c \"
import sys; sys.path.insert(0, 'benchmarks')
from gpu_check_eval import statuses
from pathlib import Path
for p in sorted(Path('$WORK').glob('*.json')):
    if p.name in ('detect.json', 'profiler_timer.json'):
        continue
    print(p.name, ' '.join(f'{k}={v}' for k, v in sorted(statuses(p).items())))
\""
