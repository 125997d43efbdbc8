"""Stage 4 of the pipeline (bench), run next to torch: the hand-written side.

``job`` (the check process's entry: verify, tune and time each planned check), ``check`` (one kernel against
the call it stands in for: ``inductor-lens handwritten check``), ``tuning`` (configurations per shape class, the
shipped tables in ``tuned/``) and ``kernels/`` (the Triton kernel library).
"""
