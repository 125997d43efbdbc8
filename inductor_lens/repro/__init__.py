"""After the records (like report/, it reads records only): one generated kernel as a standalone script,
``inductor-lens repro REPORT KERNEL``.

    plan.py     records -> what the script needs: the kernel's source as Inductor compiled it, its
                arguments at its first launch, the eager reference of the ATen ops it fuses
    definition.py  the kernel's source as Inductor handed it to its compiler, its parameters
    arguments.py   its arguments at its first launch (layouts, storage, values of random inputs)
    reference.py   the eager reference: its post-grad FX nodes, tied to the arguments they read and write
    parts.py       what a plan is made of (TensorArg, ScalarArg, Reference) and ReproError
    script.py   plan -> repro.py (imports torch and triton only)
    writer.py   a report or capture folder + a kernel name -> DIR/repro.py, with the kernel's inputs
                saved at capture time (``compile --save-inputs``, worker/saved_inputs.py) copied beside it
"""
