"""Where does a compiled model's extra error against float64 come from? A probe over variants of one model file.

The accuracy card judges compiled against eager by their RMSE against a float64 run (Dynamo's rule). When
compiled is further from float64 than eager, this script runs the same model and inputs as several
variants and prints each one's RMSE against float64, for the output and for the gradients the card
names, so the variant that moves the error stands out:

- eager (contiguous), eager with the inputs and model in channels-last (what Inductor's layout
  optimization picks for convolutions), compiled (the mode given), and compiled with
  ``layout_optimization=False``, and with ``freezing`` off/on where asked.

Run (GPU machine): ``python benchmarks/accuracy_probe.py samples/real/torchvision_resnet50.py --dtype bf16
--train --grads fc.weight layer4.2.bn2.weight``. Also checks with ``torch._dynamo.utils.same`` itself.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from inductor_lens.worker import accuracy
from inductor_lens.worker.model_file import calls_from, load_model_file, place


def run(model: Any, calls: list[Any], train: bool) -> tuple[list[Any], dict[str, Any]]:
    """Outputs of every call, and the gradients of the sum of the outputs (as the capture does)."""
    outputs = []
    for call in calls:
        out = model(*call.args, **call.kwargs)
        leaves = [v for _, v in accuracy.named_leaves(out) if isinstance(v, torch.Tensor)]
        if train:
            sum(t.float().sum() for t in leaves if t.is_floating_point()).backward()
        outputs.extend(t.detach().clone() for t in leaves)
    grads = {n.removeprefix("_orig_mod."): p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    torch.cuda.synchronize()
    return outputs, grads


def rmse(ref: Any, value: Any) -> float:
    return float(torch.sqrt(torch.mean(torch.square(ref.double() - value.double()))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_file", type=Path)
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    parser.add_argument("--train", action="store_true")
    parser.add_argument("--mode", default="default")
    parser.add_argument("--grads", nargs="*", default=[])
    args = parser.parse_args()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    module = load_model_file(args.model_file)
    torch.manual_seed(0)
    base = module.get_model()
    calls = calls_from(module.get_inputs())
    if not args.train:
        torch.set_grad_enabled(False)

    ref_model, ref_calls = place(copy.deepcopy(base), calls, torch.device("cuda"), torch.float64)
    ref_out, ref_grads = run(ref_model, ref_calls, args.train)

    def variant(name: str, compile_options: dict[str, Any] | None, channels_last: bool = False) -> None:
        torch._dynamo.reset()
        model, placed = place(copy.deepcopy(base), calls, torch.device("cuda"), dtype)
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
            placed = [type(c)(tuple(a.to(memory_format=torch.channels_last) if a.dim() == 4 else a for a in c.args),
                              c.kwargs) for c in placed]  # fmt: skip
        fn = model
        if compile_options is not None:
            mode = None if args.mode == "default" else args.mode
            fn = torch.compile(model, mode=mode, options=compile_options or None)
        out, grads = run(fn, placed, args.train)
        cells = [f"out {rmse(r, o):.4g}" for r, o in zip(ref_out, out, strict=True)]
        cells += [f"{g} {rmse(ref_grads[g], grads[g]):.4g}" for g in args.grads if g in grads]
        print(f"{name:<44} " + "  ".join(cells), flush=True)
        results[name] = (out, grads)

    results: dict[str, Any] = {}
    print(f"{args.model_file} {args.dtype} {'train' if args.train else 'inference'} mode={args.mode}; "
          f"torch {torch.__version__}; {torch.cuda.get_device_name()}\nRMSE against float64:")  # fmt: skip
    variant("eager", None)
    variant("eager, channels-last", None, channels_last=True)
    variant("compiled", {})
    variant("compiled, layout_optimization=False", {"layout_optimization": False})
    from torch._dynamo.utils import same

    eager_out, eager_grads = results["eager"]
    for name in ("compiled", "compiled, layout_optimization=False"):
        out, grads = results[name]
        verdict = same(eager_out, out, fp64_ref=ref_out, tol=1e-2, equal_nan=True)
        grad_verdicts = {g: same(eager_grads[g], grads[g], fp64_ref=ref_grads[g], tol=1e-2) for g in args.grads}
        print(f"torch._dynamo.utils.same(eager, {name}, fp64_ref, tol=1e-2): outputs {verdict}; {grad_verdicts}")


if __name__ == "__main__":
    main()
