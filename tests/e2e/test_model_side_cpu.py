"""End to end on CPU, the model side of issue 30: the model's own frame and lines on the samples (never a file
of torch's), a HuggingFace model's cache judged tensor by tensor, and ``--train`` backpropagating the loss the
model returns. Real compiles in model processes (``--no-bench --no-handwritten``: about a minute each on 2
cores, the Llama one about three)."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from ..conftest import SAMPLES, run_cli_process

TORCH_FILE = re.compile(r"/(site|dist)-packages/torch/")


def _compile(tmp_path: Path, model: Path, *args: str) -> dict:
    result = run_cli_process(
        "compile", model, "--device", "cpu", "--out", tmp_path / "report", "--strict", "--no-bench",
        "--no-handwritten", *args, cwd=tmp_path,
    )  # fmt: skip
    assert result.code == 0, result.stderr
    return json.loads((tmp_path / "report" / "lens.json").read_text())["run"]


@pytest.mark.parametrize(
    ("sample", "frame"),
    [
        # nn.Sequential of torch's modules: compiled through torch's wrap_inline frame; the frame is the model
        # where get_model() built it
        ("mlp", ("Sequential", "mlp.py", 13)),
        ("convnet", ("Sequential", "convnet.py", 13)),
        # a module of the model file: its forward is the frame, its lines are the kernels' source lines
        ("block", ("forward", "block.py", 25)),
    ],
)
def test_the_frame_and_lines_are_the_models_own(tmp_path: Path, sample: str, frame: tuple[str, str, int]) -> None:
    run = _compile(tmp_path, SAMPLES / f"{sample}.py")
    frames = [(f["function"], Path(f["filename"]).name, f["line"]) for f in run["frames"]]
    assert frames == [frame]
    assert [Path(s["path"]).name for s in run["sources"]] == [f"{sample}.py"]
    lines = [line for g in run["graphs"] for k in g["kernels"] for line in k["source_lines"]]
    assert not any(TORCH_FILE.search(line["filename"]) for line in lines)
    if sample == "block":
        assert lines and {Path(line["filename"]).name for line in lines} == {"block.py"}
    assert run["capture"]["model_built"][0]["function"] == ("Block" if sample == "block" else frame[0])
    report = tmp_path / "report"
    for page in ("index.html", "source.html", *(str(p.relative_to(report)) for p in report.glob("graphs/*.html"))):
        assert "external_utils" not in (report / page).read_text(), page
    source = (report / "source.html").read_text()
    if sample == "mlp":
        assert "built here: 0: Linear" in source and "built here: 2: Linear" in source
        assert "The model is a <code>Sequential</code> of torch's own modules" in source


def test_a_hf_cache_is_judged_and_train_backpropagates_the_loss(tmp_path: Path) -> None:
    """samples/real/llama.py asked for its key/value cache (``use_cache=True``, a DynamicCache in
    ``past_key_values``) and given ``labels`` (a ``loss`` in its output), with --train."""
    model = tmp_path / "llama_cache.py"
    model.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(SAMPLES / "real")!r})
        import llama


        def get_model():
            return llama.get_model()


        def get_inputs():
            inputs = llama.get_inputs()
            return {{**inputs, "labels": inputs["input_ids"], "use_cache": True}}
    """))
    run = _compile(tmp_path, model, "--train")
    capture = run["capture"]
    cache = [f"past_key_values.layers[{i}].{kind}" for i in (0, 1) for kind in ("keys", "values")]
    assert [o.split(":")[0] for o in capture["outputs"]] == ["loss", "logits", *cache]
    accuracy = capture["accuracy"]
    assert accuracy["within_tolerance"] and accuracy["skipped"] == [] and accuracy["findings"] == []
    judged = {c["name"] for c in accuracy["checks"]}
    assert set(cache) <= judged and "logits" in judged
    assert accuracy["checked"] == 6 + 21  # the 6 output tensors and the gradients of the 21 parameters
    assert run["settings"]["backward"] == "outputs.loss"
    assert "forward + backward of outputs.loss" in (tmp_path / "report" / "index.html").read_text()


def test_a_forward_calling_a_module_level_function_compiles(tmp_path: Path) -> None:
    """Dynamo looks a traced function's globals up by its module's name: the model file must be in sys.modules
    (it once failed with "No module named 'inductor_lens_model_<stem>'")."""
    model = tmp_path / "helpers_model.py"
    model.write_text(
        textwrap.dedent(
            """\
            import torch
            from torch import nn


            def scaled_relu(x):
                return torch.relu(x) * 2


            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.linear = nn.Linear(16, 16)

                def forward(self, x):
                    return scaled_relu(self.linear(x))


            def get_model():
                return nn.Sequential(Block(), Block())


            def get_inputs():
                return (torch.randn(4, 16),)
            """
        )
    )
    run = _compile(tmp_path, model)
    assert run["capture"]["status"] == "ok" and run["capture"]["accuracy"]["within_tolerance"] is True
    assert [len(graph["kernels"]) for graph in run["graphs"]] == [1]  # both blocks' relu*2 in one C++ kernel
