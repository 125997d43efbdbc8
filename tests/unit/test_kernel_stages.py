"""Compiler stages per Triton kernel (inductor_lens/stages), on this CPU machine, for the H200 of the captures.

Real Inductor kernels of the committed GPU captures are compiled here for sm_90 (Triton's wheel ships ptxas,
cuobjdump and nvdisasm), each once per test session: a pointwise kernel with an inlined libdevice erf
(mlp_default), an online-softmax + LayerNorm reduction (softmax_ln_default), a persistent LayerNorm reduction
(block_default) and a bf16 matmul template (mlp_bf16_max_autotune_nocg). The facts checked are exact: the
config the run's autotuning chose, registers and spills against ptxas's own ``-v`` report on the same PTX,
shared memory against Triton's metadata and the template's own tile arithmetic, the line map against the
PTX's ``.loc`` directives, occupancy by hand. A Triton cache folder, as a GPU capture leaves it, is read back
(the entry of the chosen config picked among two).

The GPU captures (torch 2.11) kept no Triton helpers: their kernels compile against the installed torch's
``triton_helpers``, and say so. Torch 2.14 added a required argument to ``online_softmax_combine``
(``strict_signed_zero``), so under it the online-softmax reduction does not compile and says why in one line.
A torch 2.14.1 capture (``cpu-torch2.14.1-softmax_ln-preview``) kept its helpers: its reduction compiles
against them under any torch, and without them, under a torch whose helper differs, says why.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from markupsafe import escape
from torch._inductor.runtime import triton_helpers

from inductor_lens.analysis import analyze
from inductor_lens.capture.triton_cache import (
    KEPT_CACHE_DIR,
    RUNTIME_HELPERS_DIR,
    keep_best_configs,
    keep_runtime_helpers,
    keep_triton_cache,
    kept_runtime_helpers,
)
from inductor_lens.parse import parse_debug_folder
from inductor_lens.records import CompileRun, GraphRecord, KernelRecord, KernelStages
from inductor_lens.report import render_report
from inductor_lens.stages import attach_stages, linemap, tools
from inductor_lens.stages.aot import CompileRequest, compile_kernels
from inductor_lens.stages.occupancy import capability, occupancy

from .test_autotune_best_config import _save_best_config

triton = pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(tools.tool_path("ptxas") is None, reason="this Triton ships no ptxas")

POINTWISE = ("mlp_default", "triton_poi_fused_gelu_0")
REDUCTION = (
    "softmax_ln_default",
    "triton_red_fused__softmax_add_exp_mul_native_layer_norm_prepare_softmax_online_sub_0",
)
PERSISTENT = ("block_default", "triton_per_fused_native_layer_norm_0")
TEMPLATE = ("mlp_bf16_max_autotune_nocg", "triton_tem_fused_addmm_t_0")
CASES = (POINTWISE, REDUCTION, PERSISTENT, TEMPLATE)
FIXTURES_TORCH = "2.11.0+cu130"  # the GPU captures'
# The 2.11 reduction calls online_softmax_combine with 4 arguments: this torch's helper needs 5 (torch 2.14+).
HELPERS_CHANGED = "strict_signed_zero" in triton_helpers.online_softmax_combine.arg_names
COMPILED = tuple(c for c in CASES if not (HELPERS_CHANGED and c == REDUCTION))
NOT_KEPT = f"captured with torch {FIXTURES_TORCH}; its Triton helpers were not kept in this capture"
PREVIEW_214 = ("cpu-torch2.14.1-softmax_ln-preview", "triton_red_fused__softmax_add_mul_native_layer_norm_prepare_softmax_online_0")


def _one_kernel_run(run: CompileRun, name: str) -> tuple[CompileRun, GraphRecord, KernelRecord]:
    """``run`` cut down to the first graph holding ``name``, with that kernel alone."""
    graph = next(g for g in run.graphs if g.kernel(name) is not None)
    kernel = graph.kernel(name)
    assert kernel is not None
    # the captures' graphs share their names: the case's name keeps them apart in one run
    graph = replace(graph, id=f"{Path(run.source_dir).name}-{graph.id}", kernels=(kernel,))
    return replace(run, graphs=(graph,)), graph, kernel


@pytest.fixture(scope="module")
def compiled(
    unpacked: Callable[[str], Path],
) -> dict[tuple[str, str], tuple[CompileRun, KernelRecord, KernelStages]]:
    """Each case's run (one kernel), the kernel, and its stages compiled here."""
    runs = {}
    for case in CASES:
        run, graph, kernel = _one_kernel_run(parse_debug_folder(unpacked(case[0])), case[1])
        runs[case] = (run, graph, kernel)
    # one run holding the four kernels: one compiler process for all
    merged = replace(runs[POINTWISE][0], graphs=tuple(graph for _, graph, _ in runs.values()))
    merged = attach_stages(merged, None, compile_missing=True)
    result = {}
    for case, (run, graph, kernel) in runs.items():
        stages = merged.stages_of(graph.id, kernel.name)
        assert stages is not None and (case in COMPILED) == (not stages.error), stages
        result[case] = (run, kernel, stages)
    return result


def test_kernels_of_another_torch_say_whose_helpers_they_were_compiled_against(compiled: dict) -> None:
    for case in COMPILED:
        assert compiled[case][2].notes[-1] == f"{NOT_KEPT}; compiled against torch {torch.__version__}'s helpers"
    if not HELPERS_CHANGED:
        return
    run, kernel, stages = compiled[REDUCTION]
    assert stages.error == (f"{NOT_KEPT}; torch {torch.__version__}'s triton_helpers.online_softmax_combine takes "
                            "other arguments (missing a required argument: 'strict_signed_zero')")  # fmt: skip
    staged = replace(run, kernel_stages=(stages,))
    page = render_report(staged, analyze(staged), draw=False)[f"kernels/{run.graphs[0].id}/{kernel.name}.html"]
    assert str(escape(f"not available: {stages.error}")) in page and "CompilationError" not in page


@pytest.mark.parametrize("case", COMPILED, ids=[c[0] for c in COMPILED])
def test_every_stage_is_there(compiled: dict, case: tuple[str, str]) -> None:
    _, kernel, stages = compiled[case]
    assert [t.stage for t in stages.texts] == ["ttir", "ttgir", "llir", "ptx", "sass"]
    assert stages.origin == "compiled here"
    assert stages.target == "sm_90"
    assert stages.triton_version == triton.__version__
    assert stages.capture_triton_version == "3.6.0"  # the H200 capture's
    assert f"@{kernel.name}" in stages.text("ttir").text  # type: ignore[union-attr]
    assert "triton_gpu" in stages.text("ttgir").text or "ttg." in stages.text("ttgir").text  # type: ignore[union-attr]
    assert f".visible .entry {kernel.name}(" in stages.text("ptx").text  # type: ignore[union-attr]
    assert ".target sm_90a" in stages.text("ptx").text  # type: ignore[union-attr]
    sass = stages.text("sass").text  # type: ignore[union-attr]
    assert "EXIT" in sass and "//##" not in sass
    assert stages.cache_hash and len(stages.cache_hash) == 64


def test_the_config_the_run_chose_is_compiled(compiled: dict) -> None:
    # what the trace logged as each kernel's best config on the H200
    assert dict(compiled[POINTWISE][2].config) == {"XBLOCK": 512, "num_warps": 8, "num_stages": 1}
    assert compiled[POINTWISE][2].config_note == "the config the run's autotuning chose"
    if REDUCTION in COMPILED:
        assert dict(compiled[REDUCTION][2].config) == {
            "R0_BLOCK": 1024,
            "XBLOCK": 1,
            "num_warps": 8,
            "num_stages": 1,
        }
    assert dict(compiled[PERSISTENT][2].config) == {"XBLOCK": 2, "num_warps": 1, "num_stages": 1}
    assert dict(compiled[TEMPLATE][2].config) == {"num_warps": 4, "num_stages": 3}
    assert compiled[TEMPLATE][2].config_note == "the kernel's only config"
    for case in COMPILED:
        stages = compiled[case][2]
        assert (stages.num_warps, stages.num_stages) == (
            stages.config["num_warps"],
            stages.config["num_stages"],
        )


def _ptxas_report(ptx: str, tmp_path: Path) -> tuple[int, int]:
    """Registers and stack-frame bytes that ptxas -v reports for the PTX, with Triton's own flags."""
    source = tmp_path / "kernel.ptx"
    source.write_text(ptx)
    command = [tools.tool_path("ptxas"), "-lineinfo", "-v", "--regAllocOptLevel=2", "--gpu-name=sm_90a",
               str(source), "-o", str(tmp_path / "kernel.cubin")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)  # type: ignore[arg-type]
    registers = re.search(r"Used (\d+) registers", done.stderr)
    frame = re.search(r"(\d+) bytes stack frame", done.stderr)
    assert registers and frame, done.stderr
    return int(registers.group(1)), int(frame.group(1))


@pytest.mark.parametrize("case", COMPILED, ids=[c[0] for c in COMPILED])
def test_registers_and_spills_are_what_ptxas_reports(
    compiled: dict, case: tuple[str, str], tmp_path: Path
) -> None:
    stages = compiled[case][2]
    registers, frame = _ptxas_report(stages.text("ptx").text, tmp_path)
    assert stages.registers == registers
    assert stages.local_bytes == frame
    assert stages.spills == frame // 4  # Triton's n_spills: CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES / 4


def test_shared_memory_is_the_metadata_and_the_tiles(compiled: dict) -> None:
    template = compiled[TEMPLATE][2]
    # 3 stages of a 128x64 A tile and a 64x128 B tile in bf16 (the template's config_args)
    assert template.shared_bytes == 3 * (128 * 64 + 64 * 128) * 2 == 98304
    # the reduction's cross-warp scratch: the H200's own benchmark (output_code.py -k) said 96 too
    assert REDUCTION not in COMPILED or compiled[REDUCTION][2].shared_bytes == 96
    assert compiled[POINTWISE][2].shared_bytes == 0


def _loc_above(ptx_lines: list[str], number: int) -> str:
    """The last ``.loc`` directive at or above PTX line ``number`` (1-based)."""
    return next(text for text in reversed(ptx_lines[:number]) if text.strip().startswith(".loc"))


def test_a_python_line_maps_to_the_ptx_lines_of_its_loc(compiled: dict) -> None:
    _, kernel, stages = compiled[POINTWISE]
    source = kernel.source.splitlines()
    erf = 1 + next(i for i, text in enumerate(source) if "libdevice.erf(" in text)
    store = 1 + next(i for i, text in enumerate(source) if "tl.store(" in text)
    spans = {s.line: s for s in stages.lines}
    assert erf in spans and store in spans
    ptx = stages.text("ptx").text.splitlines()
    files = dict(re.findall(r'\.file\s+(\d+)\s+"([^"]+)"', "\n".join(ptx)))
    kernel_file = next(k for k, path in files.items() if path.endswith(f"/{kernel.name}.py"))
    for line in (erf, store):
        assert spans[line].ptx and spans[line].sass
        for first, _last in spans[line].ptx:
            loc = _loc_above(ptx, first)
            own = re.match(rf"\s*\.loc\s+{kernel_file}\s+{line}\s", loc)
            inlined = re.search(rf"inlined_at\s+{kernel_file}\s+{line}\s", loc)
            assert own or inlined, (line, first, loc)
    stored = [ptx[n - 1] for first, last in spans[store].ptx for n in range(first, last + 1)]
    assert any("st.global" in text for text in stored)
    sass = stages.text("sass").text.splitlines()
    assert any("STG" in sass[n - 1] for first, last in spans[store].sass for n in range(first, last + 1))


def test_an_inlined_helper_counts_for_the_kernel_line_that_called_it() -> None:
    ptx = "\n".join([
        ".visible .entry k(", "{", "\t.loc\t1 22 0", "\tmov.u32 %r1, 0;",
        "\t.loc\t2 45 10  // triton_helpers.py:45:10 @[ triton_helpers.py:60:3 @[ k.py:30:12 ] ]",
        "\tmax.f32 %f1, %f2, %f3;", "\t.loc\t1 0 0", "\tmov.u32 %r2, 1;", "\t.loc\t1 30 5", "\tadd.f32 %f4, %f1, %f1;",
        "\t.loc\t2 50 1, function_name $L__info_string0, inlined_at 1 31 2", "\tmin.f32 %f5, %f4, %f1;", "}",
        '\t.file\t1 "/tmp/k.py"', '\t.file\t2 "/site/triton_helpers.py"',
    ])  # fmt: skip
    mapped = linemap.ptx_lines(ptx)
    assert mapped.lines == {4: 22, 6: 30, 8: 0, 10: 30, 12: 31}
    assert mapped.kernel_file == "/tmp/k.py" and mapped.helpers == {
        ("triton_helpers.py", 45): {30},
        ("triton_helpers.py", 50): {31},
    }
    sass, mapping = linemap.sass_lines(
        '\t//## File "/other/k.py", line 22\n        /*0000*/ LDC R1, c[0x0][0x28] ;\n'
        '\t//## File "/site/triton_helpers.py", line 45\n        /*0010*/ FMNMX R0, R1, R2, !PT ;\n'
        '\t//## File "/site/triton_helpers.py", line 99\n        /*0020*/ EXIT ;\n',
        mapped,
    )
    # the cubin's table names the helper's line only: line 45 was inlined for kernel line 30 alone
    assert "//##" not in sass and mapping == {1: 22, 2: 30, 3: 0}
    spans = linemap.line_spans(mapped.lines, mapping)
    # the instruction of no line (8) splits line 30's PTX into two ranges
    assert [(s.line, s.ptx, s.sass) for s in spans] == [
        (22, ((4, 4),), ((1, 1),)), (30, ((6, 6), (10, 10)), ((2, 2),)), (31, ((12, 12),), ()),
    ]  # fmt: skip


def test_occupancy_arithmetic() -> None:
    # 227 registers: 7424 per warp, 2 warps per sub-partition, 8 per SM: 2 blocks of 4 warps; shared memory
    # 98304 + 1024 reserved: 2 blocks in 228 KB. Registers come first among equal limits.
    h200 = occupancy(90, 227, 98304, 4)
    assert h200 is not None
    assert (h200.by_registers, h200.by_shared_memory, h200.by_warps, h200.blocks_per_sm) == (2, 2, 16, 2)
    assert h200.limited_by == "registers" and h200.warps_per_sm == 8 and h200.fraction == 8 / 64
    small = occupancy(90, 64, 0, 2)  # 2048 registers a warp: 32 warps, 16 blocks
    assert small is not None and (small.blocks_per_sm, small.limited_by, small.by_shared_memory) == (
        16,
        "registers",
        228,
    )
    ampere = occupancy(86, 32, 0, 8)  # 64 warps' worth of registers, but an sm_86 holds 48 warps
    assert ampere is not None and (ampere.blocks_per_sm, ampere.limited_by) == (6, "warps")
    too_many = occupancy(90, 255, 0, 32)  # 8192 registers a warp x 32 warps > 65536: does not launch
    assert too_many is not None and too_many.blocks_per_sm == 0
    big_shared = occupancy(80, 40, 163840, 8)  # 160 KB + 1 KB of A100's 164 KB: one block
    assert big_shared is not None and (big_shared.blocks_per_sm, big_shared.limited_by) == (
        1,
        "shared memory",
    )
    assert occupancy(75, 32, 0, 4) is None
    assert [capability(t) for t in ("9.0", "sm_90a", "86", 80, None)] == [90, 90, 86, 80, None]


def test_the_stages_of_the_compiled_kernels_occupancy(compiled: dict) -> None:
    stages = compiled[TEMPLATE][2]
    assert stages.occupancy == occupancy(90, stages.registers, 98304, 4)


def test_a_triton_cache_folder_as_a_gpu_capture_leaves_it(compiled: dict, tmp_path: Path) -> None:
    """Two configs of one kernel in a Triton cache, kept as the capture keeps it: the chosen one is read."""
    run, kernel, here = compiled[POINTWISE]
    requests = [
        CompileRequest(
            "chosen", kernel.name, kernel.source, {"XBLOCK": 512, "num_warps": 8, "num_stages": 1}, 90
        ),
        CompileRequest(
            "other", kernel.name, kernel.source, {"XBLOCK": 1024, "num_warps": 4, "num_stages": 1}, 90
        ),
    ]
    outcomes = compile_kernels(requests, tmp_path / "work")
    assert all(o.folder is not None for o in outcomes.values()), outcomes
    capture_dir = tmp_path / "capture"
    assert keep_triton_cache(tmp_path / "work" / "cache", capture_dir) == 2
    kept = sorted(p.name for p in (capture_dir / KEPT_CACHE_DIR).glob("*/*"))
    assert len(kept) == 12 and not any(
        name.startswith("__grp__") or name.endswith(".source") for name in kept
    )
    # the kernel's file as Inductor's cache names it on the GPU box: the entry's TTIR names the file it compiled
    cached = attach_stages(replace(run, kernel_stages=()), capture_dir)
    graph = run.graphs[0]
    stages = cached.stages_of(graph.id, kernel.name)
    assert stages is not None and stages.origin == "capture cache"
    assert (stages.num_warps, stages.config["XBLOCK"]) == (8, 512)
    chosen = json.loads(next((capture_dir / KEPT_CACHE_DIR).glob(f"*/{kernel.name}.json")).read_text())
    assert stages.cache_hash in {chosen["hash"], here.cache_hash}
    assert stages.cache_hash == here.cache_hash  # the same compile as the stages compiled here
    assert (stages.registers, stages.spills, stages.shared_bytes) == (
        here.registers,
        here.spills,
        here.shared_bytes,
    )
    assert not stages.notes  # told apart from the other config: nothing ambiguous


def test_a_capture_without_timing_reads_the_choice_in_inductors_autotune_cache(
    compiled: dict, tmp_path: Path
) -> None:
    """The trace logged no best_config and the run was not timed: the best_config Inductor's autotuner wrote
    beside the kernel's file (kept by the capture) names the config and the folder its binary compiled into."""
    run, kernel, _ = compiled[POINTWISE]
    configs = {"a": {"XBLOCK": 512, "num_warps": 8, "num_stages": 1}, "b": {"XBLOCK": 1024, "num_warps": 4}}
    requests = [
        CompileRequest(k, kernel.name, kernel.source, {"num_stages": 1, **c}, 90) for k, c in configs.items()
    ]
    outcomes = compile_kernels(requests, tmp_path / "work")
    winner = outcomes["b"].folder
    assert winner is not None and outcomes["a"].folder is not None, outcomes
    capture_dir, inductor = tmp_path / "capture", tmp_path / "caches" / "inductor"
    assert keep_triton_cache(tmp_path / "work" / "cache", capture_dir) == 2
    assert kernel.kernel_path is not None
    kernel_file = inductor / Path(kernel.kernel_path).parent.name / Path(kernel.kernel_path).name
    _save_best_config(kernel_file, {"XBLOCK": 1024}, 4, cache_hash=winner.name)
    assert keep_best_configs(inductor, capture_dir) == 1
    untimed = replace(kernel, autotune_info={}, timing=None)
    graph = replace(run.graphs[0], kernels=(untimed,))
    cached = attach_stages(replace(run, graphs=(graph,), kernel_stages=()), capture_dir)
    stages = cached.stages_of(graph.id, kernel.name)
    assert stages is not None and stages.origin == "capture cache"
    assert dict(stages.config) == {"XBLOCK": 1024, "num_warps": 4, "num_stages": 1}
    assert stages.config_note.startswith("the config the run's autotuning chose (Inductor's autotune cache")
    assert stages.num_warps == 4 and not stages.notes
    assert stages.cache_hash == json.loads(next(winner.glob(f"{kernel.name}.json")).read_text())["hash"]


def test_stages_survive_lens_json_and_render(compiled: dict) -> None:
    run, kernel, stages = compiled[TEMPLATE]
    run = replace(run, kernel_stages=(stages,))
    again = CompileRun.from_json(run.to_json())
    assert again.kernel_stages == (stages,)
    assert again.kernel_stages[0].text("ptx").text == stages.text("ptx").text  # type: ignore[union-attr]
    compressed = sum(len(t.compressed) for t in stages.texts)
    assert compressed * 5 < sum(t.chars for t in stages.texts)  # stored at least five times smaller
    graph = run.graphs[0]
    files = render_report(again, analyze(again), draw=False)
    base = f"kernels/{graph.id}/{kernel.name}"
    assert {f"{base}/{s}.html" for s in ("stages", "ttir", "ttgir", "llir", "ptx", "sass")} <= set(files)
    page = files[f"{base}/stages.html"]
    assert "How to read this page" in page and f"{stages.registers} per thread" in page
    assert (
        "98,304 bytes (98.3 KB)" in page
        and f"Compiled here for sm_90 with Triton {triton.__version__}" in page
    )
    assert "the capture used Triton 3.6.0" in page
    assert 'id="st-data"' in page and f"id=ptx-{stages.text('ptx').lines}>" in page  # type: ignore[union-attr]
    assert f'{kernel.name}/stages.html">TTIR, TTGIR, LLVM IR, PTX and SASS' in files[f"{base}.html"]


def test_the_launcher_the_run_kept_names_the_config_where_the_trace_does_not(
    unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    """h200-block-autotune-timed: each Triton kernel had 2 configs and the trace logged no best_config; the model
    process read the launcher autotuning kept ("XBLOCK: 512, num_warps: 8, ..."), and that is the config compiled
    ahead of time (on an H100, the first config in its place gave 31 registers where the device ran 19)."""
    from inductor_lens import api
    from inductor_lens.stages.cache import chosen_config

    run = api.report_folder(unpacked("h200-block-autotune-timed"), tmp_path / "report", draw=False).run
    chosen = {k.name: chosen_config(k) for _, k in run.all_kernels()}
    assert chosen["triton_poi_fused_addmm_gelu_view_2"] == (
        {"XBLOCK": 512, "num_warps": 8, "num_ctas": 1, "num_stages": 1},
        "the launcher the run kept (read in the model process after autotuning)",
    )
    assert chosen["triton_per_fused_native_layer_norm_0"][0] == {"XBLOCK": 1, "num_warps": 1, "num_ctas": 1, "num_stages": 1}


def test_stages_compiled_here_take_the_config_the_kept_best_config_names(
    unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    """A capture without timing, copied without its Triton cache: its best_configs.json (kept beside the cache)
    names the kernel's file, so the ahead-of-time compile takes the autotuner's choice, not the first config
    (on an H200 the first config of block.py's gelu kernel gave 31 registers where the run's choice had 19)."""
    run = parse_debug_folder(unpacked(POINTWISE[0]))
    run, graph, kernel = _one_kernel_run(run, POINTWISE[1])
    untimed = replace(kernel, autotune_info={}, timing=None)  # the trace logged no best_config
    run = replace(run, graphs=(replace(graph, kernels=(untimed,)),))
    (guessed,) = attach_stages(run, None, compile_missing=True).kernel_stages
    assert guessed.config == {"XBLOCK": 1024, "num_warps": 4, "num_stages": 1}
    assert guessed.config_note == "the run's choice is not recorded: compiled the first of 2 configs"
    kernel_file = Path(kernel.kernel_path or "")
    capture = tmp_path / "capture"
    capture.mkdir()
    kept = {"XBLOCK": 512, "num_warps": 8, "num_stages": 1, "triton_cache_hash": "ELSEWHERE",
            "kernel_file": f"{kernel_file.parent.name}/{kernel_file.name}"}  # fmt: skip
    (capture / "best_configs.json").write_text(json.dumps({f"{kernel_file.parent.name}/k.best_config": kept}))
    (chosen,) = attach_stages(run, capture, compile_missing=True).kernel_stages
    assert chosen.origin == "compiled here" and chosen.config == {"XBLOCK": 512, "num_warps": 8, "num_stages": 1}
    assert chosen.config_note.endswith("(Inductor's autotune cache, matched to the kernel's file by torch's own key)")
    assert chosen.registers is not None and guessed.registers is not None and chosen.registers != guessed.registers


def test_the_capture_keeps_the_triton_helpers_its_kernels_import(
    compiled: dict, tmp_path: Path
) -> None:
    """A capture whose Inductor cache holds a Triton kernel file keeps this torch's helper modules and version;
    one with C++ kernels only keeps none."""
    _, kernel, _ = compiled[POINTWISE]
    cpp_only, triton_run = tmp_path / "cpp" / "inductor", tmp_path / "triton" / "inductor"
    (cpp_only / "ab").mkdir(parents=True)
    (cpp_only / "ab" / "cpp_kernel.py").write_text("from torch._inductor.codecache import CppWrapperCodeCache\n")
    assert keep_runtime_helpers(cpp_only, tmp_path / "cpp" / "capture") is None
    assert not (tmp_path / "cpp" / "capture").exists()
    (triton_run / "cd").mkdir(parents=True)
    (triton_run / "cd" / f"{kernel.name}.py").write_text(kernel.source)
    kept = keep_runtime_helpers(triton_run, tmp_path / "triton" / "capture")
    assert kept == kept_runtime_helpers(tmp_path / "triton" / "capture")
    assert kept is not None and kept.torch_version == torch.__version__
    assert kept.folder == tmp_path / "triton" / "capture" / RUNTIME_HELPERS_DIR
    runtime = Path(triton_helpers.__file__).parent
    assert sorted(p.name for p in kept.folder.iterdir()) == ["kept.json", "triton_compat.py", "triton_helpers.py"]
    for name in ("triton_helpers.py", "triton_compat.py"):
        assert (kept.folder / name).read_bytes() == (runtime / name).read_bytes()


@pytest.mark.parametrize("kept", [True, False], ids=["helpers-kept", "helpers-removed"])
def test_a_torch_2_14_capture_compiles_against_the_helpers_it_kept(
    unpacked: Callable[[str], Path], tmp_path: Path, kept: bool
) -> None:
    """The torch 2.14.1 preview of samples/softmax_ln.py calls ``online_softmax_combine(max, sum, x, False,
    False)``. With its helpers kept it compiles against them under any torch (the PTX names the kept file);
    without them it compiles where this torch's helper takes those arguments, else says why in one line."""
    capture = tmp_path / "capture"
    shutil.copytree(unpacked(PREVIEW_214[0]), capture)
    if not kept:
        shutil.rmtree(capture / RUNTIME_HELPERS_DIR)
    run = parse_debug_folder(capture)
    assert run.environment.torch_version == "2.14.1+cu130"
    (kernel,) = [k for _, k in run.all_kernels()]
    assert kernel.name == PREVIEW_214[1] and "_tmp6_max, _tmp6_sum, tmp5,\n            False, False\n" in kernel.source
    (stages,) = attach_stages(run, capture, compile_missing=True).kernel_stages
    if kept:
        assert not stages.error and stages.notes[-1] == "compiled against the Triton helpers kept with the capture (torch 2.14.1+cu130)"
        files = re.findall(r'\.file\s+\d+\s+"([^"]+)"', stages.text("ptx").text)  # type: ignore[union-attr]
        assert str(capture / RUNTIME_HELPERS_DIR / "triton_helpers.py") in files
        assert not any(f.endswith("torch/_inductor/runtime/triton_helpers.py") for f in files)
    elif torch.__version__ == "2.14.1+cu130":  # the capture's own torch: its helpers are this torch's
        assert not stages.error and not any("helpers" in note for note in stages.notes)
    elif HELPERS_CHANGED:
        assert not stages.error and stages.notes[-1] == (
            "captured with torch 2.14.1+cu130; its Triton helpers were not kept in this capture; "
            f"compiled against torch {torch.__version__}'s helpers"
        )
    else:
        assert stages.error == (
            "captured with torch 2.14.1+cu130; its Triton helpers were not kept in this capture; torch "
            f"{torch.__version__}'s triton_helpers.online_softmax_combine takes other arguments (too many positional arguments)"
        )
    if not stages.error:
        assert stages.target == "sm_90" and [t.stage for t in stages.texts] == ["ttir", "ttgir", "llir", "ptx", "sass"]
