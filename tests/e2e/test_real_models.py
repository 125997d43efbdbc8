"""End to end on CPU: the real-model corpus (``samples/real/``, HuggingFace transformers with random weights).

Every CPU model file compiles with ``--strict``; what lens.json says is checked against the raw capture:
graphs against the ``model__*`` folders of torch_compile_debug, kernels against the ``async_compile``
definitions and ``def call`` of each ``output_code.py``, Dynamo frames, graph breaks and recompiles against
the records of the TORCH_TRACE log. With torch 2.13 and the pinned transformers (``pip install -e '.[real]'``)
the counts are also compared with the numbers below. A compile is shared by every test that reads it
(module-scoped, in this process through the CLI's entry point; the model still runs in its own process).
About 6 minutes on 2 CPU cores.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..conftest import SAMPLES, CliResult, run_cli_process

transformers = pytest.importorskip(
    "transformers", reason="the real-model corpus needs transformers (make test installs it)"
)
import torch  # noqa: E402  (after the skip: a machine without transformers skips the module)

REAL = SAMPLES / "real"
CPU_MODELS = ("gpt2", "llama", "bert", "vit", "convnext")
DYNAMIC_MODEL = "llama_dynamic"
GPU_ONLY = {"torchvision_resnet50": "torchvision", "timm_vit": "timm"}  # file -> the library it needs
SCRIPTS = ("train_gpt2", "train_gpt2_ddp")
# Several ranks (tests/e2e/test_ranks_models_cpu.py): DDP, FSDP2 and an unchanged torchrun DDP script.
RANKED = ("gpt2_ddp", "llama_fsdp2")
# The versions the expected counts were taken with; other versions still get every raw-vs-lens check.
PINNED = torch.__version__.startswith("2.13.") and transformers.__version__ == "5.17.0"


@dataclass(frozen=True)
class Counts:
    graphs: int
    kernels: int  # kernel definitions over all graphs (a kernel launched once per layer counts once)
    frames: int
    breaks: int = 0
    recompiles: int = 0


EXPECTED = {
    # GPT-2's loss_function logs a warning Dynamo cannot trace: three break records (the frame that
    # restarts, the model's forward, loss_function), the loss in a graph of its own, five frames.
    ("gpt2",): Counts(graphs=2, kernels=8, frames=5, breaks=3),
    ("gpt2", "--train"): Counts(graphs=4, kernels=15, frames=5, breaks=3),
    ("gpt2", "--dtype", "bf16"): Counts(graphs=2, kernels=8, frames=5, breaks=3),
    ("llama",): Counts(graphs=1, kernels=10, frames=1),
    ("llama", "--dtype", "bf16"): Counts(graphs=1, kernels=10, frames=1),
    ("bert",): Counts(graphs=1, kernels=5, frames=1),
    ("bert", "--train"): Counts(graphs=2, kernels=15, frames=1),
    ("vit",): Counts(graphs=1, kernels=8, frames=1),
    ("vit", "--train"): Counts(graphs=2, kernels=16, frames=1),
    ("convnext",): Counts(graphs=1, kernels=13, frames=1),
    ("convnext", "--train"): Counts(graphs=2, kernels=34, frames=1),
    (DYNAMIC_MODEL,): Counts(graphs=2, kernels=20, frames=2, recompiles=1),
}
FAST = ("--no-bench", "--no-handwritten")  # the counts do not need timing or the hand-written kernels...
TIMED = ("bert",)  # ...but these models' compiles keep both, and their tests check them


@pytest.fixture(scope="module")
def compiled(
    tmp_path_factory: pytest.TempPathFactory, run_cli_shared: Callable[..., CliResult]
) -> Callable[..., tuple[CliResult, Path]]:
    """compiled(model, *flags) -> (CLI result, report folder) of ``compile samples/real/MODEL.py --strict``
    on CPU, made once per module and shared by the tests that ask for the same compile."""
    cache: dict[tuple[str, ...], tuple[CliResult, Path]] = {}

    def get(model: str, *flags: str, strict: bool = True, fast: bool = True) -> tuple[CliResult, Path]:
        key = (model, *flags, *(() if strict else ("(not strict)",)), *(FAST if fast else ()))
        if key not in cache:
            out = tmp_path_factory.mktemp(model) / "report"
            args = ["compile", REAL / f"{model}.py", "--device", "cpu", "--out", out, *flags]
            args += ["--strict"] if strict else []
            args += list(FAST) if fast else []
            cache[key] = (run_cli_shared(*args), out)
        return cache[key]

    return get


def _lens(report: Path) -> dict:
    return json.loads((report / "lens.json").read_text())["run"]


# --- the raw capture --------------------------------------------------------------------------------------

_KERNEL_DEFINITION = re.compile(r"^(\w+) = async_compile\.\w+\(", re.MULTILINE)
_DEF_CALL = re.compile(r"^\s*def call\(", re.MULTILINE)


def raw_graphs(report: Path) -> dict[str, list[str]]:
    """Each ``model__*`` graph folder of the capture, with the kernels its output_code.py defines."""
    graphs: dict[str, list[str]] = {}
    for folder in sorted((report / "capture" / "torch_compile_debug").glob("run_*/torchinductor/model__*")):
        if not folder.is_dir():
            continue
        code = (folder / "output_code.py").read_text()
        assert len(_DEF_CALL.findall(code)) == 1, f"{folder.name}: not one def call()"
        graphs[folder.name] = _KERNEL_DEFINITION.findall(code)
    return graphs


def raw_trace(report: Path) -> dict[str, list[dict]]:
    """The TORCH_TRACE records (one JSON object per line that is not a payload line), by kind."""
    records: dict[str, list[dict]] = {}
    for log in (report / "capture" / "trace").glob("*.log"):
        for line in log.read_text().splitlines():
            if line.startswith("\t") or "{" not in line:
                continue
            record = json.loads(line[line.index("{") :])
            kind = next(iter(record))
            if kind == "artifact":
                kind = f"artifact:{record['artifact']['name']}"
            records.setdefault(kind, []).append(record)
    return records


def assert_counts_match_capture(report: Path, expected: Counts | None) -> Counts:
    """lens.json against the raw capture, and both against the expected counts when the versions match."""
    run = _lens(report)
    graphs = raw_graphs(report)
    assert sorted(g["id"] for g in run["graphs"]) == sorted(graphs)
    for graph in run["graphs"]:
        assert sorted(k["name"] for k in graph["kernels"]) == sorted(graphs[graph["id"]]), graph["id"]
    trace = raw_trace(report)
    metrics = [r["compilation_metrics"] for r in trace.get("compilation_metrics", [])]
    recompiled = [m for m in metrics if not m["compile_id"].endswith("/0")]
    assert len(run["frames"]) == len(metrics)
    assert len(run["graph_breaks"]) == len(trace.get("artifact:dynamo_graph_break_reason", []))
    assert len([f for f in run["frames"] if f["recompile_reasons"]]) == len(recompiled)
    found = Counts(
        graphs=len(graphs),
        kernels=sum(len(k) for k in graphs.values()),
        frames=len(metrics),
        breaks=len(run["graph_breaks"]),
        recompiles=len(recompiled),
    )
    if PINNED and expected is not None:
        assert found == expected
    return found


def assert_clean_agreeing_capture(run: dict) -> None:
    capture = run["capture"]
    assert capture["status"] == "ok" and capture["phase"] == "done"
    assert run["stats"]["diagnostics"] == []
    accuracy = capture["accuracy"]
    assert accuracy["reference"] == "float64" and accuracy["within_tolerance"] is True, accuracy
    kernels = [k for g in run["graphs"] for k in g["kernels"]]
    assert kernels and all(k["backend"] == "cpp" for k in kernels)


# --- the corpus -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", CPU_MODELS)
def test_model_compiles_strict(compiled: Callable[..., tuple[CliResult, Path]], model: str) -> None:
    result, report = compiled(model, fast=model not in TIMED)
    assert result.code == 0, result.stderr
    run = _lens(report)
    assert_clean_agreeing_capture(run)
    assert all(g["kind"] == "inference" for g in run["graphs"])
    counts = assert_counts_match_capture(report, EXPECTED[(model,)])
    assert f"{counts.graphs} graph(s), {counts.kernels} kernel(s)" in result.stderr
    assert "compiled agrees with eager" in (report / "index.html").read_text()
    # keyword inputs reach the model and are described by name
    assert all("=" in line for line in run["capture"]["inputs"]), run["capture"]["inputs"]


@pytest.mark.parametrize("model", ["gpt2", "bert", "vit", "convnext"])
def test_model_compiles_with_train(compiled: Callable[..., tuple[CliResult, Path]], model: str) -> None:
    result, report = compiled(model, "--train")
    assert result.code == 0, result.stderr
    run = _lens(report)
    assert_clean_agreeing_capture(run)
    kinds = [g["kind"] for g in run["graphs"]]
    assert kinds.count("forward") == kinds.count("backward") >= 1 and len(kinds) == 2 * kinds.count("forward")
    assert run["capture"]["accuracy"]["compared"] == "outputs and parameter gradients"
    grads = [c for c in run["capture"]["accuracy"]["checks"] if c["kind"] == "gradient"]
    assert grads and all(c["within"] for c in grads)
    assert_counts_match_capture(report, EXPECTED[(model, "--train")])


def test_gpt2_graph_break_in_library_code(compiled: Callable[..., tuple[CliResult, Path]]) -> None:
    """HF's loss_function logs through ``logging``: a graph break inside transformers, not in the model file."""
    result, report = compiled("gpt2")
    assert result.code == 0, result.stderr
    run = _lens(report)
    assert run["graph_breaks"]
    for graph_break in run["graph_breaks"]:
        assert graph_break["reason"].startswith("logging.Logger method not supported")
        assert graph_break["location"]["filename"].endswith("transformers/modeling_utils.py")
    functions = [f["function"] for f in run["frames"]]
    assert {"forward", "loss_function", "ForCausalLMLoss"} <= set(functions)
    (loss_graph,) = [
        g for g in run["graphs"] if g["compile_id"].startswith(_frame_id(run, "ForCausalLMLoss"))
    ]
    (loss_kernel,) = loss_graph["kernels"]
    assert "nll_loss_forward" in loss_kernel["name"] and "_log_softmax" in loss_kernel["name"]


def _frame_id(run: dict, function: str) -> str:
    (frame,) = [f for f in run["frames"] if f["function"] == function]
    return frame["compile_id"]


def test_llama_kernels(compiled: Callable[..., tuple[CliResult, Path]]) -> None:
    """RMSNorm, RoPE and SwiGLU each end up in the kernels the docstring of llama.py names."""
    result, report = compiled("llama")
    assert result.code == 0, result.stderr
    (graph,) = _lens(report)["graphs"]
    names = [k["name"] for k in graph["kernels"]]
    rmsnorm = [n for n in names if "mean_mul_pow_rsqrt" in n]
    assert len(rmsnorm) == 5, names  # two per layer and the final norm
    assert sum("mul_silu" in n for n in names) == 1, names  # SwiGLU's silu(gate) * up, shared by both layers
    assert sum("cat_neg_slice" in n for n in names) == 2, names  # rotate-half of q and of k
    code = "".join((f / "output_code.py").read_text() for f in _graph_folders(report))
    assert code.count("torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(") == 2


def test_bert_padding_mask_reaches_attention(compiled: Callable[..., tuple[CliResult, Path]]) -> None:
    result, report = compiled("bert", fast=False)
    assert result.code == 0, result.stderr
    run = _lens(report)
    assert "attention_mask=int64[2, 48] on cpu" in run["capture"]["inputs"]
    code = "".join((f / "output_code.py").read_text() for f in _graph_folders(report))
    assert (
        len(re.findall(r"_scaled_dot_product_flash_attention_for_cpu\.default\([^\n]*attn_mask=", code)) == 2
    )


def _graph_folders(report: Path) -> list[Path]:
    return sorted((report / "capture" / "torch_compile_debug").glob("run_*/torchinductor/model__*"))


def test_bert_timed_and_handwritten(compiled: Callable[..., tuple[CliResult, Path]]) -> None:
    """One real model with everything on: timing on CPU and the hand-written kernels checked."""
    result, report = compiled("bert", fast=False)
    assert result.code == 0, result.stderr
    run = _lens(report)
    bench = run["bench"]
    assert bench["error"] is None and bench["end_to_end"]["compiled"]["median_ms"] > 0
    kernels = [k for g in run["graphs"] for k in g["kernels"]]
    assert all(k["timing"]["in_context_us"] > 0 for k in kernels)
    runs = [r for m in run["handwritten"] for r in m["runs"]]
    assert runs and all(r["ok"] is True and r["error"] is None for r in runs), runs
    assert {"layernorm", "gelu"} <= {r["name"] for r in runs}


@pytest.mark.parametrize("model", ["llama", "gpt2"])
def test_bf16_agrees_with_eager(compiled: Callable[..., tuple[CliResult, Path]], model: str) -> None:
    result, report = compiled(model, "--dtype", "bf16")
    assert result.code == 0, result.stderr
    run = _lens(report)
    assert_clean_agreeing_capture(run)
    assert run["settings"]["dtype"] == "bfloat16"
    logits = next(c for c in run["capture"]["accuracy"]["checks"] if c["name"] == "logits")
    assert logits["tensor"].startswith("bfloat16[") and logits["within"] is True
    assert "compiled agrees with eager" in (report / "index.html").read_text()
    assert_counts_match_capture(report, EXPECTED[(model, "--dtype", "bf16")])


# --- dynamic shapes ---------------------------------------------------------------------------------------


def test_dynamic_lengths_recompile_once(compiled: Callable[..., tuple[CliResult, Path]]) -> None:
    """Three lengths: a graph for the first, a recompile into a dynamic graph for the second, reused by the third;
    --strict: symbolic sizes are parsed like any other."""
    result, report = compiled(DYNAMIC_MODEL)
    assert result.code == 0, result.stderr
    run = _lens(report)
    assert run["capture"]["accuracy"]["within_tolerance"] is True
    assert run["capture"]["calls"] == 3
    assert [f["compile_id"] for f in run["frames"]] == ["0/0", "0/1"]
    (recompiled,) = [f for f in run["frames"] if f["recompile_reasons"]]
    assert "size mismatch at index 1. expected 32, actual 48" in recompiled["recompile_reasons"][0]
    assert_counts_match_capture(report, EXPECTED[(DYNAMIC_MODEL,)])
    dynamic_code = (_graph_folders(report)[1] / "output_code.py").read_text()
    assert re.search(r"\bs\d+\b", dynamic_code), "the second graph has no symbolic size"
    assert run["stats"]["diagnostics"] == [] or all(d["level"] == "note" for d in run["stats"]["diagnostics"])
    symbols = [s for g in run["graphs"] for s in g["symbols"]]
    assert symbols and all(s["hint"] == 48 for s in symbols if "size()[1]" in (s.get("source") or ""))


# --- a wrong compiled result is caught --------------------------------------------------------------------

RELU_MODEL = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 256)
        self.fc2 = nn.Linear(256, 32)

    def forward(self, x):
        hidden = self.fc1(x)  # an extern addmm: untouched by the injected bug
        return {"hidden": hidden, "scores": self.fc2(torch.relu(hidden))}

def get_model():
    return Net().eval()

def get_inputs():
    return {"x": torch.randn(16, 64)}
"""


def test_injected_relu_bug_differs_from_eager(
    tmp_path: Path, run_cli_shared: Callable[..., CliResult]
) -> None:
    """Inductor's own fault injection (``cpp.inject_relu_bug_TESTING_ONLY=accuracy`` adds 1 after every
    ReLU of a C++ kernel): the float64 verdict must say "differs from eager" and name the tensor."""
    model = tmp_path / "relu_mlp.py"
    model.write_text(textwrap.dedent(RELU_MODEL))
    out = tmp_path / "report"
    result = run_cli_shared(
        "compile", model, "--device", "cpu", "--out", out, "--strict", *FAST,
        "--option", "cpp.inject_relu_bug_TESTING_ONLY=accuracy",
    )  # fmt: skip
    # The verdict is recorded in the report and said on the command line; it is not an exit status (the
    # compile itself succeeded).
    assert result.code == 0, result.stderr
    assert "inductor-lens: accuracy: the compiled model differs from eager: scores (" in result.stderr
    run = _lens(out)
    accuracy = run["capture"]["accuracy"]
    assert accuracy["reference"] == "float64" and accuracy["within_tolerance"] is False, accuracy
    verdicts = {c["name"]: c["within"] for c in accuracy["checks"]}
    assert verdicts == {"hidden": True, "scores": False}, accuracy["checks"]
    (failing,) = [c for c in accuracy["checks"] if not c["within"]]
    assert failing["tensor"] == "float32[16, 32]" and failing["compiled_rmse"] > 1000 * failing["eager_rmse"]
    assert run["settings"]["options"] == {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}
    index = (out / "index.html").read_text()
    accuracy_section = index.split('id="accuracy"', 1)[1].split("<h2", 1)[0]
    assert "compiled differs from eager" in accuracy_section and "scores" in accuracy_section


# --- the training script ----------------------------------------------------------------------------------

_LOSS_LINE = re.compile(r"^length (\d+) step (\d+)/(\d+): loss ([\d.]+) ", re.MULTILINE)


def _train(tmp_path: Path, *args: str) -> list[tuple[int, float]]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "inductor-cache")  # cold, and not the user's cache
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton-cache")
    completed = subprocess.run(
        [sys.executable, REAL / "train_gpt2.py", "--device", "cpu", *args],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    return [(int(m[1]), float(m[4])) for m in _LOSS_LINE.finditer(completed.stdout)]


def test_training_script_two_lengths(tmp_path: Path) -> None:
    """train_gpt2.py runs as a plain script: compiled, two sequence lengths, the losses of eager."""
    compiled = _train(tmp_path, "--steps", "2", "--lengths", "16", "24")
    eager = _train(tmp_path, "--steps", "2", "--lengths", "16", "24", "--eager")
    assert [length for length, _ in compiled] == [16, 16, 24, 24]
    assert [length for length, _ in eager] == [16, 16, 24, 24]
    for (_, got), (_, want) in zip(compiled, eager, strict=True):
        assert got == pytest.approx(want, abs=2e-3)


# --- the files of the corpus ------------------------------------------------------------------------------


def test_every_corpus_file_is_tested_and_documented() -> None:
    files = {p.stem for p in REAL.glob("*.py")}
    assert files == {*CPU_MODELS, DYNAMIC_MODEL, *GPU_ONLY, *SCRIPTS, *RANKED}
    for name in files:
        tree = ast.parse((REAL / f"{name}.py").read_text())
        docstring = ast.get_docstring(tree) or ""
        assert "What to look for" in docstring or "What a capture of it should show" in docstring, name
        functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        if name in SCRIPTS:
            assert "main" in functions and not {"get_model", "get_inputs"} & functions, name
        else:
            assert {"get_model", "get_inputs"} <= functions, name


@pytest.mark.parametrize("name", sorted(GPU_ONLY))
def test_gpu_only_model_file(tmp_path: Path, run_cli_shared: Callable[..., CliResult], name: str) -> None:
    """torchvision/timm have no build for this CPU torch: without them the file says what it needs;
    with them and a GPU (the GPU machine), it compiles there with --strict."""
    library = GPU_ONLY[name]
    if importlib.util.find_spec(library) is None:
        spec = importlib.util.spec_from_file_location(f"real_{name}", REAL / f"{name}.py")
        assert spec is not None and spec.loader is not None
        with pytest.raises(ImportError, match=f"needs {library}"):
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
        pytest.skip(f"{library} is not installed (the GPU machine has it)")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    out = tmp_path / "report"
    result = run_cli_shared(
        "compile", REAL / f"{name}.py", "--device", "cuda", "--out", out, "--strict", *FAST
    )
    assert result.code == 0, result.stderr
    run = _lens(out)
    assert run["capture"]["accuracy"]["within_tolerance"] is True
    assert_counts_match_capture(out, None)


def test_run_captures_the_training_script(tmp_path: Path) -> None:
    """``inductor-lens run`` around train_gpt2.py, unchanged: forward, backward and optimizer graphs, and a
    recompile at the second length (``--recompile``: Dynamo's automatic dynamic shapes, not mark_dynamic)."""
    out = tmp_path / "report"
    result = run_cli_process(
        "run", "--out", out, "--warmup", "1", "--steps", "2", "--no-handwritten", "--",
        "python", REAL / "train_gpt2.py", "--device", "cpu", "--steps", "2", "--lengths", "16", "24",
        "--recompile", "--compile-optimizer", cwd=tmp_path, timeout=900,
    )  # fmt: skip
    assert result.code == 0, result.stderr[-3000:]
    run = _lens(out)
    calls = {c["target"]: c["applied"] for c in run["capture"]["compile_calls"]}
    # (AdamW's step is Adam.step in torch 2.13: the qualified name of the function compiled)
    assert set(calls) == {"GPT2LMHeadModel", "Adam.step"}, calls
    frames = {f["compile_id"]: f for f in run["frames"]}
    kinds: dict[str | None, list[str]] = {}
    for graph in run["graphs"]:
        function = frames[graph["compile_id"]]["function"] if graph["compile_id"] in frames else None
        kinds.setdefault(function, []).append(graph["kind"])
    # the model (forward and backward at each length; the loss, after HF's graph break, the same) ...
    assert kinds["forward"].count("forward") >= 2 and kinds["forward"].count("backward") >= 2, kinds
    # ... and the optimizer step: an inference graph of AdamW's update
    assert "inference" in kinds.get("step", []) or "inference" in kinds.get("_use_grad", []), kinds
    assert any("size mismatch" in r for f in run["frames"] for r in f["recompile_reasons"]), "no recompile"
    assert run["bench"]["step"]["steps"] == 2 and run["bench"]["step"]["attributed_us"] > 0
