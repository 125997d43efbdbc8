#!/bin/bash
# Issue 32 on GPUs: `inductor-lens compile MODEL --try 3` for the four models of the acceptance, each on a GPU of
# its own (one host, CUDA_VISIBLE_DEVICES), in parallel. Each case's terminal output is $OUT/<case>.log (ending
# with its exit code and wall time), and its report, less the debug trees and traces, is $OUT/<case>.tar.gz.
# Usage: benchmarks/try_gpu.sh   (env: LIMIT_S, the wall seconds a case may take; BUDGET_<CASE>, its --try-budget)
export PYTHONPATH=$PWD:$PWD/benchmarks/models
LIMIT_S=${LIMIT_S:-570}
one() {
  local gpu=$1 case=$2 budget=$3; shift 3
  local start=$(date +%s) out=/tmp/try/$case
  rm -rf $out
  CUDA_VISIBLE_DEVICES=$gpu timeout $LIMIT_S python3 -m inductor_lens compile "$@" --device cuda --no-handwritten \
    --try 3 --try-budget $budget --out $out > $OUT/$case.log 2>&1
  echo "exit $? wall $(( $(date +%s) - start )) s" >> $OUT/$case.log
  (cd $out && find . -name lens.json -o -name index.html -o -name trials.json -o -name capture.json -o -name 'capture.log' \
     -o -path './static/*' -o -name '*.css' | grep -v torch_compile_debug | tar czf $OUT/$case.tar.gz -T -)
}
one 0 gpt2 ${BUDGET_GPT2:-470} benchmarks/models/h100_gpt2.py &
one 1 vit ${BUDGET_VIT:-460} samples/real/timm_vit.py --mode reduce-overhead &
one 2 resnet50 ${BUDGET_RESNET50:-420} samples/real/torchvision_resnet50.py --train &
one 3 llama ${BUDGET_LLAMA:-370} benchmarks/models/h100_llama.py --dtype bf16 --mode max-autotune-no-cudagraphs &
wait
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $OUT/versions.txt
python3 -c "import torch, triton, transformers, timm, torchvision, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__, 'timm', timm.__version__, 'torchvision', torchvision.__version__, 'python', sys.version.split()[0], 'cuda', torch.version.cuda)" >> $OUT/versions.txt
nproc >> $OUT/versions.txt
