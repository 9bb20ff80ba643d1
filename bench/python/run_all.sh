#!/usr/bin/env bash
# The framework benchmarks of issue 13 on the GPU machine, in one go; output under $OUT.
#
#   OUT=/path UMA_BUNDLE=.gpu bash bench/python/run_all.sh [torch_step] [torch_alloc] [cupy] [big]
#                                                          [offload_smoke] [offload]
#
# Libraries: UMA_BUNDLE (a ../shared/tools/gpu-bundle folder: the three .so in bin/, their
# dependencies in lib/), or UMA_BENCH_LIB_DIR holding libuma_c.so, libuma_naive_managed.so and
# libuma_naive_cache.so (or UMA_LIBRARY, UMA_NAIVE_MANAGED_LIBRARY, UMA_NAIVE_CACHE_LIBRARY one
# by one). Parts (default: tests torch_step torch_alloc cupy; "big" adds the 24 x 1024 model):
#   tests        tests/python/gpu_frameworks.py: uma_torch and uma_cupy on the GPU (~30 s);
#                tests/python/gpu_torch_parity.py: pools, memory tools, graphs, spill (~2.5 min)
#   torch_step   PyTorch GPT-2 step: native, naive_managed, naive_cache, uma   (~2-3 min)
#   torch_alloc  64 KiB torch.empty + del from Python: native, uma, baselines  (~1 min)
#   cupy         CuPy workload: CuPy's pool vs uma                             (~1 min)
#   offload_smoke  offload_bench.py --smoke: a tiny model, 2 steps, every row   (~1 min)
#   offload      uma_torch.offload at 2x and 3x the budget against native and a pinned-host
#                offload, GPT-2 24 x 1024, 3 interleaved rounds (issue 25)      (~5 min)
#   pool         a training step with the model's state in a uma_torch.pool against PyTorch's
#                own memory, GPT-2 24 x 1024, 5 interleaved rounds (issue 36)  (~1 min)
#   spill        spill instead of OOM under a memory fraction: PyTorch's allocator and uma's
#                install at 3 fractions, a 24 x 4096 linear stack (issue 36)    (~2 min)
#   infer        uma_torch.offload for inference (a Llama-shaped 8 GiB model) at 1x, 2x, 3x
#                against native and accelerate's dispatch_model (issue 39)     (~3 min)
#   arbiter      one GPU, many processes under one uma serve's arbiter (issue 37):
#                tests/python/gpu_arbiter.py, then arbiter_bench.py (UMA_BIN: the uma
#                executable; default: $UMA_BUNDLE/bin/uma)                     (~7 min)
#   big          torch_step with 24 layers x 1024                              (~3 min)
#                (more memory: naive_cache's power-of-two bins may pass ../shared/GPU.md's
#                16 GiB total; run it only where the issue's larger figure is wanted)
#   dry          every script with --dry-run (no GPU, no torch: the plumbing)
# Extra arguments for every script: UMA_BENCH_ARGS (e.g. "--uma-option quota_bytes=34359738368").
# Each part writes $OUT/<part>.txt and $OUT/<part>.json; exit status 1 if any part failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${OUT:?set OUT to the folder for the results}"
mkdir -p "$OUT"
if [ -n "${UMA_BUNDLE:-}" ]; then
  bundle=$(cd "$UMA_BUNDLE" && pwd)
  export UMA_BENCH_LIB_DIR="$bundle/bin"
  export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# Nothing is downloaded on the GPU machine: models come from configs.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
read -r -a extra <<<"${UMA_BENCH_ARGS:-}"
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(tests torch_step torch_alloc cupy)

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader \
    || echo "nvidia-smi: unavailable"
  python3 -c 'import sys; sys.path.insert(0, "'"$here"'"); import common, json; print(json.dumps(common.environment_report()))'
  for key in UMA_BENCH_LIB_DIR UMA_LIBRARY UMA_NAIVE_MANAGED_LIBRARY UMA_NAIVE_CACHE_LIBRARY; do
    echo "$key=${!key:-}"
  done
} >"$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"

rc=0
run() {  # run PART SCRIPT ARGS...
  local part=$1 script=$2
  shift 2
  echo "=== $part: $script $*"
  python3 "$here/$script" --json "$OUT/$part.json" "$@" "${extra[@]}" 2>&1 | tee "$OUT/$part.txt"
  local status=${PIPESTATUS[0]}
  [ "$status" -eq 0 ] || { echo "=== $part FAILED (exit $status)"; rc=1; }
}
for part in "${parts[@]}"; do
  case $part in
    tests)
      echo "=== tests: tests/python/gpu_frameworks.py"
      UMA_LIBRARY="${UMA_LIBRARY:-$UMA_BENCH_LIB_DIR/libuma_c.so}" \
        python3 "$here/../../tests/python/gpu_frameworks.py" -v 2>&1 | tee "$OUT/tests.txt"
      [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "=== tests FAILED"; rc=1; }
      echo "=== tests: tests/python/gpu_torch_parity.py"
      UMA_LIBRARY="${UMA_LIBRARY:-$UMA_BENCH_LIB_DIR/libuma_c.so}" \
        UMA_PARITY_FINDINGS="$OUT/parity.jsonl" \
        python3 "$here/../../tests/python/gpu_torch_parity.py" -v 2>&1 | tee "$OUT/parity.txt"
      [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "=== tests (parity) FAILED"; rc=1; }
      ;;
    torch_step) run torch_step torch_step.py ;;
    torch_alloc) run torch_alloc torch_alloc.py ;;
    cupy) run cupy cupy_workload.py ;;
    big) run torch_step_big torch_step.py --layers 24 --width 1024 --heads 16 --steps 10 ;;
    offload_smoke) run offload_smoke offload_bench.py --smoke ;;
    offload) run offload offload_bench.py ;;
    infer) run infer infer_bench.py ;;
    pool) run pool pool_bench.py ;;
    arbiter)
      uma_bin=${UMA_BIN:-${UMA_BUNDLE:+$bundle/bin/uma}}
      echo "=== arbiter: tests/python/gpu_arbiter.py"
      UMA_LIBRARY="${UMA_LIBRARY:-$UMA_BENCH_LIB_DIR/libuma_c.so}" \
        python3 "$here/../../tests/python/gpu_arbiter.py" --uma-bin "$uma_bin" -v 2>&1 \
        | tee "$OUT/arbiter_tests.txt"
      [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "=== arbiter tests FAILED"; rc=1; }
      UMA_LIBRARY="${UMA_LIBRARY:-$UMA_BENCH_LIB_DIR/libuma_c.so}" \
        run arbiter arbiter_bench.py --uma-bin "$uma_bin"
      ;;
    spill) run spill spill_bench.py ;;
    dry)
      run dry_torch_step torch_step.py --dry-run
      run dry_torch_alloc torch_alloc.py --dry-run
      run dry_cupy cupy_workload.py --dry-run
      run dry_offload offload_bench.py --dry-run --repeat 1
      run dry_infer infer_bench.py --dry-run
      [ -z "${UMA_BIN:-}" ] || run dry_arbiter arbiter_bench.py --dry-run --uma-bin "$UMA_BIN" \
        --total-gb 4 --infer-need-gb 1 --train-wanted-gb 1 --ask-more-gb 3 --move-total-gb 3 \
        --move-infer-need-gb 1 --seconds 3 --warm 1
      ;;
    *) echo "run_all.sh: unknown part '$part' (tests torch_step torch_alloc cupy big offload_smoke offload infer pool spill arbiter dry)"; rc=2 ;;
  esac
done
exit $rc
