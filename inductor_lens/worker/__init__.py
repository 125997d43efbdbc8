"""The side that runs next to torch: every process of its own the tool starts, and what runs in it.

The tool never runs a user's model, nor a hand-written kernel's check, in its own process: a crash, a hang or a
CUDA error there must not take the report down. Every such job is a *worker*, ``python -m inductor_lens.worker JOB
...``, started and watched by the supervisor (``capture/supervisor.py``), and everything a job and the tool tell
each other goes through the torch-free files and helpers of ``exchange/``. The tool side imports this package by
two doors only: the in-process capture (``inprocess.py``) and the hand-written check (``handwritten/check.py``);
``tests/unit/test_imports.py`` checks it.

    __main__.py         the entry point: ``python -m inductor_lens.worker capture|script|handwritten``
    supervised.py       the child side of supervision: end with the tool, give the user's path back
    ranked.py           one rank of several under torchrun: its own folder, log and caches, the process group
    compat.py           torch's private APIs the worker uses, each dated with the torch versions checked
  the model process (``capture``):
    capture.py          its entry: the settings before torch is imported, then the run (model_run.py)
    capture_run.py      the run's result and how a failure is kept (torch-free); failure.py: one line per failure
    model_file.py       the model-file contract (get_model, get_inputs, calls), the device
    model_run.py        the model eagerly, in float64 and compiled, compared, then timed
    accuracy.py         compiled against eager against a float64 run
    environment.py      what the model ran on; kernel_information.py, module_stacks.py: what each compile kept
    inductor_cache.py   a note in its private Inductor cache; saved_inputs.py: each kernel's real launch arguments
    divergence.py       the first kernel whose output goes wrong (divergence_watch.py: what it watches)
    gpu_preview.py      a CPU preview of a GPU's Triton code (gpu_preview_device.py, gpu_preview_sdpa.py)
    benchmark.py        the timings of one run, in order: measure.py (ceilings, latency, profiled steps, kernels
                        alone), graph_free.py (without CUDA graphs), load.py (how busy the machine was)
  the script process (``script``): script.py (its entry), script_hooks.py (what the capture puts around it)
  the check process (``handwritten``): handwritten/ (the checks, tuning and the Triton kernel library)
  elsewhere: inprocess.py (the capture in the caller's process), compile_child.py (the compiler stages' child)

What runs in a worker imports the standard library, torch and triton, ``exchange/``, the record types and the spec:
never the report, Jinja2 or the CLI. The package's ``__init__`` imports nothing, so ``python -m
inductor_lens.worker`` stays that light (tests/e2e/test_model_process.py checks ``sys.modules`` in a real model
process; tests/unit/test_torch_free_imports.py that the tool side never imports torch).
"""
