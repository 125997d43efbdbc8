#!/bin/bash
# Issue 34's GPU runs, one device call on a machine of N GPUs (N = 2 by default, or the first argument): the
# project's DDP sample, HF GPT-2 in DDP, HF Llama in FSDP2 (fully_shard per decoder layer), each
# `inductor-lens compile ... --nproc N --train`; an unchanged torchrun DDP training script under
# `inductor-lens run -- torchrun`; the planted divergences (a rank-dependent branch and a recompile on one rank:
# samples/ranks_diverge.py; a warm compile cache on one rank only). The hand-written stage is off (not what these
# runs measure). The ranks the landing page leaves for on demand are then built with `report OUT --rank R`. Every
# terminal line is stamped with the seconds since the command started. Then the table of
# benchmarks/ranks_gpu_results.py; what comes back is $OUT/ranks.tgz (logs, table, landing pages, ranks.json).
# Usage: benchmarks/ranks_gpu.sh [N]      (ONLY="gpt2_ddp llama_fsdp2": those jobs alone; KEEP=1: keep the earlier
#                                          call's jobs in /tmp/ranks, for a job list split over two device calls)
N=${1:-2}
export PYTHONPATH=$PWD NCCL_NVLS_ENABLE=0
W=/tmp/ranks
[ "${KEEP:-0}" = 1 ] || rm -rf $W
mkdir -p $W
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $W/versions.txt
python3 -c "import torch, triton, transformers, sys; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__, 'nccl', '.'.join(map(str, torch.cuda.nccl.version())), 'python', sys.version.split()[0])" >> $W/versions.txt
stamp='import sys, time
start = time.time()
for line in sys.stdin:
    print(f"{time.time() - start:7.1f} {line}", end="", flush=True)'
job() {  # job NAME ARGS...: one inductor-lens command into $W/NAME, its stamped log and exit code
  local name=$1; shift
  if [ -n "$ONLY" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi
  python3 -m inductor_lens "$@" 2>&1 | python3 -c "$stamp" > $W/$name.log
  echo "exit ${PIPESTATUS[0]}" >> $W/$name.log
  # the ranks the landing page left for on demand (identical to a rank with a full report): built here too, so the
  # table has every rank's step times and collectives
  for r in $(seq 0 $((N - 1))); do
    if [ -d $W/$name/rank$r ] && [ ! -f $W/$name/rank$r/lens.json ]; then
      python3 -m inductor_lens report $W/$name --rank $r 2>&1 | python3 -c "$stamp" >> $W/$name-on-demand.log
    fi
  done
}
common="--no-handwritten --timeout 400"
job ddp_mlp compile samples/ddp_mlp.py --nproc $N --train --device cuda $common --out $W/ddp_mlp
job gpt2_ddp compile samples/real/gpt2_ddp.py --nproc $N --train --device cuda $common --out $W/gpt2_ddp
job llama_fsdp2 compile samples/real/llama_fsdp2.py --nproc $N --train --device cuda $common --out $W/llama_fsdp2
job torchrun_gpt2 run $common --out $W/torchrun_gpt2 -- torchrun --standalone --nproc-per-node $N \
  samples/real/train_gpt2_ddp.py --steps 5
job diverge compile samples/ranks_diverge.py --nproc $N --device cuda $common --out $W/diverge
# a warm compile cache on one rank only: the ranks' caches kept, then rank 1's removed before the second job
export INDUCTOR_LENS_RANK_CACHES=$W/rank-caches
RANKS_DIVERGE=none job warm_first compile samples/ranks_diverge.py --nproc $N --device cuda $common --out $W/warm_first
rm -rf $W/rank-caches/rank1
RANKS_DIVERGE=none job warm_one compile samples/ranks_diverge.py --nproc $N --device cuda $common --out $W/warm_one
unset INDUCTOR_LENS_RANK_CACHES
python3 benchmarks/ranks_gpu_results.py ddp_mlp=$W/ddp_mlp gpt2_ddp=$W/gpt2_ddp llama_fsdp2=$W/llama_fsdp2 \
  torchrun_gpt2=$W/torchrun_gpt2 diverge=$W/diverge warm_first=$W/warm_first warm_one=$W/warm_one > $W/table.md 2>&1
# the profiler's NCCL kernels and record_param_comms events of rank 0's profiled steps, for the collectives' parser
for name in gpt2_ddp llama_fsdp2 torchrun_gpt2; do
  python3 -c "
import json, sys
events = json.load(open(sys.argv[1])).get('traceEvents', [])
kept = [e for e in events if str(e.get('name', '')).startswith(('nccl', 'record_param_comms'))]
json.dump({'traceEvents': kept}, open(sys.argv[2], 'w'), indent=0)
print(sys.argv[2], len(kept), 'events')" $W/$name/rank0/capture/profile_trace.json $W/nccl-events-$name.json >> $W/table.md 2>&1
done
# the pages, ranks.json, the logs and each rank's TORCH_TRACE log (the landing page can be made again from those)
cd $W && tar czf $OUT/ranks.tgz versions.txt *.log table.md nccl-events-*.json */index.html */ranks.json */rank*/index.html \
  */rank*/capture/capture.log */rank*/capture/trace 2>/dev/null
if [ $(stat -c %s $OUT/ranks.tgz) -gt 15000000 ]; then
  tar czf $OUT/ranks.tgz versions.txt *.log table.md nccl-events-*.json */index.html */ranks.json */rank*/index.html \
    */rank*/capture/capture.log 2>/dev/null
fi
ls -la $OUT
