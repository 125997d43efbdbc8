"""Fuzz ``inductor-lens report`` with odd folders made from the real captures in tests/fixtures.

python benchmarks/fuzz_report.py --cases 10000 --seed 1 [--jobs 2] [--render lenient|all|none] [--case N]

Each case copies one capture (hard links; a mutated file is always rewritten as a new file, so the
unpacked originals never change), applies one to three seeded mutations of the kinds a folder from the
field shows (files truncated, emptied, deleted, bytes flipped, garbage or duplicated lines, trace
records whose JSON values have another type, an artifact ``name`` that is a list, a ``str`` record
whose index is not an integer, json files with values of another type, renamed or swapped files...),
then runs the code path of ``inductor-lens report FOLDER --out OUT``
(``inductor_lens.api.report_folder``) twice: lenient and ``--strict``. Outcomes:

- report: a report was written (lenient) or the whole pipeline ran (strict);
- error: an expected LensError, whose one-line message must hold no raw control characters;
- uncaught: anything else; printed with the case's mutations and the place it was raised.

The strict run renders nothing (``render`` is stubbed): when strict parsing passes, the run equals the
lenient one of the same case, which is rendered. ``--render all`` renders both, ``none`` neither.
Cases whose result went through the parser registry's safety net (an unexpected exception inside one
parser, turned into a warning) are counted apart. Case N of seed S is the same on every machine:
``--case N`` replays one and prints its traceback.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import shutil
import sys
import tarfile
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from inductor_lens import api, pipeline  # noqa: E402
from inductor_lens.errors import LensError  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
TEXT_SUFFIXES = {".py", ".txt", ".log", ".json", ".svg", ".dot", ".md"}
TRACE_PREFIX = "dedicated_log_torch_trace"


# --- the captures ------------------------------------------------------------------------------


@dataclass
class Capture:
    name: str
    root: Path
    files: list[str]  # relative paths, sorted


def unpack_all(target: Path, names: Iterable[str] | None = None) -> list[Capture]:
    """Unpack each fixture archive once; every case then copies one of them."""
    captures = []
    for archive in sorted(FIXTURES.glob("*.tar.gz")):
        name = archive.name.removesuffix(".tar.gz")
        if names is not None and name not in names:
            continue
        folder = target / name
        if not folder.exists():
            folder.mkdir(parents=True)
            with tarfile.open(archive) as tar:
                # the "data" filter where this Python's tarfile has it (3.10.12+, 3.11.4+)
                tar.extractall(folder, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        (root,) = folder.iterdir()
        files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
        if not any("torch_compile_debug/" in f for f in files):
            continue  # not a capture (e.g. the saved lens.json documents of lens-schema5)
        captures.append(Capture(name, root, files))
    return captures


def _fingerprint(captures: list[Capture]) -> dict[str, tuple[int, int]]:
    return {
        str(c.root / f): ((c.root / f).stat().st_size, (c.root / f).stat().st_mtime_ns)
        for c in captures
        for f in c.files
    }


# --- mutations ---------------------------------------------------------------------------------


def _rewrite(path: Path, data: bytes) -> None:
    """Never write through a hard link: the original capture is shared by every case."""
    path.unlink()
    path.write_bytes(data)


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


_ODD_VALUES: list[Any] = [
    0,
    -1,
    7,
    1.5,
    10**20,
    float("nan"),
    float("inf"),
    True,
    None,
    "",
    "x",
    "12",
    "\x00\x1b[31mred\x07",
    [],
    [1, "a"],
    [["k", 1], 2],
    {},
    {"k": 1},
    {"name": ["a"]},
]


def _odd_value(rng: random.Random, current: Any) -> Any:
    """A value of another JSON type than ``current``."""
    kinds = [v for v in _ODD_VALUES if type(v) is not type(current)]
    return rng.choice(kinds)


def _mutate_json(rng: random.Random, data: Any) -> tuple[Any, str]:
    """Replace one node, reached by a random descent, with a value of another type."""
    path: list[Any] = []
    node = data
    parent: Any = None
    while isinstance(node, (dict, list)) and node and (not path or rng.random() < 0.75):
        key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        parent, node = node, node[key]
        path.append(key)
    new = _odd_value(rng, node)
    if parent is None:
        return new, f"root {type(node).__name__} -> {type(new).__name__}"
    parent[path[-1]] = new
    where = "/".join(str(p) for p in path)[:80]
    return data, f"{where}: {type(node).__name__} -> {type(new).__name__}"


def _record_lines(lines: list[bytes]) -> list[int]:
    return [i for i, line in enumerate(lines) if b"] {" in line and not line.startswith(b"\t")]


def _split_record(line: bytes) -> tuple[bytes, Any] | None:
    head, sep, body = line.partition(b"] {")
    if not sep:
        return None
    try:
        return head + b"] ", json.loads(b"{" + body)
    except ValueError:
        return None


def _join_record(head: bytes, data: Any) -> bytes:
    return head + json.dumps(data).encode() + b"\n"


def _pick_record(rng: random.Random, lines: list[bytes], want: Callable[[dict], bool]) -> int | None:
    candidates = []
    for i in _record_lines(lines):
        parsed = _split_record(lines[i])
        if parsed is not None and isinstance(parsed[1], dict) and want(parsed[1]):
            candidates.append(i)
    return rng.choice(candidates) if candidates else None


def m_truncate(rng: random.Random, path: Path) -> str:
    data = path.read_bytes()
    cut = rng.randrange(len(data)) if data else 0
    _rewrite(path, data[:cut])
    return f"truncate at {cut}/{len(data)}"


def m_empty(rng: random.Random, path: Path) -> str:
    _rewrite(path, b"")
    return "empty"


def m_delete(rng: random.Random, path: Path) -> str:
    path.unlink()
    return "delete"


def m_flip(rng: random.Random, path: Path) -> str:
    data = bytearray(path.read_bytes())
    if not data:
        return "flip (empty file)"
    count = rng.randint(1, 8)
    for _ in range(count):
        i = rng.randrange(len(data))
        data[i] ^= rng.randint(1, 255)
    _rewrite(path, bytes(data))
    return f"flip {count} byte(s)"


def m_binary_line(rng: random.Random, path: Path) -> str:
    lines = _lines(path)
    at = rng.randint(0, len(lines))
    garbage = bytes(rng.randrange(256) for _ in range(rng.randint(1, 60))).replace(b"\n", b"") + b"\n"
    lines.insert(at, garbage)
    _rewrite(path, b"".join(lines))
    return f"binary line at {at}"


def m_garbage_line(rng: random.Random, path: Path) -> str:
    lines = _lines(path)
    at = rng.randint(0, len(lines))
    garbage = rng.choice(
        [
            b"%%% garbage %%%\n",
            b"\tpayload line without a record\n",
            b"V1121 21:49:53.467000 994 x.py:1] {not json}\n",
            b'V1121 21:49:53.467000 994 x.py:1] {"brand_new_kind": {}, "frame_id": 0, "frame_compile_id": 0}\n',
            b'V1121 21:49:53.467000 994 x.py:1] {"artifact": {"name": "brand_new_artifact"}}\n',
            b"V1121 21:49:53.467000 994 x.py:1] [1, 2]\n",
            b'V1121 21:49:53.467000 994 x.py:1] {"frame_id": 0}\n',
            b"def forward(self, x):\n",
            b"op99: SchedulerNode(ComputedBuffer)\n",
            b"buf0 = weird_call(x)\n",
            b"    \n",
        ]
    )
    lines.insert(at, garbage)
    _rewrite(path, b"".join(lines))
    return f"garbage line at {at}: {garbage[:40]!r}"


def m_duplicate_lines(rng: random.Random, path: Path) -> str:
    lines = _lines(path)
    if not lines:
        return "duplicate (empty file)"
    start = rng.randrange(len(lines))
    end = min(len(lines), start + rng.randint(1, 20))
    lines[end:end] = lines[start:end]
    _rewrite(path, b"".join(lines))
    return f"duplicate lines {start}-{end}"


def m_delete_lines(rng: random.Random, path: Path) -> str:
    lines = _lines(path)
    if not lines:
        return "delete lines (empty file)"
    start = rng.randrange(len(lines))
    end = min(len(lines), start + rng.randint(1, 20))
    del lines[start:end]
    _rewrite(path, b"".join(lines))
    return f"delete lines {start}-{end}"


def m_trace_record_type(rng: random.Random, path: Path) -> str:
    lines = _lines(path)
    index = _pick_record(rng, lines, lambda d: True)
    if index is None:
        return "record type (no record)"
    head, data = _split_record(lines[index])  # type: ignore[misc]
    data, what = _mutate_json(rng, data)
    lines[index] = _join_record(head, data)
    _rewrite(path, b"".join(lines))
    return f"record line {index + 1}: {what}"


def m_trace_payload_type(rng: random.Random, path: Path) -> str:
    lines = _lines(path)
    starts = [i for i in _record_lines(lines) if i + 1 < len(lines) and lines[i + 1].startswith(b"\t")]
    rng.shuffle(starts)
    for start in starts[:30]:
        end = start + 1
        while end < len(lines) and lines[end].startswith(b"\t"):
            end += 1
        text = b"".join(line[1:] for line in lines[start + 1 : end])
        try:
            data = json.loads(text)
        except ValueError:
            continue
        data, what = _mutate_json(rng, data)
        lines[start + 1 : end] = [b"\t" + json.dumps(data).encode() + b"\n"]
        _rewrite(path, b"".join(lines))
        return f"payload of line {start + 1}: {what}"
    return "payload type (no JSON payload)"


def m_artifact_name(rng: random.Random, path: Path) -> str:
    lines = _lines(path)
    index = _pick_record(rng, lines, lambda d: isinstance(d.get("artifact"), dict))
    if index is None:
        return "artifact name (no artifact)"
    head, data = _split_record(lines[index])  # type: ignore[misc]
    name = data["artifact"].get("name")
    data["artifact"]["name"] = rng.choice([[name], [name, name], {"name": name}, 7, None])
    lines[index] = _join_record(head, data)
    _rewrite(path, b"".join(lines))
    return f"artifact {name!r} at line {index + 1}: name -> {type(data['artifact']['name']).__name__}"


def m_str_index(rng: random.Random, path: Path) -> str:
    lines = _lines(path)
    index = _pick_record(rng, lines, lambda d: "str" in d)
    if index is None:
        return "str index (no str record)"
    head, data = _split_record(lines[index])  # type: ignore[misc]
    body = data["str"]
    choice = rng.choice(["abc", "12", 1.5, None, [1], {"a": 1}, "short", "swap"])
    if choice == "short":
        data["str"] = body[:1] if isinstance(body, list) else body
    elif choice == "swap" and isinstance(body, list) and len(body) == 2:
        data["str"] = [body[1], body[0]]
    elif isinstance(body, list) and len(body) == 2:
        body[1] = choice
    lines[index] = _join_record(head, data)
    _rewrite(path, b"".join(lines))
    return f"str record at line {index + 1}: {choice!r}"


def m_unknown_kind(rng: random.Random, path: Path) -> str:
    lines = _lines(path)
    index = _pick_record(rng, lines, lambda d: bool(d))
    if index is None:
        return "unknown kind (no record)"
    head, data = _split_record(lines[index])  # type: ignore[misc]
    kind = next(iter(data))
    renamed = {("mystery_" + kind if k == kind else k): v for k, v in data.items()}
    lines[index] = _join_record(head, renamed)
    _rewrite(path, b"".join(lines))
    return f"kind {kind!r} renamed at line {index + 1}"


_NUMBER = re.compile(rb"\d+(?:\.\d+)?")
_ODD_NUMBERS = [
    b"1.2.3",
    b"1e999",
    b"-",
    b"nan",
    b"\xd9\xa3",
    b"\xc2\xb2",
    b"99999999999999999999999",
    b"0.0.0",
]


def m_number(rng: random.Random, path: Path) -> str:
    """A number somewhere in the file becomes one that int()/float() cannot read (or a huge one)."""
    lines = _lines(path)
    found = [(i, m) for i, line in enumerate(lines) for m in _NUMBER.finditer(line)]
    if not found:
        return "number (none in the file)"
    index, match = rng.choice(found)
    odd = rng.choice(_ODD_NUMBERS)
    lines[index] = lines[index][: match.start()] + odd + lines[index][match.end() :]
    _rewrite(path, b"".join(lines))
    return f"line {index + 1}: {match.group().decode()} -> {odd!r}"


def m_json_file_type(rng: random.Random, path: Path) -> str:
    try:
        data = json.loads(path.read_bytes())
    except ValueError:
        return m_flip(rng, path)
    data, what = _mutate_json(rng, data)
    _rewrite(path, json.dumps(data).encode())
    return f"json {what}"


def m_rename(rng: random.Random, path: Path) -> str:
    siblings = [p for p in path.parent.iterdir() if p.is_file() and p != path]
    if siblings and rng.random() < 0.5:
        other = rng.choice(siblings)
        data = other.read_bytes()
        _rewrite(path, data)
        return f"content of {other.name}"
    new = path.with_name(rng.choice(["mystery.txt", "output_code.py.bak", path.name.upper(), "x.json"]))
    if new.exists():
        return "rename (target exists)"
    path.rename(new)
    return f"renamed to {new.name}"


def m_make_dir(rng: random.Random, path: Path) -> str:
    path.unlink()
    path.mkdir()
    return "replaced by a folder"


def m_non_utf8(rng: random.Random, path: Path) -> str:
    data = path.read_bytes()
    at = rng.randint(0, len(data))
    _rewrite(
        path, data[:at] + rng.choice([b"\xff\xfe", b"\xc3", b"\x00", b"\x1b[2J", b"\xed\xa0\x80"]) + data[at:]
    )
    return f"odd bytes at {at}"


@dataclass(frozen=True)
class Mutation:
    name: str
    weight: int
    applies: Callable[[str], bool]
    apply: Callable[[random.Random, Path], str]


def _is_trace(rel: str) -> bool:
    return Path(rel).name.startswith(TRACE_PREFIX)


def _is_text(rel: str) -> bool:
    return Path(rel).suffix in TEXT_SUFFIXES


def _is_json(rel: str) -> bool:
    return rel.endswith(".json")


def _any(rel: str) -> bool:
    return True


MUTATIONS = [
    Mutation("truncate", 6, _any, m_truncate),
    Mutation("empty", 3, _any, m_empty),
    Mutation("delete", 3, _any, m_delete),
    Mutation("flip", 6, _any, m_flip),
    Mutation("binary_line", 4, _is_text, m_binary_line),
    Mutation("garbage_line", 4, _is_text, m_garbage_line),
    Mutation("duplicate_lines", 3, _is_text, m_duplicate_lines),
    Mutation("delete_lines", 3, _is_text, m_delete_lines),
    Mutation("non_utf8", 2, _is_text, m_non_utf8),
    Mutation("number", 4, _is_text, m_number),
    Mutation("trace_record_type", 10, _is_trace, m_trace_record_type),
    Mutation("trace_payload_type", 6, _is_trace, m_trace_payload_type),
    Mutation("artifact_name", 3, _is_trace, m_artifact_name),
    Mutation("str_index", 3, _is_trace, m_str_index),
    Mutation("unknown_kind", 2, _is_trace, m_unknown_kind),
    Mutation("json_file_type", 6, _is_json, m_json_file_type),
    Mutation("rename", 2, _any, m_rename),
    Mutation("make_dir", 1, _any, m_make_dir),
]


def _pick_file(rng: random.Random, folder: Path, applies: Callable[[str], bool]) -> Path | None:
    files = sorted(
        p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and not p.is_symlink()
    )
    files = [f for f in files if applies(f)]
    if not files:
        return None
    # half of the picks go to what the report reads: trace, graph folders, logs, measurements
    favoured = [
        f
        for f in files
        if "/torchinductor/" in f
        or f.endswith((".log", "capture.json", "profile_trace.json", "handwritten.json"))
    ]
    pool = favoured if favoured and rng.random() < 0.5 else files
    return folder / rng.choice(pool)


def mutate(rng: random.Random, folder: Path) -> list[str]:
    done = []
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3])):
        mutation = rng.choices(MUTATIONS, weights=[m.weight for m in MUTATIONS])[0]
        path = _pick_file(rng, folder, mutation.applies)
        if path is None:
            continue
        what = mutation.apply(rng, path)
        done.append(f"{mutation.name} {path.relative_to(folder).as_posix()}: {what}")
    return done


# --- running a case ----------------------------------------------------------------------------


@dataclass
class Outcome:
    kind: str  # "report" | "error" | "uncaught"
    detail: str = ""  # error class, or exception and place
    raw_bytes: bool = False  # a one-line error with raw control characters
    net: bool = False  # went through the registry's safety net
    trace: str = ""
    place: str = ""  # innermost inductor_lens frame: path:line


@dataclass
class CaseResult:
    index: int
    capture: str
    mutations: list[str]
    lenient: Outcome
    strict: Outcome
    seconds: float = 0.0


def _net_mark() -> str | None:
    try:
        from inductor_lens.parse import registry
    except ImportError:
        return None
    return getattr(registry, "NET_MARK", None)


def _has_raw_control(text: str) -> bool:
    return any((ord(c) < 32 or 0x7F <= ord(c) < 0xA0) for c in text)


def _place(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "inductor_lens" in f.filename.replace(os.sep, "/")]
    frame = (ours or frames)[-1] if (ours or frames) else None
    if frame is None:
        return "?"
    name = frame.filename.replace(os.sep, "/")
    name = name[name.find("inductor_lens/") :] if "inductor_lens/" in name else name
    return f"{name}:{frame.lineno} in {frame.name}"


def _no_render(run: Any, out_dir: Path, *, draw: bool = True) -> Path:
    return out_dir / "index.html"


def run_once(folder: Path, out: Path, *, strict: bool, render: bool) -> Outcome:
    mark = _net_mark()
    # report_folder renders through pipeline.render; the strict run (and most cases) stop before it
    patch = mock.patch.object(pipeline, "render", _no_render if not render else pipeline.render)
    shutil.rmtree(out, ignore_errors=True)
    try:
        with patch:
            result = api.report_folder(folder, out, strict=strict, draw=False)
    except LensError as exc:
        message = exc.one_line()
        return Outcome(
            "error",
            type(exc).__name__,
            raw_bytes=_has_raw_control(message),
            net=bool(mark and mark in message),
            trace=message,
        )
    except Exception as exc:  # the point of the harness: anything else is a finding
        place = _place(exc)
        return Outcome(
            "uncaught",
            f"{type(exc).__name__}: {str(exc)[:160]}",
            trace="".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
            place=place,
        )
    net = bool(mark) and any(mark in d.message for d in result.run.stats.diagnostics)
    return Outcome("report", net=net)


def run_case(captures: list[Capture], seed: int, index: int, work: Path, render: str) -> CaseResult:
    rng = random.Random(f"{seed}:{index}")
    capture = captures[index % len(captures)]  # every capture in turn: any run of as many cases covers them all
    folder = work / "case" / capture.root.name
    shutil.rmtree(work / "case", ignore_errors=True)
    shutil.copytree(capture.root, folder, copy_function=os.link)
    started = time.perf_counter()
    mutations = mutate(rng, folder)
    out = work / "out"
    lenient = run_once(folder, out, strict=False, render=render in ("lenient", "all"))
    strict = run_once(folder, out, strict=True, render=render == "all")
    return CaseResult(index, capture.name, mutations, lenient, strict, time.perf_counter() - started)


# --- many cases ----------------------------------------------------------------------------------


def _worker(args: tuple[str, list[str], int, list[int], str]) -> list[CaseResult]:
    base, names, seed, indexes, render = args
    captures = unpack_all(Path(base) / "captures", names)
    with tempfile.TemporaryDirectory(prefix="fuzz-case-") as tmp:
        return [run_case(captures, seed, i, Path(tmp), render) for i in indexes]


def run_cases(
    seed: int,
    indexes: list[int],
    *,
    render: str = "lenient",
    jobs: int = 1,
    base: Path | None = None,
    names: list[str] | None = None,
) -> list[CaseResult]:
    with tempfile.TemporaryDirectory(prefix="fuzz-report-") as tmp:
        base = base or Path(tmp)
        captures = unpack_all(base / "captures", names)
        names = [c.name for c in captures]
        before = _fingerprint(captures)
        if jobs <= 1:
            results = _worker((str(base), names, seed, indexes, render))
        else:
            chunks = [indexes[i::jobs] for i in range(jobs)]
            with ProcessPoolExecutor(jobs) as pool:
                parts = pool.map(_worker, [(str(base), names, seed, chunk, render) for chunk in chunks])
                results = sorted((r for part in parts for r in part), key=lambda r: r.index)
        if _fingerprint(captures) != before:
            raise RuntimeError("a case changed the unpacked originals (a write went through a hard link)")
    return results


def outside_parse(outcome: Outcome) -> bool:
    return outcome.kind == "uncaught" and not outcome.place.startswith("inductor_lens/parse/")


def summary(results: list[CaseResult], seconds: float, seed: int) -> str:
    lines = [
        f"fuzz_report: {len(results)} cases, seed {seed}, {seconds:.0f} s, {len(results) / seconds:.1f} cases/s"
    ]
    by_capture = collections.Counter(r.capture for r in results)
    lines.append("captures: " + ", ".join(f"{k} {v}" for k, v in sorted(by_capture.items())))
    kinds = collections.Counter(m.split(" ", 1)[0] for r in results for m in r.mutations)
    lines.append("mutations: " + ", ".join(f"{k} {v}" for k, v in kinds.most_common()))
    for mode in ("lenient", "strict"):
        outcomes = [getattr(r, mode) for r in results]
        counts = collections.Counter(o.kind for o in outcomes)
        errors = collections.Counter(o.detail for o in outcomes if o.kind == "error")
        lines.append(
            f"{mode:>7}: report {counts['report']}, LensError {counts['error']}"
            f" ({', '.join(f'{k} {v}' for k, v in errors.most_common()) or '-'}), uncaught {counts['uncaught']}"
        )
    raw = sum(o.raw_bytes for r in results for o in (r.lenient, r.strict))
    lines.append(f"one-line errors with raw control characters: {raw}")
    net = [r for r in results if r.lenient.net or r.strict.net]
    lines.append(f"cases that reached the parser registry's safety net: {len(net)}")
    for r in net[:20]:
        lines.append(f"  case {r.index} ({r.capture}): {'; '.join(r.mutations)}")
    uncaught = [(r, mode, getattr(r, mode)) for r in results for mode in ("lenient", "strict")]
    uncaught = [(r, mode, o) for r, mode, o in uncaught if o.kind == "uncaught"]
    places = collections.Counter((o.place, o.detail.split(":")[0]) for _, _, o in uncaught)
    lines.append(f"uncaught exceptions: {len(uncaught)} in {len({r.index for r, _, _ in uncaught})} case(s)")
    for (place, exc), n in places.most_common():
        tag = "outside parse/" if not place.startswith("inductor_lens/parse/") else "parse/"
        lines.append(f"  {n:5d}  {exc} at {place}  [{tag}]")
    shown: set[str] = set()
    for r, mode, o in uncaught:
        if o.place in shown:
            continue
        shown.add(o.place)
        lines.append(f"  first at {o.place}: case {r.index} ({r.capture}, {mode}): {o.detail}")
        lines.extend(f"      mutation: {m}" for m in r.mutations)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start", type=int, default=0, help="first case index")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--render", choices=("lenient", "all", "none"), default="lenient")
    parser.add_argument("--case", type=int, help="replay one case and print its tracebacks")
    parser.add_argument("--json", type=Path, help="write every case's outcome here")
    args = parser.parse_args(argv)
    if args.case is not None:
        (result,) = run_cases(args.seed, [args.case], render=args.render)
        print(f"case {result.index} ({result.capture}):")
        for m in result.mutations:
            print(f"  mutation: {m}")
        for mode in ("lenient", "strict"):
            o = getattr(result, mode)
            print(f"{mode}: {o.kind} {o.detail} {o.place}\n{o.trace}")
        return 0
    started = time.perf_counter()
    results = run_cases(
        args.seed, list(range(args.start, args.start + args.cases)), render=args.render, jobs=args.jobs
    )
    print(summary(results, time.perf_counter() - started, args.seed))
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {
                        "case": r.index,
                        "capture": r.capture,
                        "mutations": r.mutations,
                        **{
                            mode: {"kind": o.kind, "detail": o.detail, "place": o.place, "net": o.net}
                            for mode, o in (("lenient", r.lenient), ("strict", r.strict))
                        },
                    }
                    for r in results
                ],
                indent=1,
            )
        )
    return 1 if any(o.kind == "uncaught" for r in results for o in (r.lenient, r.strict)) else 0


if __name__ == "__main__":
    sys.exit(main())
