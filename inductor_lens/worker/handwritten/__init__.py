"""Stage 4 of the pipeline (bench), run next to torch: the hand-written side.

job.py            the check process's entry: verify, tune and time each planned check
check.py          one kernel against the call it stands in for (``inductor-lens handwritten check``); a door
                  the tool side may import (tests/unit/test_imports.py)
verify.py         a match's equivalents against the Inductor kernel's FX nodes, in float64
tuning.py         ``TunedKernel``: a kernel launched with its configuration for the shape class, its fast path
tuning_store.py   tuning keys and shape classes, the autotune cache on disk, the shipped tables (``tuned/``)
tuning_search.py  the search, in order from Inductor's own choice, bounded by its budget
tuning_record.py  which configuration ran and where it came from, for the report
kernels/          the Triton kernel library, tutorial style: kernel, launcher, torch reference, input maker
"""
