"""Stage 1 of the pipeline (capture), in the model and script processes: what the model ran on.

The versions of torch, Triton, Python and CUDA (``environment``) and the device the capture used
(``device_info``: a GPU's name, capability and multiprocessors, or the CPU's name and cores), as the capture's
``Environment`` record keeps them.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import torch

from ..records.run import Environment


def environment() -> Environment:
    try:
        import triton

        triton_version: str | None = triton.__version__
    except Exception:
        triton_version = None
    return Environment(
        torch_version=torch.__version__,
        triton_version=triton_version,
        python_version=platform.python_version(),
        cuda_version=torch.version.cuda,
        platform=platform.platform(terse=True),
        source="capture",
    )


def device_info(device: torch.device) -> dict[str, Any]:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {
            "device_type": "cuda",
            "device_name": props.name,
            "device_capability": f"{props.major}.{props.minor}",
            "multiprocessor_count": props.multi_processor_count,
        }
    return {"device_type": "cpu", "device_name": cpu_name(), "multiprocessor_count": os.cpu_count()}


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
