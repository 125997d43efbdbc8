"""The convolution kernels beyond the catalog's interpreter checks (tests/unit/test_handwritten_kernels.py).

Output sizes and costs against torch's, a bias and strided, non-contiguous inputs, the output's memory
format, the split-K choice of the weight gradient and the launchers' refusals; kernels run on CPU
tensors under Triton's interpreter, on small shapes.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from inductor_lens.handwritten import catalog, interpreter_shapes
from inductor_lens.handwritten.equivalent import DOT_TOLERANCE, TF32_TOLERANCE
from inductor_lens.worker.handwritten.kernels import interpreter, load

pytest.importorskip("triton")
torch = pytest.importorskip("torch")
F = torch.nn.functional

CONV_ENTRIES = ("conv2d", "conv2d_backward_input", "conv2d_backward_weight", "conv2d_backward")


@pytest.fixture(scope="module")
def conv() -> ModuleType:
    load("conv", interpret=True)  # the kernels made for the interpreter
    from inductor_lens.worker.handwritten.kernels import conv as module

    return module


def _close(out: torch.Tensor, ref: torch.Tensor, tolerance: float = 1e-5) -> bool:
    return bool((out.double() - ref).abs().max() <= tolerance * ref.abs().max())


@pytest.mark.parametrize(
    ("size", "kernel", "stride", "padding", "dilation"),
    [(1, 1, 1, 0, 1), (7, 3, 2, 1, 1), (8, 3, 2, 1, 1), (56, 1, 2, 0, 1), (9, 3, 1, 2, 2), (10, 5, 3, 0, 2)],
)
def test_output_size_is_torchs(
    conv: ModuleType, size: int, kernel: int, stride: int, padding: int, dilation: int
) -> None:
    x = torch.empty(1, 1, size, size, device="meta")
    w = torch.empty(1, 1, kernel, kernel, device="meta")
    expected = F.conv2d(x, w, stride=stride, padding=padding, dilation=dilation).shape[-1]
    assert conv.output_size(size, kernel, stride, padding, dilation) == expected


def test_cost_counts_each_gemm_and_each_tensor_once() -> None:
    shape = catalog.get("conv2d").shape((32, 64, 56, 56, 128, 3, 3, 2, 1, 1, 2, 1))
    x, weight, y = 32 * 64 * 56 * 56, 128 * 32 * 3 * 3, 32 * 128 * 28 * 28
    flops = 2 * 32 * 128 * 28 * 28 * 32 * 3 * 3
    for name in CONV_ENTRIES[:3]:
        assert catalog.get(name).cost(shape, 2) == (2 * (x + weight + y), flops)
    assert catalog.get("conv2d_backward").cost(shape, 2) == (2 * (2 * x + 2 * weight + y), 2 * flops)


@pytest.mark.parametrize("name", CONV_ENTRIES)
def test_bench_shape_shrinks_to_a_valid_interpreter_shape(conv: ModuleType, name: str) -> None:
    equivalent = catalog.get(name)
    shape = interpreter_shapes.interpreter_shape(equivalent, equivalent.shape(equivalent.bench_shape))
    moved, flops = equivalent.cost(shape, 4)
    assert flops <= 2 * interpreter_shapes.INTERPRETER_MACS and moved <= 4 * interpreter_shapes.INTERPRETER_ELEMENTS
    for size, kernel in ((shape["height"], shape["kernel_h"]), (shape["width"], shape["kernel_w"])):
        assert conv.output_size(size, kernel, shape["stride"], shape["padding"], shape["dilation"]) >= 1


def test_strided_input_and_bias(conv: ModuleType) -> None:
    generator = torch.Generator().manual_seed(0)
    # every other channel and all but the first column: no stride of x is its contiguous one
    x = torch.randn(2, 12, 11, 13, generator=generator)[:, ::2, :, 1:]
    weight = torch.randn(6, 3, 3, 3, generator=generator)
    bias = torch.randn(6, generator=generator)
    args = conv.Conv2dArgs(stride=2, padding=1, dilation=1, groups=2)
    with interpreter(True):
        y = conv.conv2d(x, weight, bias, args)
    assert y.is_contiguous()
    assert _close(y, F.conv2d(x.double(), weight.double(), bias.double(), 2, 1, 1, 2))


def test_depthwise_bias_keeps_channels_last(conv: ModuleType) -> None:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(1, 6, 7, 5, generator=generator).to(memory_format=torch.channels_last)
    weight = torch.randn(12, 1, 3, 3, generator=generator)
    bias = torch.randn(12, generator=generator)
    with interpreter(True):
        y = conv.conv2d(x, weight, bias, conv.Conv2dArgs(padding=1, groups=6))
    assert y.is_contiguous(memory_format=torch.channels_last) and not y.is_contiguous()
    assert _close(y, F.conv2d(x.double(), weight.double(), bias.double(), padding=1, groups=6))


def _weight_grad_meta(grad_out: torch.Tensor, x: torch.Tensor, kernel: int) -> dict[str, object]:
    """What the weight gradient's tuner reads of its arguments (stride 1, unpadded)."""
    return dict(dy_ptr=grad_out, x_ptr=x, batch=grad_out.shape[0], out_h=grad_out.shape[2], out_w=grad_out.shape[3],
                group_in=x.shape[1], group_out=grad_out.shape[1], kernel_h=kernel, kernel_w=kernel,
                FLAT_TAPS=False)  # fmt: skip


def test_weight_gradient_splits_its_reduction_in_the_checks(conv: ModuleType) -> None:
    """Under the interpreter (8 SMs, slices of 64+ pixels, the checks at 4 programs per SM): 1x1 on 2x9x9
    pixels in 9 tiles of 16x16 takes two slices and the sum kernel; a 3x3 one on 2x5x6 pixels, one slice."""
    tile = {**conv.INTERPRETER_WEIGHT_GRAD_CONFIG, "programs_per_sm": 4}
    one_by_one = _weight_grad_meta(torch.empty(2, 40, 9, 9), torch.empty(2, 33, 9, 9), 1)
    three_by_three = _weight_grad_meta(torch.empty(2, 7, 5, 6), torch.empty(2, 16, 7, 8), 3)
    with interpreter(True):
        assert conv._slice_count({**one_by_one, **tile}) == 2  # 32 programs // 9 tiles, 162 // 64 pixels
        assert conv._slice_count({**three_by_three, **tile}) == 1  # 60 pixels
        assert conv._slice_count({**one_by_one, **tile, "programs_per_sm": 0}) == 1
    shapes = catalog.get("conv2d_backward_weight").check_shapes
    assert (2, 33, 9, 9, 40, 1, 1, 1, 0, 1, 1, 1) in shapes and (2, 5, 9, 11, 7, 3, 3, 2, 1, 1, 1, 0) in shapes


def test_weight_gradient_tunes_the_tile_and_the_slice_count_together(conv: ModuleType) -> None:
    """The pruner keeps the tiles the channels fill, each with the fills that give distinct slice counts
    (40x33 channels over 2x32x32 pixels: one 64x64 tile, 8, 16 and 32 programs on 8 SMs for fills 1, 2, 4);
    the grid takes the slice count of the configuration given it and keeps it for the sum."""
    meta = _weight_grad_meta(torch.empty(2, 40, 32, 32), torch.empty(2, 33, 32, 32), 1)
    with interpreter(True):
        kept = conv._weight_grad_prune(conv.WEIGHT_GRAD_CONFIGS, meta)
        slices = [conv._slice_count({**meta, **c.kwargs}) for c in kept]
    assert [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.kwargs["programs_per_sm"]) for c in kept] == [
        (64, 64, 0), (64, 64, 1), (64, 64, 2), (64, 64, 4)
    ]  # fmt: skip
    assert slices == [1, 8, 16, 32]
    grid = conv._WeightGradGrid(1)
    assert grid({**meta, "BLOCK_M": 16, "BLOCK_N": 16, "slices": 2}) == (9, 2, 1) and grid.slices == 2
    assert grid({**meta, "BLOCK_M": 64, "BLOCK_N": 64, "slices": 16}) == (1, 16, 1) and grid.slices == 16
    generator = torch.Generator().manual_seed(5)
    grad_out = torch.randn(2, 40, 9, 9, generator=generator).contiguous(memory_format=torch.channels_last)
    x = torch.randn(2, 33, 9, 9, generator=generator).contiguous(memory_format=torch.channels_last)
    with interpreter(True):
        grad_weight = conv.conv2d_backward_weight(grad_out, x, (1, 1))
    assert _close(grad_weight, torch.nn.grad.conv2d_weight(x.double(), (40, 33, 1, 1), grad_out.double()))


def test_launchers_refuse_mismatched_sizes(conv: ModuleType) -> None:
    with pytest.raises(ValueError, match="groups"):
        conv.conv2d(torch.empty(1, 6, 5, 5), torch.empty(4, 3, 3, 3), None, conv.Conv2dArgs(groups=4))
    with pytest.raises(ValueError, match="leaves no output"):
        conv.conv2d(torch.empty(1, 2, 2, 2), torch.empty(4, 2, 3, 3))
    with pytest.raises(ValueError, match="input gives"):
        conv.conv2d_backward_input(torch.empty(1, 4, 3, 3), torch.empty(4, 2, 3, 3), (6, 6))
    with pytest.raises(ValueError, match="input gives"):
        conv.conv2d_backward_weight(torch.empty(1, 4, 3, 3), torch.empty(1, 2, 6, 6), (3, 3))


def test_float32_follows_cudnns_tf32_flag_and_is_checked_at_tf32s_tolerance(
    conv: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """float32 convolutions run in TF32 where cuDNN's would (``torch.backends.cudnn.allow_tf32``, on by default),
    and a TF32 kernel is checked at float16's tolerance (TF32 keeps its 10-bit mantissa), saying why."""
    from dataclasses import replace

    from inductor_lens.worker.handwritten import check

    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)
    monkeypatch.setattr(conv, "interpreting", lambda: False)
    assert conv.float32_products() == "tf32"
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    assert conv.float32_products() == "ieee"
    monkeypatch.undo()
    assert conv.float32_products() == "ieee"  # the interpreter has no TF32

    as_if_tf32 = replace(conv.IMPLEMENTATIONS["conv2d"], float32_products=lambda: "tf32")
    monkeypatch.setattr(check, "implementation", lambda equivalent, device="cuda": as_if_tf32)
    entry = catalog.get("conv2d")
    shape = interpreter_shapes.interpreter_shape(entry, dict(zip(entry.dims, entry.default_shape, strict=True)))
    result = check.check("conv2d", shape, "float32", "cpu")
    assert (result.ok, result.tolerance) == (True, TF32_TOLERANCE)
    assert result.note == "float32 products in TF32, as torch's flag allows its own"
    assert check.check("conv2d", shape, "float16", "cpu").tolerance == DOT_TOLERANCE["float16"]


def test_pointwise_channels_last_convolution_runs_as_a_plain_gemm(conv: ModuleType) -> None:
    """A 1x1, stride-1, unpadded, ungrouped convolution on channels-last activations is the matmul kernel on
    the [N*H*W, C] matrix they are stored as (forward and input gradient), channels-last out, as torch's."""
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(2, 33, 5, 7, generator=generator).to(memory_format=torch.channels_last)
    weight = torch.randn(40, 33, 1, 1, generator=generator)
    bias = torch.randn(40, generator=generator)
    assert conv._plain_gemm(x, 1, 1, conv.NO_ARGS)
    assert not conv._plain_gemm(x.contiguous(), 1, 1, conv.NO_ARGS)
    assert not conv._plain_gemm(x, 1, 1, conv.Conv2dArgs(stride=2))
    with interpreter(True):
        y = conv.conv2d(x, weight, bias)
        grad_out = torch.randn(2, 40, 5, 7, generator=generator).to(memory_format=torch.channels_last)
        grad_x = conv.conv2d_backward_input(grad_out, weight, (5, 7))
    assert y.is_contiguous(memory_format=torch.channels_last) and not y.is_contiguous()
    assert _close(y, F.conv2d(x.double(), weight.double(), bias.double()))
    want = torch.nn.grad.conv2d_input(x.shape, weight.double(), grad_out.double())
    assert grad_x.is_contiguous(memory_format=torch.channels_last) and _close(grad_x, want)


@pytest.mark.parametrize(
    ("channels", "kernel", "stride", "padding", "dilation", "groups", "channels_last"),
    [(3, 7, 2, 3, 1, 1, True), (3, 7, 2, 3, 1, 1, False), (4, 3, 1, 2, 2, 2, True), (6, 5, 3, 1, 1, 3, False)],
)
def test_few_channels_reduce_over_channels_and_taps_as_one_axis(
    conv: ModuleType, channels: int, kernel: int, stride: int, padding: int, dilation: int, groups: int,
    channels_last: bool,
) -> None:  # fmt: skip
    """Fewer than 16 input channels per group (ResNet's 3-channel 7x7 stem): the forward's reduction and the
    weight gradient's columns run over (r, s, c) as one axis, with every stride, padding, dilation, group
    count and layout, against torch in float64."""
    assert channels // groups < conv.FLAT_TAPS_BELOW
    generator = torch.Generator().manual_seed(11)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(2, channels, 13, 11, generator=generator).contiguous(memory_format=fmt)
    weight = torch.randn(6 * groups, channels // groups, kernel, kernel, generator=generator)
    args = conv.Conv2dArgs(stride, padding, dilation, groups)
    with interpreter(True):
        y = conv.conv2d(x, weight, None, args)
        grad_out = torch.randn(y.shape, generator=generator).contiguous(memory_format=fmt)
        grad_weight = conv.conv2d_backward_weight(grad_out, x, (kernel, kernel), args)
    want = F.conv2d(x.double(), weight.double(), None, stride, padding, dilation, groups)
    assert _close(y, want)
    want_weight = torch.nn.grad.conv2d_weight(
        x.double(), weight.shape, grad_out.double(), stride, padding, dilation, groups
    )
    assert _close(grad_weight, want_weight)


def test_one_tap_and_dense_pixel_paths(conv: ModuleType) -> None:
    """1x1 unpadded convolutions take the loops without index math: the forward on NCHW (rows gathered once,
    channels strided) and the weight gradient on channels-last pixels; a sliced view is not dense and takes
    the general loop. All against float64 torch."""
    generator = torch.Generator().manual_seed(11)
    x = torch.randn(2, 24, 7, 5, generator=generator)
    weight = torch.randn(20, 24, 1, 1, generator=generator) / 5
    grad_out = torch.randn(2, 20, 7, 5, generator=generator).contiguous(memory_format=torch.channels_last)
    x_last = x.contiguous(memory_format=torch.channels_last)
    wide = torch.randn(2, 24, 7, 9, generator=generator).contiguous(memory_format=torch.channels_last)
    sliced = wide[..., 2:7]
    assert conv._dense_pixels(x_last) and conv._dense_pixels(grad_out) and not conv._dense_pixels(sliced)
    with interpreter(True):
        y = conv.conv2d(x, weight)
        dense = conv.conv2d_backward_weight(grad_out, x_last, (1, 1))
        general = conv.conv2d_backward_weight(grad_out, sliced, (1, 1))
    assert _close(y, F.conv2d(x.double(), weight.double()))
    assert _close(dense, torch.nn.grad.conv2d_weight(x.double(), (20, 24, 1, 1), grad_out.double()))
    assert _close(general, torch.nn.grad.conv2d_weight(sliced.double(), (20, 24, 1, 1), grad_out.double()))


@pytest.mark.parametrize(
    ("kernel", "padding"), [((3, 3), 0), ((7, 5), 2), ((3, 3), 1)], ids=["unpadded", "35-taps", "tap-bits"]
)
def test_forward_tap_paths(conv: ModuleType, kernel: tuple[int, int], padding: int) -> None:
    """The forward's blocked loop: without padding no bounds; over 32 taps the four bounds per step; padded up
    to 32 taps one bit per tap (TAP_BITS). Channels-last, 16+ channels so no FLAT_TAPS, odd sizes."""
    generator = torch.Generator().manual_seed(13)
    x = torch.randn(2, 18, 9, 8, generator=generator).contiguous(memory_format=torch.channels_last)
    weight = torch.randn(17, 18, *kernel, generator=generator) / 30
    with interpreter(True):
        y = conv.conv2d(x, weight, None, conv.Conv2dArgs(padding=padding))
    assert _close(y, F.conv2d(x.double(), weight.double(), padding=padding))
