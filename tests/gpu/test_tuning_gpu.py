"""On a CUDA device: the shipped tuning table serves the shapes it was made from, and the tuned matmul_bias
computes what torch does (the float32 path that copies a transposed weight included). Skipped without a GPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def _sm90() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


@pytest.mark.skipif(not _sm90(), reason="the shipped table is sm_90's (H100, H200)")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_table_shape_launches_the_tables_configuration_and_is_right(dtype: str) -> None:
    from inductor_lens.handwritten import tuning
    from inductor_lens.handwritten.check import check

    with tuning.recording() as used:
        result = check("matmul_bias", {"M": 4096, "N": 2304, "K": 768}, dtype, "cuda")
    assert result.ok, result.line()
    assert [c.origin for c in used] == ["table"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU")
@pytest.mark.parametrize("rows", [64, 1000])
def test_float32_products_of_a_transposed_weight_are_right_either_side_of_the_copy(rows: int) -> None:
    from inductor_lens.handwritten.kernels import load

    matmul = load("matmul", interpret=False)["matmul_bias"].run
    generator = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(rows, 384, device="cuda", generator=generator)
    weight = torch.randn(1152, 384, device="cuda", generator=generator) * 384**-0.5
    bias = torch.randn(1152, device="cuda", generator=generator)
    expected = torch.addmm(bias.double(), a.double(), weight.double().t())
    got = matmul(a, weight.t(), bias)
    assert float((got.double() - expected).abs().max() / expected.abs().max()) < 1e-5
