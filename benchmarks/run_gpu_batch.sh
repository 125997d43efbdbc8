#!/bin/bash
# One device call of the GPU checks (issues 16-18); writes under $OUT. Usage: benchmarks/run_gpu_batch.sh STEP...
export PYTHONPATH=$PWD
for step in "$@"; do
  echo "=== $step $(date +%T)"
  case $step in
    launch) timeout 150 python3 benchmarks/launch_overhead_handwritten.py --rounds 7 > $OUT/launch.md 2> $OUT/launch.err ;;
    kernels) timeout 330 python3 benchmarks/handwritten_gpu.py --results $OUT/kernels.md --quick --families attention "batch norm" pooling layout > $OUT/kernels.log 2>&1 ;;
    conv-fwd) timeout 180 python3 benchmarks/conv_resnet50.py --results $OUT/conv-fwd.md --directions forward --formats channels-last NCHW --limit-s 160 > $OUT/conv-fwd.log 2>&1 ;;
    conv-wgrad) timeout 170 python3 benchmarks/conv_resnet50.py --results $OUT/conv-wgrad.md --directions "weight gradient" --formats channels-last --limit-s 150 > $OUT/conv-wgrad.log 2>&1 ;;
    conv-bwd) timeout 170 python3 benchmarks/conv_resnet50.py --results $OUT/conv-bwd.md --directions "input gradient" "weight gradient" --formats channels-last --limit-s 145 > $OUT/conv-bwd.log 2>&1 ;;
    attention) timeout 130 python3 benchmarks/handwritten_gpu.py --results $OUT/attention.md --skip-correctness --families attention > $OUT/attention.log 2>&1 ;;
    memory) timeout 420 python3 benchmarks/handwritten_gpu.py --results $OUT/memory.md --skip-correctness --dtypes bfloat16 --families elementwise row-wise transformer "batch norm" pooling layout > $OUT/memory.log 2>&1 ;;
    check) timeout 300 python3 benchmarks/handwritten_gpu.py --results $OUT/check.md --families none --names add bias_relu bias_gelu bias_gelu_tanh scale_bias bias_residual gelu gelu_backward cross_entropy cross_entropy_backward rotary rotary_backward > $OUT/check.log 2>&1 ;;
    probe) timeout 200 python3 benchmarks/programs_per_sm.py --results $OUT/programs-per-sm.md > $OUT/probe.log 2>&1 ;;
    profile-join) # issue 17: report --profile of a plain script's profiler trace against inductor-lens compile
      timeout 560 python3 benchmarks/profile_join.py samples/block.py hf-gpt2-small samples/real/llama.py --steps 20 --out /tmp/pj > $OUT/profile-join.log 2>&1
      cat /tmp/pj/*/comparison.md > $OUT/profile-join.md 2>/dev/null
      tar czf $OUT/profile-join-traces.tar.gz -C /tmp/pj --exclude='*/capture' --exclude='*/profiled' . 2>/dev/null ;;
    stages) # issue 18: compiler stages against the device; the report comes back for a screenshot here
      timeout 400 python3 benchmarks/compiler_stages_gpu.py --work /tmp/stages --out $OUT/compiler-stages.md > $OUT/stages.log 2>&1
      tar czf $OUT/stages-report.tar.gz -C /tmp/stages --exclude=report/capture report 2>/dev/null ;;
    repro) # issue 18: every Triton kernel's reproducer, alone in a fresh process, against the report's isolated time
      timeout 420 python3 benchmarks/repro_gpu.py --compile samples/block.py --work /tmp/repro --out $OUT/repro-block.md > $OUT/repro-block.log 2>&1
      timeout 300 python3 benchmarks/repro_gpu.py --work /tmp/repro-fixture --out $OUT/repro-fixture.md > $OUT/repro-fixture.log 2>&1 ;;
    sdpa) # issue 18: the attention backend CUDA picks, for the CPU preview's sdp_choice
      timeout 120 python3 benchmarks/sdpa_choice_probe.py --out $OUT/sdpa-choice.json > $OUT/sdpa.log 2>&1 ;;
    preview-names) # issue 18: the CPU preview under the fixtures' torch, GPU hidden, against the GPU fixtures
      CUDA_VISIBLE_DEVICES= timeout 420 python3 benchmarks/preview_names.py --out $OUT/preview-names.md --work /tmp/pvn > $OUT/preview-names.log 2>&1 ;;
    divergence) timeout 300 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_divergence_gpu.py > $OUT/divergence.log 2>&1 ;;
    gputests) timeout 300 python3 -m pytest -q -p no:cacheprovider tests/gpu > $OUT/gputests.log 2>&1 ;;
    fixture-*) # fixture-NAME[@OUTER_S@STAGE_S]: a committed capture's hand-written stage run here
      IFS=@ read -r name outer stage <<< "${step#fixture-}"
      rm -rf /tmp/fx && mkdir -p /tmp/fx && tar xzf tests/fixtures/$name.tar.gz -C /tmp/fx
      timeout ${outer:-540} python3 benchmarks/handwritten_coverage.py --out /tmp/cov --results $OUT/fixture-$name.md --timeout ${stage:-420} --captures /tmp/fx/$name > $OUT/fixture-$name.log 2>&1
      cp /tmp/fx/$name/handwritten.json $OUT/handwritten-$name.json; cp /tmp/fx/$name/handwritten.log $OUT/handwritten-$name.log 2>/dev/null ;;
    cov-*) # cov-CASE[@OUTER_S@STAGE_S]: one compile of a real model with the hand-written stage; its capture kept
      IFS=@ read -r name outer stage <<< "${step#cov-}"
      timeout ${outer:-560} python3 benchmarks/handwritten_coverage.py --out /tmp/cov --results $OUT/coverage-$name.md --timeout ${stage:-500} --cases $name > $OUT/cov-$name.log 2>&1
      cp /tmp/cov/$name/capture/handwritten*.json $OUT/handwritten-$name.json 2>/dev/null
      tar czf $OUT/capture-$name.tar.gz -C /tmp/cov/$name --transform "s,^capture,$name," capture 2>/dev/null ;;
  esac
  echo "exit $?"
done
