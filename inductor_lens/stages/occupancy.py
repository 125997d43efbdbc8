"""Compiler stages: the occupancy of a Triton kernel from its registers, shared memory and warps.

The SM limits per compute capability are those of the CUDA C++ Programming Guide's table "Technical
Specifications per Compute Capability" (maximum resident warps and blocks per SM, 64 K 32-bit registers per
SM, shared memory per SM at the largest carveout, 1 KB of shared memory reserved per block), and the rules
are those of the CUDA occupancy calculator (``cuda_occupancy.h``):

- registers are allocated per warp, ``ceil(registers x 32 / 256) x 256``, in each of the SM's 4
  sub-partitions: warps per SM = 4 x floor((65536 / 4) / registers per warp); a block whose registers
  exceed 65536 (its warps rounded up to a multiple of 4, as the hardware checks) does not launch;
- shared memory is allocated per block in units of 128 bytes, the kernel's own plus 1 KB reserved;
- warps and blocks per SM are capped by the table.

The shared memory of an SM is assumed at its largest carveout (Triton asks for shared memory above 48 KB
with ``CU_FUNC_CACHE_PREFER_SHARED``; for smaller kernels the driver picks the carveout itself).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..records.stages import Occupancy


@dataclass(frozen=True)
class SmLimits:
    max_warps: int
    max_blocks: int
    shared_per_sm: int  # bytes, largest carveout
    registers: int = 65536
    max_registers_per_thread: int = 255
    register_unit: int = 256  # registers allocated to a warp at a time
    sub_partitions: int = 4
    shared_unit: int = 128
    reserved_shared_per_block: int = 1024


# compute capability (major * 10 + minor) -> limits
SM_LIMITS: dict[int, SmLimits] = {
    80: SmLimits(max_warps=64, max_blocks=32, shared_per_sm=164 * 1024),  # A100
    86: SmLimits(max_warps=48, max_blocks=16, shared_per_sm=100 * 1024),  # RTX 30xx, A10, A40
    89: SmLimits(max_warps=48, max_blocks=24, shared_per_sm=100 * 1024),  # L4, L40, RTX 40xx
    90: SmLimits(max_warps=64, max_blocks=32, shared_per_sm=228 * 1024),  # H100, H200
}


def capability(text: str | int | None) -> int | None:
    """90 from "9.0", "sm_90", "sm_90a", 90 or "90"; None when unreadable."""
    if text is None:
        return None
    if isinstance(text, int):
        return text
    digits = text.strip().lower().removeprefix("sm_").removeprefix("sm").rstrip("a")
    if "." in digits:
        major, _, minor = digits.partition(".")
        return int(major) * 10 + int(minor) if major.isdigit() and minor.isdigit() else None
    return int(digits) if digits.isdigit() else None


def occupancy(cc: int, registers: int, shared_bytes: int, num_warps: int) -> Occupancy | None:
    """Blocks per SM and what limits them; None for an SM this table does not know."""
    limits = SM_LIMITS.get(cc)
    if limits is None or num_warps <= 0:
        return None
    per_warp = -(-registers * 32 // limits.register_unit) * limits.register_unit
    assumed_warps = -(-num_warps // limits.sub_partitions) * limits.sub_partitions
    if registers > limits.max_registers_per_thread or per_warp * assumed_warps > limits.registers:
        by_registers = 0
    elif per_warp == 0:
        by_registers = limits.max_blocks
    else:
        warps = (limits.registers // limits.sub_partitions) // per_warp * limits.sub_partitions
        by_registers = warps // num_warps
    per_block = (
        -(-(shared_bytes + limits.reserved_shared_per_block) // limits.shared_unit) * limits.shared_unit
    )
    by_shared = limits.shared_per_sm // per_block
    by_warps = limits.max_warps // num_warps
    limits_found = {
        "registers": by_registers, "shared memory": by_shared, "warps": by_warps, "blocks": limits.max_blocks,
    }  # fmt: skip
    limited_by = min(
        limits_found, key=lambda name: limits_found[name]
    )  # first of the smallest, in that order
    blocks = limits_found[limited_by]
    return Occupancy(
        arch=f"sm_{cc}",
        blocks_per_sm=blocks,
        limited_by=limited_by,
        warps_per_sm=blocks * num_warps,
        max_warps_per_sm=limits.max_warps,
        by_registers=by_registers,
        by_shared_memory=by_shared,
        by_warps=by_warps,
        max_blocks_per_sm=limits.max_blocks,
    )
