"""Option parsing for `inductor-lens compile`: values, Inductor option names checked against torch."""

from __future__ import annotations

import pytest

from inductor_lens.config_options import check_inductor_options, parse_inductor_options, parse_value
from inductor_lens.errors import UsageError
from inductor_lens.options import CompileSpec, normalize_dtype

KNOWN = {
    "epilogue_fusion": True,
    "triton.cudagraphs": False,
    "max_autotune_gemm_backends": "ATEN,TRITON",
    "cpp.threads": -1,
    "search_autotune_cache": False,
    "some_float": 0.5,
    "optional_thing": None,
}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("False", False),
        ("12", 12),
        ("-3", -3),
        ("1e-3", 1e-3),
        ("0.5", 0.5),
        ("TRITON", "TRITON"),
    ],
)
def test_parse_value(text: str, value: object) -> None:
    assert parse_value(text) == value
    assert type(parse_value(text)) is type(value)


def test_options_are_coerced_to_the_type_of_their_default() -> None:
    options = parse_inductor_options(
        [
            "epilogue_fusion=false",
            "triton.cudagraphs=1",
            "max_autotune_gemm_backends=TRITON",
            "cpp.threads=4",
            "some_float=2",
            "optional_thing=abc",
        ],
        known=KNOWN,
    )
    assert options == {
        "epilogue_fusion": False,
        "triton.cudagraphs": True,
        "max_autotune_gemm_backends": "TRITON",
        "cpp.threads": 4,
        "some_float": 2.0,
        "optional_thing": "abc",
    }


def test_unknown_option_names_the_closest_valid_ones() -> None:
    with pytest.raises(UsageError) as error:
        parse_inductor_options(["epilog_fusion=true"], known=KNOWN)
    assert error.value.one_line() == "unknown Inductor option 'epilog_fusion' (closest: epilogue_fusion)"


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ("epilogue_fusion", "--option expects KEY=VALUE, got 'epilogue_fusion'"),
        ("=1", "--option expects KEY=VALUE, got '=1'"),
        ("epilogue_fusion=maybe", "Inductor option 'epilogue_fusion' takes true or false, got 'maybe'"),
        ("cpp.threads=two", "Inductor option 'cpp.threads' takes an integer, got 'two'"),
    ],
)
def test_malformed_options(pair: str, message: str) -> None:
    with pytest.raises(UsageError, match="^" + message.replace(".", r"\.").replace("(", r"\(") + "$"):
        parse_inductor_options([pair], known=KNOWN)


def test_real_inductor_option_list() -> None:
    options = parse_inductor_options(["coordinate_descent_tuning=true", "triton.cudagraphs=false"])
    assert options == {"coordinate_descent_tuning": True, "triton.cudagraphs": False}
    with pytest.raises(UsageError, match=r"closest: .*coordinate_descent_tuning"):
        parse_inductor_options(["coordinate_decent_tuning=true"])


def test_spec_round_trips_and_validates(tmp_path) -> None:
    spec = CompileSpec(
        model_path=tmp_path / "m.py", mode="max-autotune", options={"a": 1}, train=True, dtype="bfloat16"
    )
    assert CompileSpec.from_json(spec.to_json()) == spec
    with pytest.raises(UsageError, match="unknown mode"):
        CompileSpec(model_path=tmp_path / "m.py", mode="fast")
    assert normalize_dtype("bf16") == "bfloat16" and normalize_dtype("torch.float16") == "float16"
    with pytest.raises(UsageError, match="unknown dtype"):
        normalize_dtype("int3")


def test_values_are_checked_against_the_type_torch_declares(run_cli) -> None:
    # cpp.simdlen defaults to None, so only its declaration (``int | None``) says an integer is wanted; before,
    # "abc" went through and turned vectorisation off.
    with pytest.raises(UsageError) as error:
        parse_inductor_options(["cpp.simdlen=abc"])
    assert error.value.one_line() == "Inductor option 'cpp.simdlen' takes an integer or none, got 'abc'"
    assert parse_inductor_options(["cpp.simdlen=256"]) == {"cpp.simdlen": 256}
    assert parse_inductor_options(["cpp.simdlen=none"]) == {"cpp.simdlen": None}
    # a Literal: one of its values, named in the error
    assert parse_inductor_options(["memory_pool=outputs"]) == {"memory_pool": "outputs"}
    with pytest.raises(UsageError, match=r"^Inductor option 'memory_pool' takes one of 'none', 'interm"):
        parse_inductor_options(["memory_pool=everything"])
    # a value a string cannot be checked against (a callable) still goes through as given
    assert parse_inductor_options(["pre_grad_custom_pass=none"]) == {"pre_grad_custom_pass": "none"}
    # the CLI: a one-line error, exit 2, before any model process starts
    result = run_cli("compile", "no-such-model.py", "--option", "cpp.simdlen=abc")
    assert result.code == 2
    assert "takes an integer or none, got 'abc'" in result.stderr


def test_api_option_values_are_checked_too() -> None:
    assert check_inductor_options({"cpp.simdlen": 8, "triton.cudagraphs": False}) == {
        "cpp.simdlen": 8,
        "triton.cudagraphs": False,
    }
    with pytest.raises(UsageError, match=r"^Inductor option 'cpp.simdlen' takes an integer or none, got 'abc"):
        check_inductor_options({"cpp.simdlen": "abc"})
    with pytest.raises(UsageError, match=r"takes true or false, got 1$"):
        check_inductor_options({"triton.cudagraphs": 1})
