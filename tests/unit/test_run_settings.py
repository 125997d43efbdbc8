"""The settings of a run beyond the mode and options (issue 32): the float32 matmul precision, cuDNN TF32,
autocast, ``dynamic`` and Dynamo's config, from the command line and ``--config`` to the spec, the model
process and the records, and what a comparison says of a configuration that changes them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from inductor_lens.analysis import analyze_comparison
from inductor_lens.capture import script_capture
from inductor_lens.capture.supervisor import Finished
from inductor_lens.compare import ConfigRun, build_comparison, parse_config
from inductor_lens.compare.comparability import differences, headline, run_facts
from inductor_lens.compare.configs import ConfigRequest, settings_text
from inductor_lens.config_options import check_dynamo_options, parse_dynamo_options
from inductor_lens.errors import UsageError
from inductor_lens.exchange.files import CaptureResult, ReportedSettings
from inductor_lens.options import CompileSpec, ScriptSpec, normalize_autocast
from inductor_lens.records import CaptureOutcome, CompileRun, CompileSettings
from inductor_lens.report import render_comparison
from inductor_lens.worker.model_file import Call
from inductor_lens.worker.model_run import forward, run_settings


def _spec(tmp_path: Path, **settings: object) -> CompileSpec:
    return CompileSpec(model_path=tmp_path / "m.py", **settings)  # type: ignore[arg-type]


def test_specs_round_trip_with_the_settings(tmp_path: Path) -> None:
    spec = _spec(tmp_path, matmul_precision="high", cudnn_allow_tf32=False, autocast="bfloat16",
                 dynamo_options={"capture_scalar_outputs": True, "recompile_limit": 16})  # fmt: skip
    assert CompileSpec.from_json(spec.to_json()) == spec
    script = ScriptSpec(argv=("t.py",), cwd=tmp_path, model_path=tmp_path / "t.py", dynamic=False,
                        matmul_precision="medium", autocast="float16", dynamo_options={"capture_scalar_outputs": True})  # fmt: skip
    assert ScriptSpec.from_json(script.to_json()) == script
    # a spec.json written before these settings loads with none of them
    old = json.loads(_spec(tmp_path).to_json())
    for key in ("matmul_precision", "cudnn_allow_tf32", "autocast", "dynamo_options"):
        del old[key]
    loaded = CompileSpec.from_json(json.dumps(old))
    assert (loaded.matmul_precision, loaded.cudnn_allow_tf32, loaded.autocast, dict(loaded.dynamo_options)) == (
        None, None, None, {})  # fmt: skip


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"matmul_precision": "low"}, r"unknown float32 matmul precision 'low'; choose one of highest, high, medium"),
        ({"autocast": "float32"}, r"--autocast 'float32': autocast lowers to float16 or bfloat16"),
        ({"autocast": "bf16"}, r"--autocast 'bf16'"),  # a spec holds canonical names
        ({"cudnn_allow_tf32": 1}, r"cudnn_allow_tf32 takes true or false, got 1"),
        ({"dynamo_options": {"capture_scalar_output": True}}, r"unknown Dynamo option 'capture_scalar_output'"),
        ({"dynamo_options": {"recompile_limit": "many"}}, r"Dynamo option 'recompile_limit' takes an integer"),
    ],
)
def test_specs_refuse_settings_torch_would_not_take(tmp_path: Path, settings: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        _spec(tmp_path, **settings)
    with pytest.raises(UsageError, match=message):
        ScriptSpec(argv=("t.py",), cwd=tmp_path, model_path=tmp_path / "t.py", **settings)


def test_dynamo_options_are_checked_like_inductor_options() -> None:
    assert parse_dynamo_options(["capture_scalar_outputs=true", "recompile_limit=16"]) == {
        "capture_scalar_outputs": True, "recompile_limit": 16}  # fmt: skip
    with pytest.raises(UsageError) as error:
        parse_dynamo_options(["capture_scalar_output=true"])
    assert error.value.one_line().startswith("unknown Dynamo option 'capture_scalar_output' (closest: capture_scalar_outputs")
    with pytest.raises(UsageError, match=r"^--dynamo-option expects KEY=VALUE, got 'capture_scalar_outputs'$"):
        parse_dynamo_options(["capture_scalar_outputs"])
    with pytest.raises(UsageError, match=r"^Dynamo option 'capture_scalar_outputs' takes true or false, got 'yes'$"):
        parse_dynamo_options(["capture_scalar_outputs=yes"])
    assert check_dynamo_options({"recompile_limit": 4}) == {"recompile_limit": 4}
    # a renamed setting's old name, which torch still takes
    assert parse_dynamo_options(["cache_size_limit=16"]) == {"cache_size_limit": 16}
    assert normalize_autocast("bf16") == "bfloat16" and normalize_autocast("torch.half") == "float16"
    with pytest.raises(UsageError, match="autocast lowers to"):
        normalize_autocast("fp64")


def test_the_command_line_takes_the_settings(run_cli, tmp_path: Path, stubbed_specs: list[object]) -> None:
    """compile and run turn the flags into the spec (the capture itself is stubbed: no model process)."""
    seen = stubbed_specs
    model = tmp_path / "m.py"
    model.write_text("")
    flags = ("--matmul-precision", "high", "--no-cudnn-tf32", "--autocast", "BF16",
             "--dynamo-option", "capture_scalar_outputs=true")  # fmt: skip
    assert run_cli("compile", model, *flags).code == 2
    assert run_cli("run", "--dynamic", *flags, "--", "python", model).code == 2
    for spec in seen:
        assert (spec.matmul_precision, spec.cudnn_allow_tf32, spec.autocast, dict(spec.dynamo_options)) == (  # type: ignore[attr-defined]
            "high", False, "bfloat16", {"capture_scalar_outputs": True})  # fmt: skip
    assert len(seen) == 2 and seen[1].dynamic is True  # type: ignore[attr-defined]
    refused = run_cli("compile", model, "--dynamo-option", "capture_scalar_output=true")
    assert refused.code == 2 and "closest: capture_scalar_outputs" in refused.stderr
    assert run_cli("compile", model, "--autocast", "fp32").code == 2


def test_config_pairs_set_the_other_settings(tmp_path: Path) -> None:
    request = parse_config("amp:autocast=bf16,matmul_precision=high,cudnn_allow_tf32=false,dynamic=true,"
                           "dynamo.capture_scalar_outputs=true,mode=max-autotune-no-cudagraphs")  # fmt: skip
    assert request == ConfigRequest("amp", "max-autotune-no-cudagraphs", {}, matmul_precision="high",
                                    cudnn_allow_tf32=False, autocast="bfloat16", dynamic=True,
                                    dynamo_options={"capture_scalar_outputs": True})  # fmt: skip
    assert request.describe() == ('mode max-autotune-no-cudagraphs; float32 matmul precision "high"; '
                                  "cudnn.allow_tf32=False; autocast bfloat16; dynamic=True; "
                                  "torch._dynamo.config.capture_scalar_outputs=True")  # fmt: skip
    for bad, message in [("x:dynamic=maybe", "dynamic takes true or false"), ("x:autocast=fp32", "autocast lowers"),
                         ("x:matmul_precision=low", "matmul precision 'low'"),
                         ("x:dynamo.capture_scalar_output=1", "closest: capture_scalar_outputs")]:  # fmt: skip
        with pytest.raises(UsageError, match=message):
            parse_config(bad)


def test_a_request_applies_what_it_sets_and_keeps_the_rest(tmp_path: Path) -> None:
    base = _spec(tmp_path, mode="reduce-overhead", options={"a": 1}, dtype="float32", dynamic=True,
                 matmul_precision="high", dynamo_options={"recompile_limit": 4})  # fmt: skip
    plain = ConfigRequest("plain", "default", {"b": 2})
    assert plain.apply(base) == replace(base, mode="default", options={"b": 2})
    amp = ConfigRequest("amp", "reduce-overhead", {"a": 1}, autocast="bfloat16", cudnn_allow_tf32=False,
                        dynamic=False, dynamo_options={"capture_scalar_outputs": True})  # fmt: skip
    applied = amp.apply(base)
    assert type(applied) is CompileSpec
    assert (applied.autocast, applied.cudnn_allow_tf32, applied.dynamic, applied.matmul_precision) == (
        "bfloat16", False, False, "high")  # fmt: skip
    assert applied.dynamo_options == {"capture_scalar_outputs": True} and applied.dtype == "float32"
    same = ConfigRequest("same", "reduce-overhead", {"a": 1}, matmul_precision="high")
    assert same.apply(base) == base  # what --try uses to leave out a suggestion the run already has
    script = ScriptSpec(argv=("t.py",), cwd=tmp_path, model_path=tmp_path / "t.py")
    assert type(amp.apply(script)) is ScriptSpec and amp.apply(script).autocast == "bfloat16"


def test_the_model_process_applies_and_restores_the_settings(tmp_path: Path) -> None:
    before = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    spec = _spec(tmp_path, matmul_precision="medium", cudnn_allow_tf32=not before[1], autocast="bfloat16",
                 dynamo_options={"capture_scalar_outputs": True})  # fmt: skip
    with run_settings(spec) as applied:
        assert torch.get_float32_matmul_precision() == "medium"
        assert torch._dynamo.config.capture_scalar_outputs is True
        reported = ReportedSettings(**applied)
    assert (reported.matmul_precision, reported.cudnn_allow_tf32, reported.autocast, reported.dynamo_options) == (
        "medium", not before[1], "bfloat16", {"capture_scalar_outputs": True})  # fmt: skip
    assert (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32) == before
    assert torch._dynamo.config.capture_scalar_outputs is False
    with run_settings(_spec(tmp_path)) as applied:  # nothing set: nothing reported
        assert applied == {"matmul_precision": None, "cudnn_allow_tf32": None, "autocast": None, "dynamo_options": {}}


def test_autocast_is_entered_around_each_forward_only_where_asked() -> None:
    linear, cpu = torch.nn.Linear(4, 4), torch.device("cpu")
    call = Call((torch.randn(2, 4),), {})
    assert forward(linear, call, False, cpu, torch.bfloat16).dtype == torch.bfloat16
    assert forward(linear, call, False, cpu, None).dtype == torch.float32
    trained = forward(linear, call, True, cpu, torch.bfloat16)
    assert trained.dtype == torch.bfloat16 and trained.requires_grad


def test_autocast_around_a_scripts_compiled_functions() -> None:
    from torch._dynamo.eval_frame import OptimizedModule

    from inductor_lens.worker.script_hooks import Autocast

    original = OptimizedModule.__call__
    try:
        autocast = Autocast("bfloat16")
        wrapped = autocast.wrap(lambda x: (torch.is_autocast_enabled("cpu"), x @ x))
        enabled, out = wrapped(torch.randn(3, 3))
        assert enabled and out.dtype == torch.bfloat16
    finally:
        OptimizedModule.__call__ = original  # type: ignore[method-assign]


def test_the_run_records_the_settings_as_applied(tmp_path: Path) -> None:
    script = ScriptSpec(argv=("t.py",), cwd=tmp_path, model_path=tmp_path / "t.py", dynamic=True,
                        matmul_precision="high", autocast="bfloat16")  # fmt: skip
    reported = ReportedSettings(matmul_precision="high", autocast="bfloat16")
    capture = script_capture(script, CaptureResult(status="ok", settings=reported), Finished(0, False, 1.0), tmp_path)
    settings = capture.settings
    assert (settings.matmul_precision, settings.autocast, settings.dynamic, settings.cudnn_allow_tf32) == (
        "high", "bfloat16", True, None)  # fmt: skip
    # a process that failed before applying them: the run still says what was asked
    failed = script_capture(script, CaptureResult(), Finished(1, False, 1.0), tmp_path)
    assert failed.settings.matmul_precision == "high" and failed.settings.autocast == "bfloat16"


def _ran(settings: CompileSettings) -> CompileRun:
    return CompileRun(title="m", created="now", tool_version="0", source_dir="/", settings=settings,
                      capture=CaptureOutcome(model_path="/m/mlp.py", model_name="mlp", status="ok", phase="done"))  # fmt: skip


def test_a_configuration_under_autocast_differs_in_numerics() -> None:
    base = _ran(CompileSettings(dtype="float32"))
    amp = _ran(CompileSettings(dtype="float32", autocast="bfloat16", matmul_precision="high",
                               dynamo_options={"capture_scalar_outputs": True}))  # fmt: skip
    facts = run_facts(base), run_facts(amp)
    assert (facts[0]["autocast"], facts[1]["autocast"]) == ("off", "bfloat16")
    assert facts[1]["matmul precision"] == "high" and "matmul precision" not in facts[0]  # nothing recorded it
    assert facts[1]["dynamo config"] == "capture_scalar_outputs=True" and facts[0]["dynamo config"] == "default"
    found = differences("base", facts[0], "amp", facts[1])
    assert [d.fact for d in found] == ["autocast", "dynamo config"]
    assert "other numerics" in found[0].effect and "float64" in found[0].effect
    assert headline(found).startswith("These runs differ in autocast (off vs bfloat16)")
    highest = _ran(CompileSettings(dtype="float32", matmul_precision="highest"))
    precision = differences("a", run_facts(highest), "b", run_facts(amp))
    assert "other numerics" in next(d.effect for d in precision if d.fact == "matmul precision")


def test_the_compare_page_shows_each_configurations_settings() -> None:
    settings = CompileSettings(autocast="bfloat16", matmul_precision="high")
    assert settings_text(settings) == 'float32 matmul precision "high"; autocast bfloat16'
    assert settings_text(CompileSettings()) == ""
    entries = [ConfigRun("base", "default", {}, _ran(CompileSettings()), "configs/base"),
               ConfigRun("amp", "default", {}, _ran(settings), "configs/amp"),
               ConfigRun("failed", "default", {}, None, "configs/failed", status="failed", error="boom",
                         settings="autocast float16")]  # fmt: skip
    comparison = build_comparison(entries, kind="compare", title="m", model_path="m.py")
    assert [c.settings for c in comparison.configs] == ["", settings_text(settings), "autocast float16"]
    index = render_comparison(comparison, analyze_comparison(comparison))["index.html"]
    assert "Mode · options · settings" in index
    assert "<br><code>autocast bfloat16</code>" in index and "<br><code>float32 matmul precision &#34;high&#34;</code>" in index
    plain = build_comparison([entries[0], replace(entries[1], run=_ran(CompileSettings()))],
                             kind="compare", title="m", model_path="m.py")  # fmt: skip
    assert "· settings" not in render_comparison(plain, analyze_comparison(plain))["index.html"]
