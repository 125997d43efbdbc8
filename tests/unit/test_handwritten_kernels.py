"""Every hand-written Triton kernel against its torch reference, on CPU tensors under Triton's interpreter.

Odd, tiny and block-crossing shapes in every dtype the interpreter runs correctly (bfloat16 dot
products are checked on a GPU instead: benchmarks/handwritten_gpu.py and tests/gpu/test_gpu.py). Sizes
stay small: the interpreter runs each program in numpy.
"""

from __future__ import annotations

import ast

import pytest

from inductor_lens.handwritten.catalog import EQUIVALENTS
from inductor_lens.handwritten.source import KERNELS_DIR
from inductor_lens.worker.handwritten import check

SHAPES = {
    "elementwise": [(1, 1), (3, 5), (37, 1031), (2, 9000), (5, 48), (33, 1040)],
    # 9000 and 20000 columns take the looped (online) path of the row kernels
    "row-wise": [(1, 1), (3, 5), (37, 1031), (2, 9000), (2, 20000)],
    "matmul": [(1, 1, 1), (3, 5, 7), (17, 33, 65), (129, 70, 100)],
    "attention": [(1, 1, 1, 16), (1, 2, 5, 16), (1, 1, 17, 40), (1, 2, 70, 32)],
}
CASES = [
    pytest.param(e.name, shape, dtype, id=f"{e.name}-{'x'.join(map(str, shape))}-{dtype}")
    for e in EQUIVALENTS
    for shape in e.check_shapes or SHAPES[e.family]
    for dtype in e.interpreter_dtypes
]


@pytest.mark.parametrize(("name", "shape", "dtype"), CASES)
def test_kernel_agrees_with_torch(name: str, shape: tuple[int, ...], dtype: str) -> None:
    equivalent = check.get(name)
    result = check.check(name, equivalent.shape(shape), dtype, "cpu")
    assert result.interpreter
    assert result.ok, result.line()
    assert all(e.max_rel == e.max_rel for e in result.errors)  # no NaN slipped through


def test_every_catalog_entry_has_its_implementation_and_kernels() -> None:
    for equivalent in EQUIVALENTS:
        implementation = check.implementation(equivalent, "cpu")
        names = tuple(getattr(k, "__name__", None) or k.fn.__name__ for k in implementation.kernels)
        assert names == equivalent.kernels, equivalent.name


def test_a_wrong_kernel_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    implementation = check.implementation(check.get("softmax"), "cpu")
    wrong = type(implementation)(
        run=lambda x: implementation.run(x) * 1.001,
        reference=implementation.reference,
        make_inputs=implementation.make_inputs,
        kernels=implementation.kernels,
    )
    monkeypatch.setattr(check, "implementation", lambda equivalent, device: wrong)
    result = check.check("softmax", {"rows": 3, "cols": 5}, "float32", "cpu")
    assert not result.ok and result.line().startswith("MISMATCH: softmax 3x5 float32")


def test_only_triton_kernels_go_unannotated() -> None:
    """pyproject.toml lets mypy pass unannotated functions in the kernel modules for the @triton.jit ones."""
    unannotated = []
    for path in sorted(KERNELS_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef) or any(
                ast.unparse(d).startswith("triton.jit") for d in node.decorator_list
            ):
                continue
            arguments = node.args
            parameters = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
            parameters += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
            if node.returns is None or any(a.annotation is None and a.arg != "self" for a in parameters):
                unannotated.append(f"{path.name}:{node.lineno} {node.name}")
    assert not unannotated


def test_shown_source_defines_every_jit_helper_it_calls() -> None:
    """The report's source of an entry is readable on its own: each @triton.jit function of the module that a
    shown kernel calls is shown too (conv2d's _pixel, cross-entropy's _row_span, the GELU's Φ)."""
    from inductor_lens.handwritten.source import kernel_source

    for equivalent in EQUIVALENTS:
        module = ast.parse((KERNELS_DIR / f"{equivalent.module}.py").read_text())
        jit = {
            node.name
            for node in module.body
            if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list)
        }
        shown = ast.parse(kernel_source(equivalent.name))
        defined = {node.name for node in shown.body if isinstance(node, ast.FunctionDef)}
        called = {
            node.func.id
            for node in ast.walk(shown)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in jit
        }
        assert called <= defined, (equivalent.name, called - defined)
        assert set(equivalent.kernels) <= defined, equivalent.name


@pytest.mark.parametrize("k_contiguous_b", [True, False], ids=["weight-t", "row-major-b"])
@pytest.mark.parametrize(("shape", "activation"), [((40, 48, 40), "gelu"), ((64, 64, 64), "relu"), ((48, 32, 24), "none")])
def test_persistent_tma_form_agrees_with_torch(
    shape: tuple[int, int, int], activation: str, k_contiguous_b: bool
) -> None:
    """matmul's persistent TMA form (Hopper, 16-bit) under the interpreter: fewer programs than tiles, so each
    walks several; edges and a K tail zero-filled by the descriptors. float16: the interpreter's descriptors
    misread bfloat16 (the GPU checks that: benchmarks/matmul_tma_gpu.py)."""
    import torch
    import triton

    from inductor_lens.worker.handwritten.kernels.matmul import _config, _reference, matmul_with

    M, N, K = shape
    g = torch.Generator().manual_seed(0)
    a = torch.randn(M, K, generator=g).half()
    b = (torch.randn(N, K, generator=g) * K**-0.5).half().t() if k_contiguous_b else (
        torch.randn(K, N, generator=g) * K**-0.5).half()  # fmt: skip
    bias = torch.randn(N, generator=g).half()
    c = torch.full((M, N), float("nan"), dtype=torch.float16)
    programs = 3
    assert triton.cdiv(M, 16) * triton.cdiv(N, 16) > programs
    config = _config(16, 16, 16, 3, 4, TMA_PERSISTENT=True)
    config.kwargs["GROUP_M"] = 2
    matmul_with(config, a, b, bias, activation, out=c, num_sms=programs)
    expected = _reference(activation)(a.float(), b.float(), bias.float())
    torch.testing.assert_close(c.float(), expected, atol=2e-3, rtol=2e-3)


def test_the_persistent_form_is_pruned_off_the_gpu() -> None:
    """On a CPU (or a GPU other than sm_90, or 32-bit inputs) the search never times the TMA form."""
    import torch

    from inductor_lens.worker.handwritten.kernels.matmul import AUTOTUNE_CONFIGS, _prune

    a, b = torch.zeros(4096, 1024, dtype=torch.bfloat16), torch.zeros(1024, 4096, dtype=torch.bfloat16)
    c = torch.zeros(4096, 4096, dtype=torch.bfloat16)
    named = {"a_ptr": a, "b_ptr": b, "c_ptr": c, "M": 4096, "N": 4096, "K": 1024, "stride_am": 1024,
             "stride_ak": 1, "stride_bk": 4096, "stride_bn": 1, "stride_cm": 4096, "stride_cn": 1}  # fmt: skip
    kept = _prune(AUTOTUNE_CONFIGS, named)
    assert kept and not any(c.kwargs.get("TMA_PERSISTENT") for c in kept)
    assert any(c.kwargs.get("TMA_PERSISTENT") for c in AUTOTUNE_CONFIGS)
