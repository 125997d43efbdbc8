"""The process boundary: what runs in a process of its own, and how the tool talks to it.

The tool never runs a user's model, nor a hand-written kernel's check, in its own process: a crash,
a hang or a CUDA error there must not take the report down. Every such job is a *worker*,
``python -m inductor_lens.worker JOB ...``, started and watched by the supervisor, and everything a
job and the tool tell each other goes through the files declared in ``files.py``.

    supervisor.py   parent side: start a worker in its own process group, time it out, kill it, keep its log
    files.py        both sides: the declared files (spec, result, measurements, plan) and their readers
    __main__.py     child side: the entry point, ``python -m inductor_lens.worker capture|script|handwritten``
    capture.py      child side, the model process: run the model eagerly and compiled, compare, then time it
    model_file.py   child side, the model process: the model-file contract (get_model, get_inputs, calls)
    accuracy.py     child side, the model process: compiled against eager against a float64 run
    script.py       child side, the script process: an unchanged script, its torch.compile calls, a profiled window
    measure.py      child side, the model process: device ceilings, latency, profiled steps, kernels alone
    handwritten.py  child side, the check process: run hand-written kernels against torch (and time them)
    ranked.py       child side, one rank of several under torchrun: its own folder, log and caches, the process group

What runs in a worker imports only the standard library, torch and triton, the record types, and
(in the check process) the hand-written kernels: never the report, Jinja2 or the CLI. The package's
``__init__`` imports nothing, so ``python -m inductor_lens.worker`` stays that light
(tests/e2e/test_worker_boundary.py checks ``sys.modules`` in a real model process).
"""
