"""Stage 4 of the pipeline (bench), hand-written side, in the tool: Triton kernels written by hand, set next to
Inductor's. What runs next to torch (the kernels, their checks and tuning) is ``worker/handwritten/``; this package
plans the checks from the records, starts the check process and attaches its results.

catalog.py   what each hand-written kernel computes, its shapes, cost and tolerance (no torch import)
equivalent.py  what one catalog entry is (Equivalent), the kernels' dtypes and the checks' tolerances
costs.py     the bytes moved and FLOPs of each kernel family on a catalog shape
interpreter_shapes.py  the smaller shape a CPU check under Triton's interpreter runs on
source.py    the kernels' source read without importing them, recorded with the catalog's facts for the report
match.py     which hand-written kernel does the job of each Inductor kernel, on which shapes
problem.py   what one launch computes (concepts.py: its ATen ops as concepts) and on what shapes (shapes.py)
runner.py    starts the check process (worker/handwritten/job.py) on the plan of a compiled run
attach.py    plans the checks and verifications, and puts their results into the run's records
verify.py    plans the verification of a match against Inductor's kernel (run by worker/handwritten/verify.py)
"""
