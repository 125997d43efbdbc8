"""Stage 1 of the pipeline (capture), in the model process: each compile's kernel information.

Inductor knows, for each library call it makes (an extern kernel), the shapes and dtypes of its inputs and
outputs; ``kernel_information`` keeps them in ``capture/kernel_information.json`` (``files.KernelInformation``)
while the compiled model first runs, for the report's library-call rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from ..exchange.files import (
    KERNEL_INFORMATION_FILE,
    CompileKernelInformation,
    KernelInformation,
    write_json_file,
)
from .compat import current_compile_id, has_kernel_information, inductor_debug


@contextlib.contextmanager
def kernel_information(folder: Path) -> Iterator[None]:
    """Keep each Inductor compile's kernel information (a library call's input and output shapes and dtypes)
    in capture/kernel_information.json. Private API (``compat.inductor_debug``), first seen 2.14.1 (CPU): torch writes it only beside
    AOTInductor output, and the globals it reads are reset when each compile starts and restored when it
    ends, so it is read just before they are restored. A backward graph compiled lazily (at its first
    backward call) is compiled outside that reset: its entries stay in the globals and are read at the end.
    Older torch: nothing, no file (2.13 has the function, without the shapes: no _inductor_kernel_extern_info)."""
    debug = inductor_debug()
    if not has_kernel_information(debug):
        yield
        return
    reset = debug.reset_provenance_globals
    found = KernelInformation()
    earlier = set(debug.create_kernel_information_json())  # the in-process API: an earlier capture's

    @contextlib.contextmanager
    def keeping() -> Iterator[None]:
        with reset():
            try:
                yield
            finally:
                kernels = debug.create_kernel_information_json()
                if kernels:
                    found.compiles.append(CompileKernelInformation(current_compile_id(), kernels))
                    write_json_file(folder / KERNEL_INFORMATION_FILE, found)

    debug.reset_provenance_globals = keeping
    try:
        yield
    finally:  # the in-process API: the next capture in this process patches torch afresh
        debug.reset_provenance_globals = reset
        lazy = {k: v for k, v in debug.create_kernel_information_json().items() if k not in earlier}
        if lazy:
            found.compiles.append(CompileKernelInformation(None, lazy))
            write_json_file(folder / KERNEL_INFORMATION_FILE, found)
