"""--find-divergence's walk on recorded data: each buffer judged against its node by the accuracy rule, the
first out of bounds in launch order named with the ones before it, and the record read back from JSON."""

from __future__ import annotations

from collections import Counter

import torch

from inductor_lens.records import Launch, SourceLine
from inductor_lens.records.codec import from_jsonable, to_jsonable
from inductor_lens.records.numerics import NumericDivergence, divergence_headline
from inductor_lens.worker.divergence import compare, first_divergence, summarize
from inductor_lens.worker.divergence_watch import Written


def launch(position: int, target: str, kind: str = "cpp") -> Launch:
    return Launch(position=position, kind=kind, target=target, line=100 + position, code=f"{target}(buf)")  # type: ignore[arg-type]


def test_walk_names_the_first_buffer_out_of_bounds() -> None:
    torch.manual_seed(0)
    x64 = torch.randn(64, 64, dtype=torch.float64)
    eager = x64.float()  # the node in the model's dtype: float32 rounding only
    skipped: Counter[str] = Counter()
    recorded = [
        (Written(launch(1, "extern_kernels.mm", "extern"), "buf0", eager.clone()), "mm"),
        # a fused kernel that rounds differently: off by an ulp here and there, still as close as eager
        (Written(launch(2, "cpp_fused_add_0"), "buf1", eager.nextafter(eager + 1)), "add"),
        (Written(launch(3, "cpp_fused_mul_1"), "buf2", eager * 1.01), "mul"),  # the bug
        (Written(launch(4, "cpp_fused_relu_2"), "buf3", eager * 1.02), "relu"),  # downstream of it
    ]
    checks = [compare(written, node, eager, x64, skipped) for written, node in recorded]
    assert all(c is not None for c in checks) and not skipped
    judged = [c for c in checks if c is not None]
    assert [c.within for c in judged] == [True, True, False, False]
    assert first_divergence(judged) == 2
    found = summarize(judged, ["1 buffer: their node gives several tensors or none (var_mean, a tuple)"], [])
    assert found.status == "diverged" and found.compared == 4 and found.earlier == 0
    assert [c.buffer for c in found.checks] == ["buf0", "buf1", "buf2"]  # up to and including the first
    first = found.first
    assert first is not None and (first.target, first.buffer, first.node) == ("cpp_fused_mul_1", "buf2", "mul")
    assert first.compiled_rmse is not None and first.limit is not None and first.compiled_rmse > 100 * first.limit
    assert judged[1].note == "within 0.0001 of eager"
    first_with_line = type(first)(**{**first.__dict__, "source": SourceLine("/m/model.py", 12, "forward", "y = x * 2")})
    assert first_with_line.place == "cpp_fused_mul_1 (buf2 = mul, model.py:12)"


def test_compare_reshapes_unit_dims_and_skips_what_it_cannot_judge() -> None:
    skipped: Counter[str] = Counter()
    value = torch.arange(10, dtype=torch.float32)
    # a (1, 10) buffer for a (10,) node: the same values
    check = compare(Written(launch(1, "cpp_fused_sum_0"), "buf2", value.reshape(1, 10)), "sum_1", value,
                    value.double(), skipped)  # fmt: skip
    assert check is not None and check.within and check.tensor == "float32[10]"
    # a node of several tensors (var_mean), and one of another shape: counted, never judged
    several = compare(Written(launch(2, "cpp_fused_var_mean_1"), "buf3", value), "var_mean", (value, value),
                      None, skipped)  # fmt: skip
    other = compare(Written(launch(3, "cpp_fused_view_2"), "buf4", value.reshape(2, 5)), "view", value.reshape(5, 2),
                    None, skipped)  # fmt: skip
    assert several is None and other is None
    assert skipped == Counter({"their node gives several tensors or none (var_mean, a tuple)": 1,
                               "of another shape or dtype than their node": 1})  # fmt: skip


def test_agreement_keeps_the_closest_and_reads_back_from_json() -> None:
    skipped: Counter[str] = Counter()
    base = torch.linspace(-1, 1, 50, dtype=torch.float64)
    checks = [compare(Written(launch(i, f"cpp_fused_{i}"), f"buf{i}", (base * (1 + i * 1e-7)).float()), f"n{i}",
                      base.float(), base, skipped) for i in range(1, 4)]  # fmt: skip
    found = summarize([c for c in checks if c is not None], [], [])
    assert found.status == "agrees" and found.first is None and found.compared == 3
    assert divergence_headline(found) == "no kernel output diverges (3 buffers judged against their FX nodes)"
    assert from_jsonable(NumericDivergence, to_jsonable(found)) == found
