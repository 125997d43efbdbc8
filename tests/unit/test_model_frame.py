"""The model's own frame and lines (issue 30): an nn.Sequential of torch's modules is compiled through torch's
wrap_inline frame (torch/_dynamo/external_utils.py ``inner``), which must never be shown as the model's frame or
source; the lines that are the user's are where get_model() built the model and its modules."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from inductor_lens.analysis import analyze
from inductor_lens.parse import parse_debug_folder
from inductor_lens.parse.source_lines import is_torch_file
from inductor_lens.records import CaptureOutcome, SourceLine
from inductor_lens.report import render_report
from inductor_lens.report.source_view import source_page
from inductor_lens.worker.model_file import load_model_file, module_construction, module_sites

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_the_wrap_inline_frame_is_never_the_models_source(unpacked: Callable[[str], Path]) -> None:
    """mlp_default (H200, torch 2.11): two compiles (a recompile for grad mode) of torch's wrap_inline
    ``inner``, no file notes."""
    root = unpacked("mlp_default")
    raw = parse_debug_folder(root, strict=True).frames
    assert [(f.compile_id, f.function, f.filename) for f in raw] == [
        (compile_id, "nn.Module", None)
        for compile_id in ("0/0", "0/1")
    ]
    # torch's own frame stays where the stack is shown (the trigger of the compile), named as torch's
    assert raw[0].stack[-1].function == "inner" and raw[0].stack[-1].filename.endswith("/torch/_dynamo/external_utils.py")
    model = "/m/mlp.py"
    built = (
        SourceLine(model, 13, "Sequential", "return nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), ...)"),
        SourceLine(model, 13, "0: Linear", "return nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), ...)"),
        SourceLine(model, 13, "1: GELU", "return nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), ...)"),
        SourceLine(model, 13, "2: Linear", "return nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), ...)"),
    )
    capture = CaptureOutcome(model_path=model, model_name="mlp", status="ok", phase="done", model_built=built)
    run = parse_debug_folder(root, strict=True, capture=capture)
    assert [(f.function, f.filename, f.line) for f in run.frames] == [("Sequential", model, 13)] * 2
    assert not any(is_torch_file(s.path) for s in run.sources)
    page = source_page(run, analyze(run))
    assert [f.path for f in page.files] == [model]  # quoted only: the file is not on this machine
    (line,) = page.files[0].lines
    assert (line.number, line.built) == (13, ["Sequential", "0: Linear", "1: GELU", "2: Linear"])
    assert page.torch_forward == "Sequential"
    pages = render_report(run, analyze(run), draw=False)
    # (the compile page keeps torch's frame where it shows the stack that triggered the compile, as a library's)
    for name in ("index.html", "source.html", "graphs/model__0_forward_1.0.html"):
        assert "external_utils" not in pages[name], name
    assert "built here: 0: Linear" in pages["source.html"]
    kernel_page = next(text for name, text in pages.items() if name.startswith("kernels/"))
    assert "the model <code>get_model()</code> built is a <code>Sequential</code>" in kernel_page


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        ("mlp", [("Sequential", 13), ("0: Linear", 13), ("1: GELU", 13), ("2: Linear", 13)]),
        # one line per module of a multi-line nn.Sequential(...)
        ("convnet", [("Sequential", 13), ("0: Conv2d", 14), ("1: BatchNorm2d", 15), ("2: ReLU", 16),
                     ("3: Conv2d", 17), ("4: BatchNorm2d", 18), ("5: ReLU", 19), ("6: AdaptiveAvgPool2d", 20),
                     ("7: Flatten", 21), ("8: Linear", 22)]),
        # a module of the file's own: its submodules are built in its __init__
        ("softmax_ln", [("SoftmaxLayerNorm", 23), ("norm: LayerNorm", 16)]),
    ],
)
def test_where_get_model_built_each_module(sample: str, expected: list[tuple[str, int]]) -> None:
    path = SAMPLES / f"{sample}.py"
    module = load_model_file(path)
    # Module.__init__ as it is now: once Dynamo has run in this process it is Dynamo's own patched_init
    before = torch.nn.Module.__init__
    with module_construction(path) as sites:
        model = module.get_model()
    built = module_sites(model, path, sites)
    assert [(s.function, s.line) for s in built] == expected
    assert all(s.filename == str(path) and s.code for s in built)
    assert torch.nn.Module.__init__ is before  # put back
