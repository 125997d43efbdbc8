#!/bin/bash
# Issue 33's acceptance runs, one device call on four GPUs: each model compiled by `inductor-lens compile` with
# nothing cached (fresh Inductor, Triton and inductor-lens caches: the shipped tuning table is the only tuning
# it has), one model per GPU, in parallel; every terminal line stamped with the seconds since the command
# started, so the model process's end, the first report and the hand-written side's end can be read off; then
# the hand-written kernels against Inductor's (benchmarks/handwritten_coverage.py --reports) and, on GPU 0,
# matmul_bias against cuBLAS with the table, and on GPU 2 tests/gpu/test_tuning_gpu.py. What comes back is
# $OUT/first-report.tgz.
# Usage: benchmarks/first_report_gpu.sh                  the four in parallel, one per GPU (a 4-GPU machine)
#        benchmarks/first_report_gpu.sh --alone CASE...  the named cases (gpt2 vit llama resnet50) one after another
#                                                        on GPU 0, each alone on the host (no other model's compile
#                                                        or helpers sharing its CPUs while its kernels are timed);
#                                                        then matmul_bias against cuBLAS (MATMUL_BIAS=0: not) and
#                                                        tests/gpu/test_tuning_gpu.py (GPU_TESTS=1)
export PYTHONPATH=$PWD:$PWD/benchmarks/models
W=/tmp/fr
rm -rf $W && mkdir -p $W
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $W/versions.txt
python3 -c "import torch, triton, transformers, timm, torchvision, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__, 'timm', timm.__version__, 'torchvision', torchvision.__version__, 'python', sys.version.split()[0])" >> $W/versions.txt
stamp='import sys, time
start = time.time()
for line in sys.stdin:
    print(f"{time.time() - start:7.1f} {line}", end="", flush=True)'
run_case() {
  local i=$1 name=$2; shift 2
  export CUDA_VISIBLE_DEVICES=$(( i == 9 ? 0 : i )) INDUCTOR_LENS_CACHE_DIR=$W/$name/lens TRITON_CACHE_DIR=$W/$name/triton
  export TORCHINDUCTOR_CACHE_DIR=$W/$name/inductor
  python3 -m inductor_lens compile "$@" --device cuda --timeout 480 --out $W/$name/report 2>&1 | python3 -c "$stamp" > $W/$name.log
  echo "exit ${PIPESTATUS[0]}" >> $W/$name.log
  python3 benchmarks/handwritten_coverage.py --out $W/cov --results $W/$name-kernels.md --reports $W/$name/report > $W/$name-kernels.log 2>&1
  if [ $i = 0 ]; then
    timeout 120 python3 benchmarks/matmul_bias_vs_cublas.py --rounds 5 --results $W/matmul-bias-table.md > $W/matmul-bias-table.log 2>&1
  fi
  if [ $i = 2 ]; then
    timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_tuning_gpu.py > $W/gpu-tests.log 2>&1
  fi
}
declare -A CASES=(
  [gpt2]="benchmarks/models/h100_gpt2.py"
  [vit]="samples/real/timm_vit.py --mode reduce-overhead"
  [llama]="benchmarks/models/h100_llama.py --dtype bf16 --mode max-autotune-no-cudagraphs"
  [resnet50]="samples/real/torchvision_resnet50.py --train"
)
if [ "$1" = "--alone" ]; then
  shift
  for name in "$@"; do
    # GPU 0 for every case; the extra steps of GPUs 0 and 2 (matmul_bias, the GPU tests) after the last one
    run_case 9 $name ${CASES[$name]}
  done
  export CUDA_VISIBLE_DEVICES=0
  if [ "${MATMUL_BIAS:-1}" = 1 ]; then
    timeout 120 python3 benchmarks/matmul_bias_vs_cublas.py --rounds 5 --results $W/matmul-bias-table.md > $W/matmul-bias-table.log 2>&1
  fi
  if [ "${GPU_TESTS:-0}" = 1 ]; then
    timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_tuning_gpu.py > $W/gpu-tests.log 2>&1
  fi
else
  i=0
  for name in gpt2 vit llama resnet50; do
    run_case $i $name ${CASES[$name]} &
    i=$((i + 1))
  done
  wait
fi
# the logs, the tables, and of each report its first page, its hand-written page and the stage's own files
cd $W && tar czf $OUT/first-report.tgz versions.txt *.log *.md */report/index.html */report/handwritten.html \
  */report/capture/handwritten.json */report/capture/handwritten.log 2>/dev/null
ls -la $OUT
