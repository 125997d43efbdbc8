"""`inductor-lens handwritten list|check|bench`, and hand-written results carried by a copied capture folder."""

from __future__ import annotations

import pytest

from inductor_lens.handwritten.catalog import EQUIVALENTS
from inductor_lens.worker.handwritten import check

from ..conftest import assert_one_line_error


def test_list_shows_every_kernel(run_cli) -> None:
    result = run_cli("handwritten", "list")
    assert result.code == 0
    for equivalent in EQUIVALENTS:
        assert f"  {equivalent.name} " in result.stdout
    assert "bfloat16(GPU only)" in result.stdout  # bf16 dot products cannot run in the interpreter


def test_check_runs_under_the_interpreter(run_cli) -> None:
    result = run_cli(
        "handwritten", "check", "bias_gelu", "--shape", "37x1031", "--dtype", "bf16", "--device", "cpu"
    )
    assert result.code == 0, result.err
    assert result.stdout.startswith("ok: bias_gelu 37x1031 bfloat16 on Triton interpreter: max error")
    result = run_cli(
        "handwritten", "check", "flash_attention_causal", "--shape", "1x2x33x16", "--device", "cpu"
    )
    assert result.code == 0 and result.stdout.startswith("ok: flash_attention_causal 1x2x33x16 float32")


def test_check_exits_non_zero_on_a_mismatch(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    real = check.check

    def off_by_a_little(name, shape, dtype, device):
        result = real(name, shape, dtype, device)
        return type(result)(**{**result.__dict__, "ok": False})

    monkeypatch.setattr(check, "check", off_by_a_little)
    result = run_cli("handwritten", "check", "relu", "--shape", "3x5", "--device", "cpu")
    assert result.code == 10 and result.stdout.startswith("MISMATCH: relu 3x5")
    assert_one_line_error(result, "relu disagrees with its torch reference")


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (("check", "softmaks"), 2, "no hand-written kernel named 'softmaks' (did you mean"),
        (("check", "softmax", "--shape", "3xa"), 2, "expected sizes such as 1000x777"),
        (("check", "softmax", "--shape", "3x5x7"), 2, "softmax takes a shape of 2 dimensions (rowsxcols)"),
        (("check", "softmax", "--dtype", "int8"), 2, "unknown dtype 'int8'"),
        (
            ("check", "softmax", "--dtype", "float64"),
            2,
            "the hand-written kernels take float32, float16, bfloat16",
        ),
        (("check", "matmul", "--dtype", "bf16", "--device", "cpu"), 2, "bfloat16 tl.dot is wrong under"),
        (("check", "softmax", "--device", "cuda"), 11, "no CUDA device here"),
        (("bench", "softmax"), 11, "handwritten bench needs a CUDA device"),
    ],
)
def test_bad_requests_give_one_line(run_cli, args: tuple[str, ...], code: int, fragment: str) -> None:
    result = run_cli("handwritten", *args)
    assert result.code == code, result
    assert_one_line_error(result, fragment)
