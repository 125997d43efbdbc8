#!/bin/bash
# One device call of the issue-16 GPU checks; writes under $OUT. Usage: benchmarks/run_gpu_batch.sh STEP...
export PYTHONPATH=$PWD
for step in "$@"; do
  echo "=== $step $(date +%T)"
  case $step in
    launch) timeout 150 python3 benchmarks/launch_overhead_handwritten.py --rounds 7 > $OUT/launch.md 2> $OUT/launch.err ;;
    kernels) timeout 330 python3 benchmarks/handwritten_gpu.py --results $OUT/kernels.md --quick --families attention "batch norm" pooling layout > $OUT/kernels.log 2>&1 ;;
    fixture-*) rm -rf /tmp/fx && mkdir -p /tmp/fx && tar xzf tests/fixtures/${step#fixture-}.tar.gz -C /tmp/fx
      timeout 540 python3 benchmarks/handwritten_coverage.py --out /tmp/cov --results $OUT/fixture-${step#fixture-}.md --timeout 420 --captures /tmp/fx/${step#fixture-} > $OUT/fixture-${step#fixture-}.log 2>&1
      cp /tmp/fx/${step#fixture-}/handwritten*.json /tmp/fx/${step#fixture-}/handwritten*.log $OUT/ 2>/dev/null ;;
    cov-*) timeout 560 python3 benchmarks/handwritten_coverage.py --out /tmp/cov --results $OUT/coverage-${step#cov-}.md --timeout 500 --cases ${step#cov-} > $OUT/cov-${step#cov-}.log 2>&1 ;;
  esac
  echo "exit $?"
done
