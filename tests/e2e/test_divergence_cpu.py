"""compile --find-divergence end to end on CPU: a numerics bug planted in Inductor's own pattern rewrites (a
post-grad pattern that scales one node by 1.01, as a wrong rewrite would) is named by its kernel, its FX node
and the model line, with pattern_matcher=False as the option that makes it go away; a model that agrees raises
no alarm."""

from __future__ import annotations

from pathlib import Path

from inductor_lens.records import CompileRun

# The bug lives in the compiled code only: eager never runs Inductor's pattern passes.
PLANTED = '''import torch
from torch import nn
from torch._inductor.fx_passes.post_grad import pass_patterns
from torch._inductor.pattern_matcher import Arg, CallFunction, register_graph_pattern


@register_graph_pattern(CallFunction(torch.ops.aten.mul.Tensor, Arg(), 0.5), pass_dict=pass_patterns[1])
def scale_wrongly(match, x):
    node = match.output_node()
    node.args = (node.args[0], 0.5 * 1.01)  # in place: the node keeps its name


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 32)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = torch.tanh(h) * 0.5
        return torch.sigmoid(self.fc2(h))


def get_model():
    return Net().eval()


def get_inputs():
    return (torch.randn(16, 64),)
'''


def test_planted_bug_is_named_by_kernel_and_line(run_cli, tmp_path: Path) -> None:
    model = tmp_path / "planted.py"
    model.write_text(PLANTED)
    out = tmp_path / "report"
    # a budget spent by the first option re-run: the next one is listed as not tried
    result = run_cli("compile", model, "--device", "cpu", "--no-bench", "--no-handwritten", "--find-divergence",
                     "--divergence-budget", "0.5", "--out", out)  # fmt: skip
    assert result.code == 0, result.stderr
    run = CompileRun.from_json((out / "lens.json").read_text())
    assert run.capture is not None and run.capture.accuracy is not None
    assert not run.capture.accuracy.within_tolerance
    found = run.capture.divergence
    assert found is not None and found.status == "diverged", found
    first = found.first
    assert first is not None
    assert (first.target, first.kind, first.buffer, first.node) == ("cpp_fused_mul_relu_tanh_0", "cpp", "buf1", "mul")
    assert first.source is not None and (first.source.filename, first.source.line) == (str(model), 21)
    assert first.source.code == "h = torch.tanh(h) * 0.5"
    # the kernel before it (the first addmm) agrees exactly: it is the first
    assert [(c.target, c.within) for c in found.checks] == [("extern_kernels.addmm", True), (first.target, False)]
    assert found.checks[0].max_abs_error == 0.0 and found.earlier == 0
    assert first.max_abs_error is not None and 4e-3 < first.max_abs_error < 6e-3  # 1% of tanh's 0.5 at most
    trials = {t.option: (t.outcome, t.detail) for t in found.options}
    assert trials["pattern_matcher"] == ("fixes", "")
    assert trials["cpp.simdlen"] == ("not tried", "the 0.5 s budget was spent")
    assert trials["fallback_random"] == ("not tried", "no random ops in the graphs")
    assert trials["epilogue_fusion"] == ("not tried", "a cuda option (the model runs on cpu)")
    assert ("inductor-lens: first diverging kernel: cpp_fused_mul_relu_tanh_0 (buf1 = mul, planted.py:21): "
            in result.stderr and "made to agree by pattern_matcher=False" in result.stderr)  # fmt: skip
    # the overview: the kernel linked to its page, the line to source.html, the table, the fix
    (graph,) = run.graphs
    page = (out / "index.html").read_text()
    section = page[page.index('id="divergence"') : page.index('id="capture"')]
    assert f'href="kernels/{graph.id}/cpp_fused_mul_relu_tanh_0.html"' in section
    assert 'href="source.html#f0-L21"' in section
    assert section.count('<tr class="bad">') == 1 and "<code>pattern_matcher=False</code>" in section
    assert "first diverging kernel: cpp_fused_mul_relu_tanh_0" in page  # the verdict card


def test_a_model_that_agrees_raises_no_alarm() -> None:
    """In this process (no planted pattern here): every buffer of an MLP with a LayerNorm judged, none out of bounds."""
    import torch

    from inductor_lens.worker.divergence import search

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.LayerNorm(256),
                                torch.nn.Linear(256, 64), torch.nn.Softmax(-1)).eval()  # fmt: skip
    x = torch.randn(32, 64)

    def one_step(fn):
        with torch.no_grad():
            fn(x)

    found = search(model, one_step, {}, device="cpu", fullgraph=False, dynamic=None)
    assert found.status == "agrees", found
    assert found.first is None and found.options == () and found.error is None
    assert found.compared >= 4 and all(c.within for c in found.checks)
    (graph,) = found.graphs
    assert graph.launches >= 4 and any(k.startswith("cpp_fused") for k in graph.kernels)


def test_a_training_step_compares_the_backward_graph_too() -> None:
    """With a backward (--train), both graphs' buffers are judged: the forward's and the backward's."""
    import torch

    from inductor_lens.worker.divergence import search
    from inductor_lens.worker.model_run import backward_step

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 8))
    x = torch.randn(16, 32)

    def one_step(fn):
        backward_step(fn(x))

    found = search(model, one_step, {}, device="cpu", fullgraph=False, dynamic=None)
    assert found.status == "agrees", found
    assert len(found.graphs) == 2 and all(g.launches >= 1 for g in found.graphs)
    assert not any("not compared" in note for note in found.skipped), found.skipped
