#!/bin/bash
# The GPU fixtures of issue 31, one device call: each case an `inductor-lens compile` on the H100, its capture/
# folder archived under $OUT as <case>.tar.gz (renamed to the case), its terminal output as <case>.log.
# Usage: benchmarks/capture_answers_gpu.sh CASE...   (cases: gpt2 gpt2-tf32 vit resnet50 llama)
export PYTHONPATH=$PWD:$PWD/benchmarks/models
for case in "$@"; do
  echo "=== $case $(date +%T)"
  case $case in
    gpt2) name=h100-gpt2-fp32-default; args=(benchmarks/models/h100_gpt2.py) ;;
    gpt2-tf32) name=h100-gpt2-fp32-tf32; args=(benchmarks/models/h100_gpt2_tf32.py) ;;
    vit) name=h100-vit-s16-reduce-overhead; args=(samples/real/timm_vit.py --mode reduce-overhead) ;;
    resnet50) name=h100-resnet50-train; args=(samples/real/torchvision_resnet50.py --train) ;;
    llama) name=h100-llama-bf16-max-autotune-nocg; args=(benchmarks/models/h100_llama.py --dtype bf16 --mode max-autotune-no-cudagraphs) ;;
    *) echo "unknown case $case"; continue ;;
  esac
  rm -rf /tmp/cap/$name
  timeout ${LIMIT_S:-300} python3 -m inductor_lens compile "${args[@]}" --device cuda --no-handwritten --timeout ${LIMIT_S:-300} --out /tmp/cap/$name > $OUT/$name.log 2>&1
  echo "exit $?" | tee -a $OUT/$name.log
  tar czf $OUT/$name.tar.gz --exclude=capture/triton_cache -C /tmp/cap/$name --transform "s,^capture,$name," capture 2>/dev/null
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $OUT/versions.txt
python3 -c "import torch, triton, transformers, timm, torchvision, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__, 'timm', timm.__version__, 'torchvision', torchvision.__version__, 'python', sys.version.split()[0], 'cuda', torch.version.cuda)" >> $OUT/versions.txt
