#!/usr/bin/env bash
# The GPU checks, in one bounded run on a machine with a CUDA device (CI has none):
#   1. the CUDA tests (penalties, Triton kernel and its gradients, trainers on cuda);
#   2. bench_penalty's CUDA rows (benchmarks/standing/penalty.py --cuda-only: into the existing table), after
#      the backward's sweep by parts and tiles (benchmarks/investigations/triton_backward_sweep.py --library-only; with
#      BEFORE=<an earlier kernels_triton.py> that file's backward is timed in the same run);
#   3. one training through torchrun on the NCCL backend (workflow/scripts/train_parallel.py);
#   4. notebooks (default 03-05: Table 2 and what reads its models) on the full preset, every model
#      trained here, on the GPU (device="auto"), through the workflow: rule bench_reproduce_cuda.
# Each step has its own time limit and the run goes on past a failed step; logs and the reports
# land in $RESULTS (default runs/gpu_check), packed after every step into $PACK (default
# $RESULTS.tar.gz). PRESET=small runs the notebooks on their small preset (a dry run of this script);
# STEPS="tests bench_penalty" runs those steps alone; GPU_NOTEBOOKS="notebooks/02_*.ipynb ..." other notebooks
# (not yet run on a GPU: 02 and 06-09; 06-09 need gensim, 02 SNLI and SICK).
#
# The nccl and notebooks steps read WordNet 3.0 and Fashion-MNIST under the data root (`make data`
# puts them there). On a copy of the tree whose .git lags behind it (or has none), set
# ORDERLIB_GIT_COMMIT=<the commit> so that the reports name the code that ran.
#
#     ORDERLIB_DATA=<data root> bash benchmarks/standing/gpu_check.sh [python]
set -u
PY=${1:-python3}
RESULTS=${RESULTS:-runs/gpu_check}
PACK=${PACK:-$RESULTS.tar.gz}
mkdir -p "$RESULTS"
export PYTHONUNBUFFERED=1

STEPS=${STEPS:-tests sweep bench_penalty nccl notebooks}

step() {  # step NAME SECONDS COMMAND...: run it with a limit, log it, say how it ended
    local name=$1 limit=$2 t0=$SECONDS rc
    shift 2
    [[ " $STEPS " == *" $name "* ]] || return 0
    echo "=== $name (limit ${limit}s)"
    timeout "$limit" "$@" >"$RESULTS/$name.log" 2>&1
    rc=$?
    echo "=== $name: rc $rc after $((SECONDS - t0)) s"
    tail -n 25 "$RESULTS/$name.log"
    cp reports/tables/bench_penalty.* reports/tables/bench_reproduce_cuda.* reports/tables/oe_table2_retrieval.* \
        reports/tables/oe_sec46_detail.* reports/tables/oe_fig4_regularities.* "$RESULTS"/ 2>/dev/null
    tar czf "$PACK" -C "$RESULTS" .
}

nvidia-smi -L
"$PY" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__,
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device")'

step tests 150 "$PY" -m pytest -q -p no:cacheprovider tests/test_devices.py tests/test_concepts_later.py \
    tests/test_fused.py -k "cuda or triton"
step sweep 200 "$PY" benchmarks/investigations/triton_backward_sweep.py --library-only ${BEFORE:+--before "$BEFORE"} \
    --configs "${SWEEP_CONFIGS:-64x64w2s3u8,32x64w1s4u8,8x256w1s3u8,8x256w1s3u4,16x128w1s3u8}"
step bench_penalty 90 "$PY" benchmarks/standing/penalty.py --cuda-only
step nccl 150 "$PY" -m torch.distributed.run --standalone --nproc_per_node=1 workflow/scripts/train_parallel.py \
    retrieval --preset small --device cuda
GPU_NOTEBOOKS=${GPU_NOTEBOOKS:-notebooks/03_oe_table2_retrieval.ipynb notebooks/04_oe_sec46_detail.ipynb notebooks/05_oe_fig4_regularities.ipynb}
STEMS=$(for nb in $GPU_NOTEBOOKS; do basename "$nb" .ipynb; done)
# shellcheck disable=SC2086  # STEMS is a list
step notebooks "${NOTEBOOK_LIMIT:-300}" "$(dirname "$PY")/snakemake" --snakefile workflow/Snakefile --cores all \
    bench_reproduce_cuda --config preset="${PRESET:-full}" "gpu_notebooks=[$(echo $STEMS | tr ' ' ,)]" --forcerun $STEMS
echo "packed $PACK"
