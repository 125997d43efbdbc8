"""The batch-norm and max-pool kernels (worker/handwritten/kernels/batchnorm.py, pooling.py) on the cases the catalog's
random checks do not reach: max-pool ties, all-negative and -inf windows, NaN, gradients against autograd,
a training batch whose channels sit far from zero, mixed layouts, and the autotuned (GPU) launch path,
all under Triton's interpreter on small shapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from inductor_lens.handwritten.catalog import get
from inductor_lens.worker.handwritten import check, tuning_search
from inductor_lens.worker.handwritten.kernels import interpreter

pytest.importorskip("triton")
torch = pytest.importorskip("torch")
F = torch.nn.functional


def _module(name: str) -> Any:
    import importlib

    check.implementation(get(name), "cpu")  # imports the module under the interpreter
    return importlib.import_module(f"inductor_lens.worker.handwritten.kernels.{get(name).module}")


def _pool(x: Any, kernel: int = 3, stride: int = 2, padding: int = 1) -> tuple[Any, Any]:
    pooling = _module("max_pool2d")
    with interpreter(True):
        return pooling.max_pool2d(x, (kernel, stride, padding))


def _torch_pool(x: Any, kernel: int = 3, stride: int = 2, padding: int = 1) -> tuple[Any, Any]:
    pooling = _module("max_pool2d")
    out, indices = F.max_pool2d(x, kernel, stride, padding, return_indices=True)
    return out, pooling.window_offsets(indices, x.shape[-1], kernel, stride, padding)


@pytest.mark.parametrize("channels_last", [False, True])
def test_max_pool_ties_go_to_the_first_tap_in_the_window(channels_last: bool) -> None:
    x = torch.zeros(1, 3, 6, 7)
    x[0, 1, 2:4, 2:4] = 1.0  # a 2x2 plateau: windows covering it must point at its first element they see
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    out, offsets = _pool(x)
    want_out, want_offsets = _torch_pool(x)
    assert torch.equal(out, want_out)
    assert torch.equal(offsets, want_offsets)
    # the corner window (0, 0) has padding above and to the left: its first in-bounds tap is (1, 1)
    assert offsets[0, 0, 0, 0] == 4
    assert offsets.dtype == torch.int8


def test_max_pool_padding_never_wins_over_negative_or_infinite_inputs() -> None:
    x = -1.0 - torch.rand(2, 2, 5, 5)
    x[0, 0] = float("-inf")  # whole windows of -inf still point at an input element, as torch's do
    out, offsets = _pool(x)
    want_out, want_offsets = _torch_pool(x)
    assert torch.equal(out, want_out) and (out < 0).all()
    assert torch.equal(offsets, want_offsets)


def test_max_pool_propagates_nan_and_points_at_it() -> None:
    x = torch.randn(1, 1, 5, 5)
    x[0, 0, 2, 3] = float("nan")
    out, offsets = _pool(x)
    want_out, want_offsets = _torch_pool(x)
    assert torch.equal(out.isnan(), want_out.isnan()) and out.isnan().any()
    assert torch.equal(offsets, want_offsets)


@pytest.mark.parametrize("channels_last", [False, True])
def test_max_pool_backward_matches_autograd_through_the_offsets(channels_last: bool) -> None:
    pooling = _module("max_pool2d_backward")
    # float32, the widest dtype the catalog runs in (the kernel sums overlapping windows in fp32)
    x = torch.relu(torch.randn(2, 3, 9, 8))  # ties at zero
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    x.requires_grad_(True)
    out = F.max_pool2d(x, 3, 2, 1)
    grad_out = torch.randn_like(out)
    out.backward(grad_out)
    _, offsets = _pool(x.detach())
    with interpreter(True):
        grad_in = pooling.max_pool2d_backward(grad_out, offsets, (3, 2, 1, 9, 8))
    assert grad_in.is_contiguous(memory_format=torch.channels_last) == channels_last
    torch.testing.assert_close(grad_in, x.grad)


def test_training_statistics_survive_channels_far_from_zero() -> None:
    """Shifted sums: a channel at 1000 +- 1 in fp32 keeps its variance (unshifted sums lose it to cancellation)."""
    batchnorm = _module("batchnorm_train")
    x = 1000 + torch.randn(4, 3, 7, 9)
    weight, bias = torch.ones(3), torch.zeros(3)
    with interpreter(True):
        y, mean, rstd = batchnorm.batch_norm_train(x, weight, bias)
    x64 = x.double()
    want_rstd = torch.rsqrt(x64.var(dim=(0, 2, 3), unbiased=False) + 1e-5)
    torch.testing.assert_close(rstd.double(), want_rstd, rtol=1e-4, atol=0)
    torch.testing.assert_close(mean.double(), x64.mean(dim=(0, 2, 3)), rtol=1e-6, atol=0)
    want_y = F.batch_norm(x64, None, None, weight.double(), bias.double(), training=True)
    torch.testing.assert_close(y.double(), want_y, rtol=0, atol=1e-3)


def test_batch_norm_takes_mixed_layouts_and_keeps_x_layout() -> None:
    batchnorm = _module("batchnorm_add_relu")
    x = torch.randn(2, 5, 4, 3).contiguous(memory_format=torch.channels_last)
    residual = torch.randn(2, 5, 4, 3)  # NCHW
    stats = [torch.randn(5) * 0.1, torch.rand(5) + 0.5, torch.randn(5), torch.randn(5)]
    with interpreter(True):
        y = batchnorm.batch_norm(x, *stats, residual, relu=True)
    assert y.is_contiguous(memory_format=torch.channels_last)
    want = torch.relu(F.batch_norm(x, stats[0], stats[1], stats[2], stats[3], training=False) + residual)
    torch.testing.assert_close(y, want)


def test_integer_outputs_compare_without_wrapping() -> None:
    errors = check.compare((torch.tensor([-100], dtype=torch.int8),), (torch.tensor([100], dtype=torch.int8),))
    assert errors[0].max_abs == 200 and errors[0].max_rel == 2.0


@pytest.fixture
def tuned_on_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launchers' autotuned (GPU) path, run by Triton's autotuner under the interpreter with a fake timer."""
    monkeypatch.setenv("INDUCTOR_LENS_CACHE_DIR", str(tmp_path / "lens-cache"))
    monkeypatch.setattr(tuning_search, "BENCHMARK", lambda kernel_call, quantiles=None: (kernel_call(), [1.0] * 3)[1])
    for name in ("batchnorm", "max_pool2d"):
        monkeypatch.setattr(_module(name), "interpreting", lambda: False)


@pytest.mark.parametrize("channels_last", [False, True])
def test_autotuned_launches_prune_to_valid_tiles(tuned_on_cpu: None, channels_last: bool) -> None:
    batchnorm, pooling = _module("batchnorm"), _module("max_pool2d")
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(2, 5, 6, 7).contiguous(memory_format=fmt)
    weight, bias = torch.rand(5) + 0.5, torch.randn(5)
    with interpreter(True):
        y, mean, rstd = batchnorm.batch_norm_train(x, weight, bias, relu=True)
        out, offsets = pooling.max_pool2d(x, (3, 2, 1))
    want_y, want_mean, want_rstd = torch.ops.aten.native_batch_norm(x, weight, bias, None, None, True, 0.0, 1e-5)
    torch.testing.assert_close(y, torch.relu(want_y))
    torch.testing.assert_close((mean, rstd), (want_mean, want_rstd))
    want_out, want_offsets = _torch_pool(x)
    assert torch.equal(out, want_out) and torch.equal(offsets, want_offsets)
