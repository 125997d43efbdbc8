"""The accuracy verdict of sharded and replicated models in the model process (worker/accuracy.py): a DTensor
(FSDP2's parameters and gradients, a tensor-parallel output) judged shard by shard and named so, never by
``allclose`` on DTensors (``RuntimeError: aten.allclose.default``); a DDP model's float64 copy wrapped in DDP
again; an FSDP2 model's missing float64 copy said why. One process, rank 0 of a fake two-rank group (torch's
testing backend: no collective runs, DTensors are built from their local shards)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.distributed as dist

from inductor_lens.worker import accuracy

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch without torch.distributed")


@pytest.fixture(scope="module")
def mesh() -> Iterator[Any]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        yield init_device_mesh("cpu", (2,))
    finally:
        dist.destroy_process_group()


def _sharded(mesh: Any, local: torch.Tensor) -> Any:
    from torch.distributed.tensor import DTensor, Shard

    return DTensor.from_local(local, mesh, [Shard(0)], run_check=False)


def _gradients(mesh: Any, local: torch.Tensor) -> accuracy.Results:
    name, value = accuracy.kept_leaf("layer.weight", _sharded(mesh, local))
    plain = accuracy.kept_leaf("head.bias", torch.ones(3))
    return accuracy.Results(outputs=[[("logits", torch.ones(2, 3))]], gradients=[[(name, value), plain]])


def test_a_dtensor_is_kept_as_this_ranks_shard_and_named_so(mesh: Any) -> None:
    local = torch.arange(6.0).reshape(2, 3)
    name, value = accuracy.kept_leaf("grad of w", _sharded(mesh, local))
    assert name == "grad of w (this rank's shard: Shard(dim=0) of [4, 3])"
    assert type(value) is torch.Tensor and torch.equal(value, local)
    local.add_(1)  # kept: later in-place changes do not reach it
    assert value[0, 0] == 0
    from torch.distributed.tensor import DTensor, Replicate

    replicated = DTensor.from_local(torch.ones(4), mesh, [Replicate()], run_check=False)
    assert accuracy.kept_leaf("output", replicated)[0] == "output (this rank's replica: Replicate() of [4])"
    assert accuracy.kept_leaf("loss", torch.ones(1))[0] == "loss"
    assert accuracy.kept_leaf("grad of frozen", None) == ("grad of frozen", None)


def test_sharded_gradients_are_judged_shard_by_shard(mesh: Any) -> None:
    shard = torch.randn(2, 3, generator=torch.Generator().manual_seed(0))
    eager, compiled = _gradients(mesh, shard), _gradients(mesh, shard + 1e-6)
    verdict = accuracy.judge(eager, compiled, None, train=True)
    assert verdict.within_tolerance and verdict.failed == 0 and not verdict.findings
    names = {c.name for c in verdict.checks}
    assert names == {"logits", "grad of head.bias", "grad of layer.weight (this rank's shard: Shard(dim=0) of [4, 3])"}
    assert "DTensors (FSDP2, tensor-parallel) judged shard by shard" in verdict.method
    assert "no collective" in verdict.method

    wrong = accuracy.judge(eager, _gradients(mesh, shard + 1.0), None, train=True)
    assert not wrong.within_tolerance and wrong.failed == 1
    assert wrong.checks[0].name.startswith("grad of layer.weight (this rank's shard")


def test_a_replicated_output_alone_says_how_it_was_judged(mesh: Any) -> None:
    from torch.distributed.tensor import DTensor, Replicate

    leaf = accuracy.kept_leaf("output", DTensor.from_local(torch.ones(4), mesh, [Replicate()], run_check=False))
    results = accuracy.Results(outputs=[[leaf]], gradients=[[]])
    assert "judged shard by shard" in accuracy.judge(results, results, None, train=False).method


def test_unsharded_results_say_nothing_of_shards() -> None:
    results = accuracy.Results(outputs=[[("y", torch.ones(2))]], gradients=[[("w", torch.ones(2))]])
    assert "shard" not in accuracy.judge(results, results, None, train=True).method


def test_an_fsdp2_model_has_no_float64_copy_and_says_why(mesh: Any) -> None:
    from torch.distributed.fsdp import fully_shard

    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Linear(6, 2))
    fully_shard(model[0], mesh=mesh)  # one layer only: still a model torch cannot copy
    assert accuracy.why_no_float64_copy(model) == (
        "an FSDP2 (fully_shard) model cannot be copied to float64: torch does not support copying one"
    )
    assert accuracy.why_no_float64_copy(torch.nn.Linear(2, 2)) == ""
    assert accuracy.why_no_float64_copy(lambda x: x) == ""


def test_a_ddp_models_float64_copy_is_wrapped_in_ddp_again(mesh: Any) -> None:
    from torch.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(torch.nn.Linear(3, 3))
    copied = accuracy.float64_copy(model)
    # a new DDP on the same group: its reducer all-reduces the float64 gradients as eager's are
    assert isinstance(copied, DistributedDataParallel) and copied is not model
    assert copied.process_group is model.process_group
    assert copied.module.weight.dtype == torch.float64 and model.module.weight.dtype == torch.float32
    assert torch.equal(copied.module.weight.float(), model.module.weight)
    assert accuracy.why_no_float64_copy(model) == ""
