#!/usr/bin/env bash
# Issue 33's GPU run, on one bare H200 (torch and most packages there, no internet), in under 7 minutes.
#
# Run from the repository root, with the wheels the machine lacks (versions of requirements.lock:
# gguf zstandard cryptography cffi pycparser crc32c starlette redis transformers) in .whl/:
#     bash bench/gpu_run.sh
# Results go to $OUT (default bench/results/gpu-run/):
#   gpu.md, gpu.json            grm bench gpu --device cuda: 8k and 32k tokens on random:llama-3-8b bf16 (cold;
#                               warm from the store in a new process; warm from the host tier, a runtime's
#                               ask and a server request; logits; re-seat parity; the time split)
#   reseat-cuda.md, .json       re-seat parity by probe length in bf16 on random:llama-3-8b, qwen3-4b, gemma-3-4b
#   pytest-gpu.log              pytest -m gpu (tests/kv: placement, mounts, host tier, the quick gate on the GPU)
#   run.log                     versions, the steps' output and their exit codes
# Each step gets what is left of a 400-second budget (at most its own cap), in order of importance.
# A dry run on a CPU (no wheels needed, the checkout's environment): DEVICE=cpu QUICK=1 PYTHON=.venv/bin/python
# bash bench/gpu_run.sh (the same steps on @small models; results named gpu-cpu-quick.*, reseat-quick.*).
set -u
OUT=${OUT:-bench/results/gpu-run}
DEVICE=${DEVICE:-cuda}
PYTHON=${PYTHON:-python3}
QUICK=${QUICK:-}
mkdir -p "$OUT"
START=$(date +%s)
BUDGET=400
log() { echo "[gpu_run +$(( $(date +%s) - START ))s] $*" | tee -a "$OUT/run.log"; }
left() { local l=$(( BUDGET - ($(date +%s) - START) )); (( l > $1 )) && l=$1; (( l < 1 )) && l=1; echo "$l"; }

if compgen -G ".whl/*.whl" >/dev/null; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl >>"$OUT/run.log" 2>&1 || { log "installing the carried wheels failed"; exit 1; }
fi
export PYTHONPATH="$PWD:/tmp/site" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 \
       GRM_CACHE=${GRM_CACHE:-/tmp/grm-cache} GRM_HOME=${GRM_HOME:-/tmp/grm-home}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$OUT/run.log" 2>&1
"$PYTHON" -c "import os, torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__,
'cuda', torch.cuda.is_available(), 'cores', os.cpu_count())" 2>&1 | tee -a "$OUT/run.log"
THREADS=$(nproc)
if [[ -n "$QUICK" ]]; then Q=--quick; SUFFIX=-quick; else Q=; SUFFIX=; fi
GPU_NAME=$([[ "$DEVICE" == cuda* ]] && echo gpu || echo "gpu-$DEVICE")$SUFFIX
RESEAT_NAME=reseat$([[ "$DEVICE" == cuda* ]] && echo -cuda)$SUFFIX

log "grm bench gpu --device $DEVICE --threads $THREADS $Q"
timeout "$(left 280)" "$PYTHON" -m grm bench gpu --device "$DEVICE" --threads "$THREADS" $Q >>"$OUT/run.log" 2>&1
log "gpu bench exit $?"
cp "bench/results/$GPU_NAME.md" "bench/results/$GPU_NAME.json" "$OUT"/ 2>>"$OUT/run.log"

log "grm bench reseat --device $DEVICE $Q"
timeout "$(left 90)" "$PYTHON" -m grm bench reseat --device "$DEVICE" $Q >>"$OUT/run.log" 2>&1
log "reseat bench exit $?"
cp "bench/results/$RESEAT_NAME.md" "bench/results/$RESEAT_NAME.json" "$OUT"/ 2>>"$OUT/run.log"

log "pytest -m gpu"
timeout "$(left 120)" "$PYTHON" -m pytest -m gpu -q -p no:cacheprovider -o addopts="-ra" tests/kv \
    >"$OUT/pytest-gpu.log" 2>&1
log "pytest exit $?"
log "done"
