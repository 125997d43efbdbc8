"""Stage 4 of the pipeline (bench), hand-written side: Triton kernels written by hand, set next to Inductor's.

catalog.py   what each hand-written kernel computes, its shapes, cost and tolerance (no torch import)
equivalent.py  what one catalog entry is (Equivalent), the kernels' dtypes and the checks' tolerances
costs.py     the bytes moved and FLOPs of each kernel family on a catalog shape
interpreter_shapes.py  the smaller shape a CPU check under Triton's interpreter runs on
kernels/     the kernels, tutorial style: @triton.jit kernel, launcher, torch reference, input maker
source.py    their source read without importing them, recorded with the catalog's facts for the report
check.py     run one against its reference on given shapes (CPU: Triton's interpreter), and time it (GPU)
match.py     which hand-written kernel does the job of each Inductor kernel, on which shapes
problem.py   what one launch computes (concepts.py: its ATen ops as concepts) and on what shapes (shapes.py)
runner.py    the child process that checks and times the matches of a compiled run
"""
