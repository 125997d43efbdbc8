"""benchmarks/models/h100_gpt2.py with ``torch.set_float32_matmul_precision("high")`` (TF32 matmuls): the
measured side of the report's precision suggestion on the GPT-2 fixture (benchmarks/results, issue 31)."""

import torch
from h100_gpt2 import get_inputs, get_model  # noqa: F401 - the model file's two functions

torch.set_float32_matmul_precision("high")
