#!/bin/bash
# The shipped tuning table of issue 33, one device call on four GPUs: the hand-written stage of each H100
# fixture capture (the four models of the issue) run with a full search (no table, no budget per kernel or
# stage), one capture per GPU, in parallel; then benchmarks/tuning_table.py merges their autotune caches into
# $OUT/sm_90.json. Also the matmul_bias side-by-side against cuBLAS (GPU 0, before its capture).
# Usage: benchmarks/tuning_table_gpu.sh   (writes under $OUT)
export PYTHONPATH=$PWD
cases=(h100-gpt2-fp32-default h100-vit-s16-reduce-overhead h100-llama-bf16-max-autotune-nocg h100-resnet50-train)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $OUT/versions.txt
python3 -c "import torch, triton, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'python', sys.version.split()[0])" >> $OUT/versions.txt
for i in 0 1 2 3; do
  name=${cases[$i]}
  (
    export CUDA_VISIBLE_DEVICES=$i INDUCTOR_LENS_TUNING_TABLE=0 INDUCTOR_LENS_TUNE_BUDGET=0
    export INDUCTOR_LENS_CACHE_DIR=/tmp/tt/$name/lens TRITON_CACHE_DIR=/tmp/tt/$name/triton
    rm -rf /tmp/tt/$name && mkdir -p /tmp/tt/$name/fx && tar xzf tests/fixtures/$name.tar.gz -C /tmp/tt/$name/fx
    if [ $i = 0 ]; then
      timeout 120 python3 benchmarks/matmul_bias_vs_cublas.py --rounds 5 --results $OUT/matmul-bias-full-search.md > $OUT/matmul-bias-full-search.log 2>&1
    fi
    started=$(date +%s.%N)
    timeout ${LIMIT_S:-480} python3 benchmarks/handwritten_coverage.py --out /tmp/tt/$name/cov --results $OUT/full-$name.md \
      --timeout ${STAGE_S:-460} --handwritten-budget 0 --captures /tmp/tt/$name/fx/$name > $OUT/full-$name.log 2>&1
    echo "exit $? after $(python3 -c "print(round($(date +%s.%N) - $started, 1))") s" >> $OUT/full-$name.log
    cp /tmp/tt/$name/fx/$name/handwritten.json $OUT/full-$name-handwritten.json 2>/dev/null
    cp /tmp/tt/$name/fx/$name/handwritten.log $OUT/full-$name-handwritten.log 2>/dev/null
  ) &
done
wait
python3 benchmarks/tuning_table.py --caches /tmp/tt/*/lens/handwritten-autotune --arch sm_90 --device-name H100 \
  --out $OUT/sm_90.json --note "full searches of the hand-written stage of tests/fixtures/h100-{gpt2-fp32-default,vit-s16-reduce-overhead,llama-bf16-max-autotune-nocg,resnet50-train}" 2>&1 | tee $OUT/table.log
