"""The model-file contract and the accuracy verdict, on CPU tensors (no compile): worker/model_file.py and
worker/accuracy.py, which run in the model process."""

from __future__ import annotations

import pytest
import torch

from inductor_lens.worker import accuracy
from inductor_lens.worker.failure import Failure
from inductor_lens.worker.model_file import Call, calls_from, describe_calls, move


def _t(*shape: int) -> torch.Tensor:
    return torch.zeros(shape)


def test_every_form_of_get_inputs() -> None:
    x, mask = _t(2, 3), torch.ones(2, 3, dtype=torch.long)
    assert [(len(c.args), sorted(c.kwargs)) for c in calls_from(x)] == [(1, [])]
    assert [(len(c.args), sorted(c.kwargs)) for c in calls_from((x, x))] == [(2, [])]
    assert [(len(c.args), sorted(c.kwargs)) for c in calls_from({"input_ids": mask})] == [(0, ["input_ids"])]
    (pair,) = calls_from(((x,), {"attention_mask": mask}))
    assert pair.args == (x,) and list(pair.kwargs) == ["attention_mask"]
    several = calls_from([x, (x, x), {"input_ids": mask}])
    assert [(len(c.args), sorted(c.kwargs)) for c in several] == [(1, []), (2, []), (0, ["input_ids"])]
    assert describe_calls(several) == [
        "call 1: float32[2, 3] on cpu",
        "call 2: float32[2, 3] on cpu",
        "call 2: float32[2, 3] on cpu",
        "call 3: input_ids=int64[2, 3] on cpu",
    ]
    # a forward taking a tuple and a dict positionally is written ((t, d), {})
    (nested,) = calls_from((((x, x), {"a": x}), {}))
    assert nested.args == ((x, x), {"a": x}) and nested.kwargs == {}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "empty list"),
        (None, "get_inputs() is a NoneType"),
        ("text", "get_inputs() is a str"),
        ([_t(1), [_t(1)]], "get_inputs() item 2 is a list"),
        ({1: _t(1)}, "keyword arguments need string names"),
    ],
)
def test_what_get_inputs_cannot_return(value: object, message: str) -> None:
    with pytest.raises(Failure, match=message.replace("(", r"\(").replace(")", r"\)")) as raised:
        calls_from(value)
    assert raised.value.kind == "ModelFileError"


def test_nested_inputs_move_and_cast() -> None:
    value = {"a": [_t(2), torch.ones(2, dtype=torch.long)], "b": 3}
    moved = move(value, torch.device("cpu"), torch.bfloat16)
    assert moved["a"][0].dtype == torch.bfloat16 and moved["a"][1].dtype == torch.long and moved["b"] == 3
    assert Call((), {"x": 2})(lambda x: x * 2) == 4


def _results(*outputs: list[tuple[str, object]], grads: list[list[tuple[str, object]]] | None = None) -> accuracy.Results:
    return accuracy.Results(outputs=list(outputs), gradients=grads or [[] for _ in outputs])


def test_leaves_are_named_by_their_path() -> None:
    class Output(dict):  # HuggingFace's ModelOutput is an OrderedDict
        pass

    out = Output(logits=_t(1), past_key_values=((_t(1), _t(1)),), loss=None)
    assert [n for n, _ in accuracy.named_leaves(out)] == [
        "logits", "past_key_values[0][0]", "past_key_values[0][1]", "loss"
    ]  # fmt: skip
    assert [n for n, _ in accuracy.named_leaves((_t(1), {"h": _t(1)}))] == ["[0]", "[1].h"]
    assert [n for n, _ in accuracy.named_leaves(_t(1))] == ["output"]


def test_bf16_rounding_is_not_a_difference() -> None:
    """A bf16 result as far from float64 as eager's own passes, though far outside an allclose: both
    computed in bf16, their errors differ element by element (other accumulation orders)."""
    gen = torch.Generator().manual_seed(0)
    exact = torch.randn(4096, generator=gen, dtype=torch.float64)
    eager = (exact + 0.02 * torch.randn(4096, generator=gen, dtype=torch.float64)).to(torch.bfloat16)
    compiled = (exact + 0.02 * torch.randn(4096, generator=gen, dtype=torch.float64)).to(torch.bfloat16)
    assert not torch.allclose(eager, compiled, atol=1e-2, rtol=1e-2)
    verdict = accuracy.judge(
        _results([("logits", eager)]), _results([("logits", compiled)]), _results([("logits", exact)]),
        train=False,
    )
    assert verdict.within_tolerance and verdict.reference == "float64" and verdict.checked == 1
    (check,) = verdict.checks
    assert check.compiled_rmse is not None and check.eager_rmse is not None and check.multiplier == 3.0
    assert check.compiled_rmse <= check.multiplier * check.eager_rmse + check.tolerance / 10


def test_a_wrong_result_is_caught_and_named() -> None:
    exact = torch.linspace(-1, 1, 2000, dtype=torch.float64)
    eager = exact.float()
    verdict = accuracy.judge(
        _results([("hidden", eager), ("pooled", eager[:10])]),
        _results([("hidden", eager + 0.01), ("pooled", eager[:10])]),
        _results([("hidden", exact), ("pooled", exact[:10])]),
        train=False,
    )
    assert not verdict.within_tolerance and verdict.failed == 1
    assert verdict.worst is not None and verdict.worst.name == "hidden" and not verdict.worst.within
    assert "eager's error against float64" in verdict.worst.note


def test_gradients_enter_the_verdict() -> None:
    exact = torch.linspace(0, 1, 3000, dtype=torch.float64)
    out = [("loss", exact.float().sum())]
    eager = _results(out, grads=[[("fc.weight", exact.float())]])
    compiled = _results(out, grads=[[("fc.weight", exact.float() * 1.5)]])
    reference = _results([("loss", exact.sum())], grads=[[("fc.weight", exact)]])
    verdict = accuracy.judge(eager, compiled, reference, train=True)
    assert not verdict.within_tolerance and verdict.worst is not None
    assert verdict.worst.name == "grad of fc.weight" and verdict.worst.kind == "gradient"
    assert "gradients" in verdict.compared


def test_other_structure_or_shape_is_a_finding() -> None:
    verdict = accuracy.judge(
        _results([("a", _t(2)), ("b", _t(2))], [("a", _t(3))]),
        _results([("a", _t(2))], [("a", _t(4))]),
        None,
        train=False,
        why_no_reference="--accuracy eager",
    )
    assert not verdict.within_tolerance and verdict.reference == "eager"
    assert verdict.findings == (
        "call 1: the compiled outputs (a) are not eager's (a, b)",
        "call 2: a: compiled gave float32[4], eager float32[3]",
    )
    assert "no float64 run (--accuracy eager)" in verdict.method
