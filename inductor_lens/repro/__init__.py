"""After the records (like report/, it reads records only): one generated kernel as a standalone script,
``inductor-lens repro REPORT KERNEL``.

    plan.py     records -> what the script needs: the kernel's source as Inductor compiled it, its
                arguments at its first launch, the eager reference of the ATen ops it fuses
    script.py   plan -> repro.py (imports torch and triton only)
    writer.py   a report or capture folder + a kernel name -> DIR/repro.py, with the kernel's inputs
                saved at capture time (``compile --save-inputs``, worker/saved_inputs.py) copied beside it
"""
