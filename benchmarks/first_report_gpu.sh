#!/bin/bash
# Issue 33's acceptance runs, one device call on four GPUs: each model compiled by `inductor-lens compile` with
# nothing cached (fresh Inductor, Triton and inductor-lens caches: the shipped tuning table is the only tuning
# it has), one model per GPU, in parallel; every terminal line stamped with the seconds since the command
# started, so the model process's end, the first report and the hand-written side's end can be read off; then
# the hand-written kernels against Inductor's (benchmarks/handwritten_coverage.py --reports) and, on GPU 0,
# matmul_bias against cuBLAS with the table, and on GPU 2 tests/gpu/test_tuning_gpu.py. What comes back is
# $OUT/first-report.tgz.
# Usage: benchmarks/first_report_gpu.sh
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
  export CUDA_VISIBLE_DEVICES=$i INDUCTOR_LENS_CACHE_DIR=$W/$name/lens TRITON_CACHE_DIR=$W/$name/triton
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
run_case 0 gpt2 benchmarks/models/h100_gpt2.py &
run_case 1 vit samples/real/timm_vit.py --mode reduce-overhead &
run_case 2 llama benchmarks/models/h100_llama.py --dtype bf16 --mode max-autotune-no-cudagraphs &
run_case 3 resnet50 samples/real/torchvision_resnet50.py --train &
wait
# the logs, the tables, and of each report its first page, its hand-written page and the stage's own files
cd $W && tar czf $OUT/first-report.tgz versions.txt *.log *.md */report/index.html */report/handwritten.html \
  */report/capture/handwritten.json */report/capture/handwritten.log 2>/dev/null
ls -la $OUT
