#!/bin/bash
# Issue 32 on GPUs: `inductor-lens compile MODEL --try 3` for the four models of the acceptance, each on a GPU of
# its own (one host, CUDA_VISIBLE_DEVICES), in parallel. Each case's terminal output is $OUT/<case>.log (ending
# with its exit code and wall time); the reports' first pages and records (lens.json, capture/trials.json, the
# comparison's lens.json, each configuration's lens.json and each warm round's capture.json) are $OUT/reports.tar.gz.
# Usage: benchmarks/try_gpu.sh [CASE...]   (cases: gpt2 vit resnet50 llama; env: LIMIT_S, a case's wall seconds)
export PYTHONPATH=$PWD:$PWD/benchmarks/models
LIMIT_S=${LIMIT_S:-570}
one() {
  local gpu=$1 case=$2 budget=$3; shift 3
  local start=$(date +%s) out=/tmp/try/$case
  rm -rf $out
  CUDA_VISIBLE_DEVICES=$gpu timeout $LIMIT_S python3 -m inductor_lens compile "$@" --device cuda --no-handwritten \
    --try 3 --try-budget $budget --out $out > $OUT/$case.log 2>&1
  echo "exit $? wall $(( $(date +%s) - start )) s" >> $OUT/$case.log
}
gpu=0
for case in ${@:-gpt2 vit resnet50 llama}; do
  case $case in
    gpt2) one $gpu gpt2 ${BUDGET_GPT2:-470} benchmarks/models/h100_gpt2.py & ;;
    vit) one $gpu vit ${BUDGET_VIT:-460} samples/real/timm_vit.py --mode reduce-overhead & ;;
    resnet50) one $gpu resnet50 ${BUDGET_RESNET50:-300} samples/real/torchvision_resnet50.py --train & ;;
    llama) one $gpu llama ${BUDGET_LLAMA:-380} benchmarks/models/h100_llama.py --dtype bf16 --mode max-autotune-no-cudagraphs & ;;
  esac
  gpu=$((gpu + 1))
done
wait
(cd /tmp/try && find . -path '*/torch_compile_debug' -prune -o \( -name lens.json -o -name trials.json \
   -o -path './*/index.html' -o -path '*/warm-rounds/*/capture.json' \) -print | grep -v '/configs/.*/index.html' \
   | tar czf $OUT/reports.tar.gz -T -)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $OUT/versions.txt
python3 -c "import torch, triton, transformers, timm, torchvision, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__, 'timm', timm.__version__, 'torchvision', torchvision.__version__, 'python', sys.version.split()[0], 'cuda', torch.version.cuda)" >> $OUT/versions.txt
echo "cpus $(nproc)" >> $OUT/versions.txt
