"""A custom op between compiled ops: Linear -> ReLU -> ``lens_demo::mix`` -> tanh, batch 256, width 512.

``lens_demo::mix`` is a ``torch.library.custom_op`` (as a library such as transformers defines its own
kernels): ``x @ w`` then ``x @ w`` again on the result, with a ``register_fake`` so Dynamo traces it without
running it. Inductor cannot look inside it and calls it as it is.

What to look for: the op is a library call named ``lens_demo::mix`` (its namespace and name) in the launch
order and the timing tables, with its own time from the profiler; the diagnosis calls it a custom op that runs
outside Inductor's kernels, not an ATen fallback.
"""

import torch
from torch import nn

WIDTH = 512


def _define() -> None:
    # a model file may be loaded twice in one process (the in-process API): define the op once
    if hasattr(torch.ops.lens_demo, "mix"):
        return

    @torch.library.custom_op("lens_demo::mix", mutates_args=())
    def mix(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return (x @ w) @ w

    @mix.register_fake
    def _(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x.new_empty(x.shape[0], w.shape[1])

    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[no-untyped-def]
        x, w = ctx.saved_tensors
        xw = x @ w
        grad_xw = grad @ w.t()
        return grad_xw @ w.t(), x.t() @ grad_xw + xw.t() @ grad

    def setup_context(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
        ctx.save_for_backward(*inputs)

    mix.register_autograd(backward, setup_context=setup_context)


_define()


class CustomOpModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(WIDTH, WIDTH)
        self.w = nn.Parameter(torch.randn(WIDTH, WIDTH) / WIDTH**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc(x))
        return torch.tanh(torch.ops.lens_demo.mix(h, self.w) + 1.0)


def get_model() -> nn.Module:
    return CustomOpModel()


def get_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(256, WIDTH),)
