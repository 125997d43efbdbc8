"""The transformer pieces (rotary, RMSNorm with a residual, activation backwards, embedding, cross-entropy) in
the cases the catalog's generic checks do not reach: repeated ids, ignored targets, strided inputs, and the
hand-written references themselves against autograd.

Kernels run on CPU tensors under Triton's interpreter (``kernels.load(..., interpret=True)``); sizes are tiny.
"""

from __future__ import annotations

import pytest

from inductor_lens.handwritten.catalog import get
from inductor_lens.handwritten.interpreter_shapes import INTERPRETER_ELEMENTS, interpreter_shape
from inductor_lens.handwritten.match import shape_for
from inductor_lens.worker.handwritten import check
from inductor_lens.worker.handwritten.kernels import interpreter

torch = pytest.importorskip("torch")
F = torch.nn.functional

NAMES = (
    "rotary", "rotary_backward", "rmsnorm_residual", "rmsnorm_backward", "rmsnorm_residual_backward",
    "silu_mul_backward", "gelu_backward", "gelu_tanh_backward", "embedding", "embedding_backward",
    "cross_entropy", "cross_entropy_backward",
)  # fmt: skip


def _implementation(name: str):
    return check.implementation(get(name), "cpu")


def _run(name: str, *inputs):
    with interpreter(True):
        return _implementation(name).run(*inputs)


def _generator() -> torch.Generator:
    return torch.Generator().manual_seed(7)


def test_embedding_backward_sums_repeated_ids_deterministically() -> None:
    """Every token on one id, a few ids over many tokens, ids never used (zero rows): as ATen, and the same
    bits on a second run (one program sums each id's rows in a fixed order)."""
    grad = torch.randn((67, 40), generator=_generator())
    vocab_rows = torch.empty((9, 0))
    for ids in (torch.full((67,), 4), torch.randint(0, 3, (67,), generator=_generator()) * 3):
        out = _run("embedding_backward", grad, ids, vocab_rows)
        expected = torch.ops.aten.embedding_dense_backward(grad.double(), ids, 9, -1, False)
        assert (out.double() - expected).abs().max() <= 1e-5 * expected.abs().max()
        assert torch.equal(out, _run("embedding_backward", grad, ids, vocab_rows))
        assert not out[torch.tensor([i for i in range(9) if i not in ids.tolist()])].any()


def test_embedding_takes_ids_of_any_shape() -> None:
    table = torch.randn((11, 6), generator=_generator())
    ids = torch.randint(0, 11, (2, 5), generator=_generator())
    assert torch.equal(_run("embedding", ids, table), F.embedding(ids, table))


def test_cross_entropy_ignores_minus_100_targets() -> None:
    logits = 3 * torch.randn((6, 1500), generator=_generator())
    targets = torch.tensor([-100, 3, -100, 1499, -100, -100])
    loss, lse = _run("cross_entropy", logits, targets)
    assert loss.shape == () and lse.dtype == torch.float32
    torch.testing.assert_close(loss, F.cross_entropy(logits, targets))
    torch.testing.assert_close(lse, logits.logsumexp(-1))
    grad = torch.tensor(0.5)
    grad_logits = _run("cross_entropy_backward", logits, targets, grad, lse)
    assert not grad_logits[targets == -100].any()
    wanted = logits.clone().requires_grad_()
    (F.cross_entropy(wanted, targets) * grad).backward()
    torch.testing.assert_close(grad_logits, wanted.grad)


@pytest.mark.parametrize("vocab", [3, 9, 37])
def test_cross_entropy_walks_unaligned_rows_of_a_padded_view(vocab: int) -> None:
    """Rows of a [rows, vocab + 5] buffer seen as [rows, vocab]: each row starts at another offset in its
    16-byte vector, so the aligned body, the head and the tail each take a different share of it (vocab 3
    lies inside one vector or across two, and has no body); targets on the first and last columns."""
    buffer = 3 * torch.randn((7, vocab + 5), generator=_generator(), dtype=torch.float16)
    logits = buffer[:, 2 : vocab + 2]
    targets = torch.tensor([0, vocab - 1, 1, -100, vocab // 2, vocab - 1, 0])
    loss, lse = _run("cross_entropy", logits, targets)
    torch.testing.assert_close(lse, logits.float().logsumexp(-1))
    assert abs(float(loss) - float(F.cross_entropy(logits.float(), targets))) < 2e-3
    grad_logits = _run("cross_entropy_backward", logits, targets, torch.tensor(0.5, dtype=torch.float16), lse)
    wanted = logits.float().requires_grad_()
    (F.cross_entropy(wanted, targets) * 0.5).backward()
    torch.testing.assert_close(grad_logits.float(), wanted.grad, atol=1e-3, rtol=1e-2)


def test_cross_entropy_with_masked_out_vocabulary() -> None:
    """-inf logits (a vocabulary masked out) add nothing: a row with one finite logit, a row whose aligned
    body is all -inf, a row without a masked logit."""
    logits = torch.randn((3, 40), generator=_generator())
    logits[0] = -float("inf")
    logits[0, 5] = 2.0
    logits[1, :36] = -float("inf")
    targets = torch.tensor([5, 38, 0])
    loss, lse = _run("cross_entropy", logits, targets)
    torch.testing.assert_close(lse, logits.logsumexp(-1))
    torch.testing.assert_close(loss, F.cross_entropy(logits, targets))


def test_cross_entropy_in_half_returns_the_loss_in_half() -> None:
    logits = torch.randn((3, 40), generator=_generator()).to(torch.float16)
    targets = torch.tensor([0, 39, 7])
    loss, _ = _run("cross_entropy", logits, targets)
    assert loss.dtype == torch.float16
    assert abs(float(loss) - float(F.cross_entropy(logits.float(), targets))) < 2e-3


def test_rotary_matches_hf_llama_on_contiguous_and_strided_inputs() -> None:
    implementation = _implementation("rotary")
    x, cos, sin = implementation.make_inputs(
        {"batch": 2, "heads": 3, "seq": 5, "head_dim": 8}, torch.float32, torch.device("cpu"), _generator()
    )
    assert not x.is_contiguous()  # the [batch, seq, heads, head_dim] projection, viewed per head

    def hf_rotate_half(t: torch.Tensor) -> torch.Tensor:  # transformers' LlamaRotaryEmbedding helper
        return torch.cat((-t[..., t.shape[-1] // 2 :], t[..., : t.shape[-1] // 2]), dim=-1)

    expected = x * cos[None, None] + hf_rotate_half(x) * sin[None, None]
    for tensor in (x, x.contiguous()):
        torch.testing.assert_close(_run("rotary", tensor, cos, sin), expected)


@pytest.mark.parametrize(
    ("name", "forward"),
    [
        ("rotary_backward", lambda x, cos, sin: _implementation("rotary").reference(x, cos, sin)),
        ("silu_mul_backward", lambda gate, up: F.silu(gate) * up),
        ("gelu_backward", F.gelu),
        ("gelu_tanh_backward", lambda x: F.gelu(x, approximate="tanh")),
    ],
)
def test_backward_references_agree_with_autograd(name: str, forward) -> None:
    """The backward entries' references are formulas or ATen ops: autograd of the forward agrees."""
    implementation = _implementation(name)
    shape = dict(zip(get(name).dims, (2, 3, 4, 6) if name.startswith("rotary") else (3, 7), strict=False))
    grad, *inputs = implementation.make_inputs(shape, torch.float64, torch.device("cpu"), _generator())
    if name == "rotary_backward":  # (grad, cos, sin): differentiate x alone
        x = torch.randn(grad.shape, dtype=torch.float64, requires_grad=True)
        forward(x, *inputs).backward(grad)
        torch.testing.assert_close(implementation.reference(grad, *inputs), x.grad)
        return
    leaves = [t.clone().requires_grad_() for t in inputs]
    forward(*leaves).backward(grad)
    expected = tuple(t.grad for t in leaves)
    torch.testing.assert_close(check.as_tuple(implementation.reference(grad, *inputs)), expected)


def test_rmsnorm_backward_references_agree_with_autograd() -> None:
    implementation = _implementation("rmsnorm_residual_backward")
    grad_out, h, weight, rstd, grad_residual = implementation.make_inputs(
        {"rows": 4, "cols": 9}, torch.float64, torch.device("cpu"), _generator()
    )
    x = h.clone().requires_grad_()
    w = weight.clone().requires_grad_()
    F.rms_norm(x, (9,), w, eps=1e-6).backward(grad_out)
    grad_h, grad_weight = implementation.reference(grad_out, h, weight, rstd, grad_residual)
    torch.testing.assert_close((grad_h - grad_residual, grad_weight), (x.grad, w.grad))


def test_rmsnorm_residual_returns_the_sum_and_its_norm_in_both_kernel_shapes() -> None:
    """Rows that fit in registers and rows that loop (over 8192 fp32 columns) give y = rmsnorm(h) and h."""
    for cols in (300, 9000):
        x, residual = (
            torch.randn((2, 2, cols), generator=_generator()),
            torch.randn((2, 2, cols), generator=_generator()),
        )
        weight = 1 + 0.1 * torch.randn(cols, generator=_generator())
        y, h = _run("rmsnorm_residual", x, residual, weight)
        assert y.shape == h.shape == x.shape
        torch.testing.assert_close(h, x + residual)
        torch.testing.assert_close(y, F.rms_norm(x + residual, (cols,), weight, eps=1e-6))


def test_interpreter_shapes_of_the_bench_shapes_stay_small() -> None:
    """A CPU check of a model's shape shrinks the batch-like dimensions only (not head_dim, dim or vocab)."""
    for name in NAMES:
        equivalent = get(name)
        full = equivalent.shape(equivalent.bench_shape)
        shape = interpreter_shape(equivalent, full)
        if equivalent.shrink:
            assert equivalent.cost(shape, 4)[0] <= 4 * INTERPRETER_ELEMENTS, (name, shape)
        else:  # the row-wise and elementwise families' rule
            assert shape["rows"] * shape["cols"] <= INTERPRETER_ELEMENTS, (name, shape)
        kept = [d for d in equivalent.dims if d not in (equivalent.shrink or ("rows",))]
        assert all(shape[d] == full[d] for d in kept), (name, shape)


def test_match_shapes_map_to_the_entries_dimensions() -> None:
    """An embedding match carries its own tokens x vocab x dim; a rows x cols match sizes the row-wise entries
    and the logits of cross-entropy."""
    lookup = {"rows": 1024, "cols": 768, "tokens": 1024, "vocab": 50257, "dim": 768}
    assert shape_for(get("embedding"), lookup) == {"tokens": 1024, "vocab": 50257, "dim": 768}
    assert shape_for(get("embedding"), {"rows": 1024, "cols": 768}) is None  # no table seen: no vocabulary
    logits = {"rows": 4096, "cols": 50257}
    assert shape_for(get("cross_entropy_backward"), logits) == {"rows": 4096, "vocab": 50257}
    rows = {"rows": 4096, "cols": 512}
    assert shape_for(get("rmsnorm_residual"), {**rows, "tokens": 4096, "vocab": 4096, "dim": 512}) == rows
