"""Compiler stages on a GPU: the registers, spills, shared memory and occupancy the report shows, against the device.

python benchmarks/compiler_stages_gpu.py [--sample samples/block.py] [--work DIR] [--out RESULT.md]

1. ``inductor-lens compile SAMPLE --device cuda`` (the capture keeps its Triton cache: the stages pages come
   from what the GPU compiled);
2. for every Triton kernel of the report, its cubin (from ``capture/triton_cache``) is loaded on the device
   the way Triton loads it (``driver.active.utils.load_binary``: ``n_regs``, ``n_spills``), and the driver's
   ``cuOccupancyMaxActiveBlocksPerMultiprocessor`` is asked for its blocks per SM; both are compared with the
   report's registers, spills, shared memory (Triton's ``metadata.shared``) and computed occupancy;
3. the same report is rebuilt without the Triton cache (``report --compile-stages``: the kernels compiled ahead
   of time from the output code, the CPU path, with the config ``capture/best_configs.json`` names for each
   autotuned kernel) and its registers compared with the device's;
4. a screenshot of one stages page at 1,400 px, if Playwright is importable (else it says so).

Prints a markdown table (and writes it to ``--out``); exits 1 when a number disagrees.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _lens(*args: str) -> None:
    command = [sys.executable, "-m", "inductor_lens", *args]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True, cwd=ROOT)


def _device_numbers(entry: Path, name: str) -> tuple[int, int, int, int]:
    """n_regs, n_spills and metadata.shared as Triton loads the kernel, and the driver's blocks per SM."""
    import torch
    from triton.runtime import driver

    metadata = json.loads((entry / f"{name}.json").read_text())
    device = torch.cuda.current_device()
    torch.cuda.init()
    _, function, n_regs, n_spills, _ = driver.active.utils.load_binary(
        name, (entry / f"{name}.cubin").read_bytes(), metadata["shared"], device
    )
    blocks = ctypes.c_int(0)
    libcuda = ctypes.CDLL("libcuda.so.1")
    code = libcuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(
        ctypes.byref(blocks),
        ctypes.c_void_p(function),
        metadata["num_warps"] * 32,
        ctypes.c_size_t(metadata["shared"]),
    )
    return n_regs, n_spills, metadata["shared"], blocks.value if code == 0 else -1


def _screenshot(page: Path, png: Path) -> str:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "Playwright is not importable here: no screenshot"
    with sync_playwright() as playwright:
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        options = {"executable_path": chromium} if chromium else {}
        browser = playwright.chromium.launch(args=["--no-sandbox", "--disable-gpu"], **options)
        tab = browser.new_page(viewport={"width": 1400, "height": 1100})
        tab.goto(page.resolve().as_uri() + "#line=" + _a_mapped_line(page))
        tab.wait_for_timeout(300)
        tab.screenshot(path=str(png))
        browser.close()
    return f"screenshot: {png}"


def _a_mapped_line(page: Path) -> str:
    text = page.read_text()
    data = json.loads(text.split('id="st-data">', 1)[1].split("</script>", 1)[0])
    lines = sorted(data["lines"], key=lambda e: -len(e["sass"]))
    return str(lines[0]["l"]) if lines else "1"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sample", type=Path, default=ROOT / "samples" / "block.py")
    parser.add_argument("--work", type=Path, default=Path("/tmp/inductor-lens-stages-gpu"))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    report = args.work / "report"
    _lens(
        "compile",
        str(args.sample),
        "--device",
        "cuda",
        "--no-bench",
        "--no-handwritten",
        "--out",
        str(report),
    )
    document = json.loads((report / "lens.json").read_text())["run"]
    cache = report / "capture" / "triton_cache"
    entries = {
        json.loads(f.read_text()).get("hash"): f.parent
        for f in cache.glob("*/*.json")
        if not f.name.startswith("__grp__")
    }

    # the same capture without its cache: every kernel compiled ahead of time here (the CPU path)
    bare = args.work / "bare"
    shutil.copytree(report, bare)
    shutil.rmtree(bare / "capture" / "triton_cache")
    (bare / "lens.json").unlink()
    _lens("report", str(bare), "--out", str(args.work / "bare-report"), "--compile-stages")
    aot = {
        (s["graph_id"], s["kernel"]): s
        for s in json.loads((args.work / "bare-report" / "lens.json").read_text())["run"]["kernel_stages"]
    }

    rows, failures = [], 0
    header = ("| graph | kernel | origin | registers: report / device (n_regs) / compiled here | spills: report / device "
              "(n_spills) | shared: report / metadata.shared | blocks per SM: report / driver | agree | config (how known) |")  # fmt: skip
    for stages in document["kernel_stages"]:
        entry = entries.get(stages["cache_hash"])
        if entry is None or stages["error"]:
            rows.append(
                f"| {stages['graph_id']} | `{stages['kernel']}` | {stages['origin']} | {stages['error'] or 'no cache entry'} | | | | no |"
            )
            failures += 1
            continue
        n_regs, n_spills, shared, blocks = _device_numbers(entry, stages["kernel"])
        occupancy = (stages.get("occupancy") or {}).get("blocks_per_sm")
        here = aot.get((stages["graph_id"], stages["kernel"]), {}).get("registers")
        # the ahead-of-time path (no cache) compiles the config the capture's best_configs.json names
        agree = (stages["registers"], stages["spills"], stages["shared_bytes"], occupancy, here) == (
            n_regs,
            n_spills,
            shared,
            blocks,
            n_regs,
        )
        failures += not agree
        rows.append(
            f"| {stages['graph_id']} | `{stages['kernel']}` | {stages['origin']} | {stages['registers']} / {n_regs} / {here} "
            f"| {stages['spills']} / {n_spills} | {stages['shared_bytes']} / {shared} | {occupancy} / {blocks} | {'yes' if agree else 'NO'} "
            f"| {stages.get('config')} ({stages.get('config_note') or 'no note'}) |"
        )  # fmt: skip
    pages = sorted((report / "kernels").glob("*/*/stages.html"))
    shot = _screenshot(pages[0], args.work / "stages.png") if pages else "no stages page"
    text = "\n".join([
        f"Compiler stages of `{args.sample.name}` on {document['environment'].get('device_name')} "
        f"(torch {document['environment'].get('torch_version')}, Triton {document['environment'].get('triton_version')}):",
        "", header, "|" + "---|" * 9, *rows, "", shot,
    ])  # fmt: skip
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    sys.exit(1 if failures or not rows else 0)


if __name__ == "__main__":
    main()
