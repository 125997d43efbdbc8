"""The model process's view of a model's outputs (worker/accuracy.py, worker/capture.py): every tensor of a
nested output judged (HF's DynamicCache in ``past_key_values`` included), what cannot be judged named with the
reason, and ``--train`` backpropagating the model's own loss where it returns one."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
import torch.utils._pytree as pytree

from inductor_lens.records.outcome import Accuracy
from inductor_lens.report.views import accuracy_item
from inductor_lens.worker import accuracy
from inductor_lens.worker.model_run import backward_step

transformers = pytest.importorskip("transformers")


def _tiny_llama_output() -> object:
    """A real HF CausalLMOutputWithPast with a DynamicCache (2 layers), from a tiny random Llama."""
    config = transformers.LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=64, max_position_embeddings=32, bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        return model(input_ids=torch.randint(0, 64, (1, 8)), use_cache=True)


def _results(leaves: list[tuple[str, object]]) -> accuracy.Results:
    return accuracy.Results(outputs=[leaves], gradients=[[]])


def test_a_dynamic_cache_is_judged_tensor_by_tensor() -> None:
    output = _tiny_llama_output()
    assert type(output.past_key_values).__name__ == "DynamicCache"  # type: ignore[attr-defined]
    leaves = list(accuracy.named_leaves(output))
    assert [name for name, _ in leaves] == [
        "logits",
        "past_key_values.layers[0].keys",
        "past_key_values.layers[0].values",
        "past_key_values.layers[1].keys",
        "past_key_values.layers[1].values",
    ]
    assert all(isinstance(value, torch.Tensor) for _, value in leaves)
    # a cache the compiled model got wrong is caught and named, where before it was only listed
    wrong = [(name, value + 1.0 if name == "past_key_values.layers[1].values" else value) for name, value in leaves]
    verdict = accuracy.judge(_results(leaves), _results(wrong), None, train=False)
    assert verdict.checked == 5 and verdict.failed == 1 and not verdict.skipped
    assert verdict.worst is not None and verdict.worst.name == "past_key_values.layers[1].values"


class Opaque:
    """An output object that holds no tensor (a handle, a config echoed back)."""

    def __init__(self) -> None:
        self.size = 3
        self.name = "opaque"


@dataclass
class Pair:
    left: torch.Tensor
    right: torch.Tensor


class Registered:
    def __init__(self, a: torch.Tensor, b: torch.Tensor) -> None:
        self.a, self.b = a, b


pytree.register_pytree_node(
    Registered,
    lambda r: ([r.a, r.b], None),
    lambda children, _: Registered(*children),
    flatten_with_keys_fn=lambda r: ([(pytree.GetAttrKey("a"), r.a), (pytree.GetAttrKey("b"), r.b)], None),
)


def test_what_cannot_be_judged_is_named_with_the_reason() -> None:
    t = torch.ones(2)
    out = {"h": t, "handle": Opaque(), "pair": Pair(t, t), "node": Registered(t, t), "cache": [Opaque()]}
    leaves = list(accuracy.named_leaves(out))
    assert [name for name, _ in leaves] == ["h", "handle", "pair.left", "pair.right", "node.a", "node.b", "cache[0]"]
    assert leaves[1][1] == accuracy.Unjudged("Opaque", "no tensor within 4 levels of its attributes")
    assert accuracy.describe_leaf(leaves[1][1]) == "Opaque (not judged: no tensor within 4 levels of its attributes)"
    verdict = accuracy.judge(_results(leaves), _results(leaves), None, train=False)
    assert verdict.within_tolerance and verdict.checked == 5
    assert verdict.skipped == (
        "handle: Opaque, no tensor within 4 levels of its attributes",
        "cache[0]: Opaque, no tensor within 4 levels of its attributes",
    )
    card = accuracy_item(verdict)
    assert "2 outputs not judged (handle: Opaque, no tensor within 4 levels" in card.detail
    # a report from before the field reads with nothing skipped
    assert Accuracy(compared="outputs", tensors=1, max_abs_error=0, max_rel_error=0, within_tolerance=True,
                    rtol=0, atol=0).skipped == ()  # fmt: skip


def test_train_backpropagates_the_loss_when_the_model_returns_one() -> None:
    weight = torch.nn.Parameter(torch.tensor([2.0, 3.0]))
    x = torch.tensor([1.0, 1.0])

    def forward() -> dict[str, torch.Tensor]:
        logits = weight * x
        return {"loss": (logits * 10).sum(), "logits": logits}

    assert backward_step(forward()) == "outputs.loss"
    assert weight.grad is not None and weight.grad.tolist() == [10.0, 10.0]  # the loss only, not logits too
    weight.grad = None
    output = _tiny_llama_output()  # a ModelOutput: the attribute/key ``loss`` is absent without labels
    assert getattr(output, "loss", None) is None
    assert backward_step((weight * x, weight.sum())) == "the sum of 2 outputs"
    assert weight.grad is not None and weight.grad.tolist() == [2.0, 2.0]
    weight.grad = None
    assert backward_step({"loss": None, "y": weight * x}) == "the sum of 1 output"
