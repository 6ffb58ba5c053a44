"""Tests of pipeline parsing, pass options and PassManager building."""

from __future__ import annotations

import dataclasses
import inspect
import math
import string
import sys
import types
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mlir import ir

import sparsecomp.transforms as transforms
from sparsecomp.errors import PipelineError, SparsecompError
from sparsecomp.ir.context import make_context
from sparsecomp.ir.parsing import parse_module
from sparsecomp.transforms import get_all_passes, get_pass, is_sparsecomp_pass
from sparsecomp.transforms import pipeline as pl
from sparsecomp.transforms.base import SparsecompPass
from sparsecomp.transforms.pipeline import (
    Element,
    build_pass_manager,
    expand,
    named_pipelines,
    parse_options,
    parse_pipeline,
)

CSR = (
    "#sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), "
    "posWidth = 32, crdWidth = 32}>"
)


def func_with_round_trip(name: str) -> str:
    return f"""
func.func @{name}(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {{
  %0 = "sparse_iter.set_encoding"(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32, #csr>
  %1 = "sparse_iter.unset_encoding"(%0) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32>
  return %1 : tensor<?x?xf32>
}}
"""


TWO_FUNCS = f"#csr = {CSR}\n{func_with_round_trip('a')}{func_with_round_trip('b')}"


def shape(elements: list[Element]) -> list:
    """Elements without columns: ``(name, options)`` or ``(name, [children...])``."""
    return [
        (e.name, e.options) if e.children is None else (e.name, e.options, shape(e.children))
        for e in elements
    ]


def pipeline_error(text: str) -> PipelineError:
    with pytest.raises(PipelineError) as info:
        parse_pipeline(text)
    return info.value


# -- parse_pipeline ------------------------------------------------------------


def test_parse_nested_pipeline() -> None:
    text = (
        "builtin.module(canonicalize, sparse-iter-fold-encodings{max-iterations=3},"
        " func.func(cse, canonicalize{ max-iterations=2 }))"
    )
    assert shape(parse_pipeline(text)) == [
        (
            "builtin.module",
            "",
            [
                ("canonicalize", ""),
                ("sparse-iter-fold-encodings", "max-iterations=3"),
                ("func.func", "", [("cse", ""), ("canonicalize", "max-iterations=2")]),
            ],
        )
    ]


def test_parse_records_one_based_columns() -> None:
    text = "a, b.c( d{x=1} ,e)"
    (a, b) = parse_pipeline(text)
    (d, e) = b.children
    for element in (a, b, d, e):
        assert text[element.column - 1 :].startswith(element.name)
        assert element.location == f"<pass-pipeline>:1:{element.column}"


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_parse_empty_pipeline(text: str) -> None:
    assert parse_pipeline(text) == []


def test_parse_empty_anchor_and_empty_options() -> None:
    assert shape(parse_pipeline("func.func(), cse{}")) == [("func.func", "", []), ("cse", "")]


def test_parse_nested_braces_are_kept_verbatim() -> None:
    (element,) = parse_pipeline("p{a={b={c d}} e=1}")
    assert element.options == "a={b={c d}} e=1"


def test_element_text_round_trips() -> None:
    text = "builtin.module(a{x=1 y=two}, func.func(b, c()), d)"
    elements = parse_pipeline(text)
    assert ", ".join(e.text() for e in elements) == text
    assert shape(parse_pipeline(elements[0].text())) == shape(elements)


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        ("cse,,canonicalize", 5, "expected a pass or anchor name"),
        ("(cse)", 1, "expected a pass or anchor name"),
        ("cse)", 4, "unexpected ')'"),
        ("cse canonicalize", 5, "unexpected 'c'"),
        ("builtin.module(cse", 19, "expected ')'"),
        ("func.func(cse,)", 15, "expected a pass or anchor name"),
        ("cse{a=1}{b=2}", 9, "unexpected '{'"),
    ],
)
def test_parse_errors_carry_columns(text: str, column: int, message: str) -> None:
    error = pipeline_error(text)
    assert error.location == f"<pass-pipeline>:1:{column}"
    assert message in error.message
    assert text in error.message
    assert error.render().startswith(f"<pass-pipeline>:1:{column}: error: ")


def test_parse_unbalanced_brace() -> None:
    error = pipeline_error("cse{a=1")
    assert "unbalanced '{'" in error.message
    column = int(error.location.rsplit(":", 1)[1])
    assert column >= len("cse{")


# -- parse_options -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("   ", {}),
        ("a=1", {"a": "1"}),
        ("a=1 b-c=x  d_e=-2.5", {"a": "1", "b-c": "x", "d_e": "-2.5"}),
        ("flag", {"flag": "true"}),
        ("flag other=0", {"flag": "true", "other": "0"}),
        ('a="x y" b=z', {"a": "x y", "b": "z"}),
        ("a='x y=1' b=z", {"a": "x y=1", "b": "z"}),
        ('a=""', {"a": ""}),
        ("a={x y}", {"a": "{x y}"}),
        ("a=1 a=2", {"a": "2"}),
    ],
)
def test_parse_options(text: str, expected: dict[str, str]) -> None:
    assert parse_options(text) == expected


@pytest.mark.parametrize("text", ["a=", "=x", "a.b=1", "a=1 =2"])
def test_parse_options_errors(text: str) -> None:
    with pytest.raises(PipelineError, match="malformed pass options"):
        parse_options(text)


# -- the registry and named pipelines -----------------------------------------


def test_registry_names_match_pass_classes() -> None:
    passes = get_all_passes()
    assert list(passes) == sorted(passes)
    for name, load in passes.items():
        cls = load()
        assert issubclass(cls, SparsecompPass)
        assert cls.NAME == name
        assert get_pass(name) is cls
        assert is_sparsecomp_pass(name)
        assert dataclasses.is_dataclass(cls)
        assert cls.summary() == inspect.getdoc(cls).splitlines()[0] != ""


def test_get_pass_unknown_lists_sparsecomp_passes() -> None:
    with pytest.raises(PipelineError) as info:
        get_pass("sparse-iter-fold-encoding")
    assert "'sparse-iter-fold-encoding'" in info.value.message
    assert "did you mean 'sparse-iter-fold-encodings'" in info.value.message
    for name in get_all_passes():
        assert name in info.value.message
    assert not is_sparsecomp_pass("cse")


def _file_elements(path) -> list[Element]:
    """Elements of a named pipeline file, comments removed (parsed independently)."""
    lines = [line.partition("#")[0].strip() for line in path.read_text().splitlines()]
    return parse_pipeline(" ".join(line for line in lines if line))


def test_named_pipelines_are_the_pipeline_files() -> None:
    files = sorted(p.stem for p in pl.PIPELINE_DIR.glob("*.txt"))
    assert sorted(named_pipelines()) == files
    assert "sparsecomp-cleanup" in files


@pytest.mark.parametrize("name", sorted(named_pipelines()))
def test_named_pipeline_expands_in_place(name: str) -> None:
    inner = shape(expand(_file_elements(named_pipelines()[name])))
    assert inner, f"{name} is empty"
    got = shape(expand(parse_pipeline(f"cse, {name}, func.func({name})")))
    assert got == [("cse", ""), *inner, ("func.func", "", inner)]


def test_named_pipeline_recursion_is_an_error(tmp_path, monkeypatch) -> None:
    (tmp_path / "one.txt").write_text("# one: includes two\ncse, two\n")
    (tmp_path / "two.txt").write_text("canonicalize,\none  # back to one\n")
    (tmp_path / "leaf.txt").write_text("cse\n")
    (tmp_path / "top.txt").write_text("leaf, func.func(leaf)\n")
    monkeypatch.setattr(pl, "PIPELINE_DIR", tmp_path)
    assert shape(expand(parse_pipeline("top"))) == [("cse", ""), ("func.func", "", [("cse", "")])]
    with pytest.raises(PipelineError, match="named pipeline 'one' includes itself"):
        expand(parse_pipeline("one"))


def test_sparsecomp_pass_wins_over_named_pipeline(tmp_path, monkeypatch) -> None:
    (tmp_path / "sparse-iter-verify.txt").write_text("cse\n")
    monkeypatch.setattr(pl, "PIPELINE_DIR", tmp_path)
    assert shape(expand(parse_pipeline("sparse-iter-verify"))) == [("sparse-iter-verify", "")]


def test_options_on_named_pipeline_are_rejected() -> None:
    with pytest.raises(PipelineError, match="named pipeline 'sparsecomp-cleanup' takes no options"):
        build_pass_manager("sparsecomp-cleanup{bogus=1}", make_context())


# -- a test-only pass with typed options --------------------------------------


@dataclasses.dataclass(frozen=True)
class OptionsPass(SparsecompPass):
    """Exercise every supported option type (test only).

    Not registered; used to test option conversion.
    """

    NAME = "test-options"
    flag: bool = False
    count: int = 3
    ratio: float = 0.5
    label: str = "x"
    mode: Literal["fast", "slow"] = "fast"

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError(f"count must be non-negative, got {self.count}")


@dataclasses.dataclass(frozen=True)
class ListOptionPass(SparsecompPass):
    """A pass with an option type the command line cannot express."""

    NAME = "test-list-option"
    sizes: list[int] = dataclasses.field(default_factory=list)


def test_option_metadata() -> None:
    assert OptionsPass.summary() == "Exercise every supported option type (test only)."
    assert "Not registered" in OptionsPass.description()
    assert [f.name for f in OptionsPass.option_fields()] == [
        "flag",
        "count",
        "ratio",
        "label",
        "mode",
    ]


def test_from_options_defaults() -> None:
    assert OptionsPass.from_options({}) == OptionsPass()


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"flag": "true"}, OptionsPass(flag=True)),
        ({"flag": "TRUE"}, OptionsPass(flag=True)),
        ({"flag": "1"}, OptionsPass(flag=True)),
        ({"flag": "on"}, OptionsPass(flag=True)),
        ({"flag": "yes"}, OptionsPass(flag=True)),
        ({"flag": "false"}, OptionsPass(flag=False)),
        ({"flag": "0"}, OptionsPass(flag=False)),
        ({"flag": "off"}, OptionsPass(flag=False)),
        ({"flag": "No"}, OptionsPass(flag=False)),
        ({"count": "42"}, OptionsPass(count=42)),
        ({"count": "0"}, OptionsPass(count=0)),
        ({"ratio": "1e-3"}, OptionsPass(ratio=0.001)),
        ({"ratio": "-2"}, OptionsPass(ratio=-2.0)),
        ({"label": "hello world"}, OptionsPass(label="hello world")),
        ({"label": ""}, OptionsPass(label="")),
        ({"mode": "slow"}, OptionsPass(mode="slow")),
        (
            {"mode": "slow", "count": "7", "flag": "true", "ratio": "0.25", "label": "y"},
            OptionsPass(True, 7, 0.25, "y", "slow"),
        ),
    ],
)
def test_from_options_converts(options: dict[str, str], expected: OptionsPass) -> None:
    got = OptionsPass.from_options(options)
    assert got == expected
    assert [type(got.flag), type(got.count), type(got.ratio)] == [bool, int, float]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"flag": "maybe"}, "invalid value 'maybe' for option 'flag': expected true or false"),
        ({"flag": ""}, "invalid value '' for option 'flag'"),
        ({"count": "3.5"}, "invalid value '3.5' for option 'count': expected a 64-bit integer"),
        ({"count": "many"}, "expected a 64-bit integer"),
        ({"ratio": "half"}, "invalid value 'half' for option 'ratio': expected a number"),
        (
            {"mode": "medium"},
            "invalid value 'medium' for option 'mode': expected one of fast, slow",
        ),
        ({"mode": "FAST"}, "expected one of fast, slow"),
        ({"count": "-1"}, "pass 'test-options': count must be non-negative, got -1"),
        (
            {"colour": "red"},
            "pass 'test-options' has no option 'colour' (options: flag, count, ratio, label, mode)",
        ),
    ],
)
def test_from_options_errors(options: dict[str, str], message: str) -> None:
    with pytest.raises(PipelineError) as info:
        OptionsPass.from_options(options)
    assert message in info.value.message
    assert isinstance(info.value, SparsecompError)


def test_from_options_option_names_are_kebab_case() -> None:
    @dataclasses.dataclass(frozen=True)
    class Kebab(SparsecompPass):
        """Kebab."""

        NAME = "test-kebab"
        max_depth: int = 1

    assert Kebab.from_options({"max-depth": "4"}) == Kebab(max_depth=4)
    with pytest.raises(PipelineError, match="has no option 'max_depth' \\(options: max-depth\\)"):
        Kebab.from_options({"max_depth": "4"})
    assert Kebab(max_depth=2).pipeline_text() == "test-kebab{max-depth=2}"


def test_from_options_unsupported_type() -> None:
    with pytest.raises(PipelineError, match="option 'sizes' has unsupported type"):
        ListOptionPass.from_options({"sizes": "1,2"})


def test_pipeline_text_lists_every_option() -> None:
    text = OptionsPass(flag=True, count=5, ratio=0.125, label="lbl", mode="slow").pipeline_text()
    (element,) = parse_pipeline(text)
    assert element.name == "test-options"
    assert parse_options(element.options) == {
        "flag": "true",
        "count": "5",
        "ratio": "0.125",
        "label": "lbl",
        "mode": "slow",
    }


def test_pipeline_text_of_pass_without_options() -> None:
    cls = get_pass("sparse-iter-verify")
    assert cls.option_fields() == []
    assert cls().pipeline_text() == "sparse-iter-verify"


def _round_trip(instance: SparsecompPass) -> SparsecompPass:
    (element,) = parse_pipeline(instance.pipeline_text())
    assert element.name == instance.NAME
    assert element.children is None
    return type(instance).from_options(parse_options(element.options))


_LABELS = st.text(string.ascii_letters + string.digits + "_.-+/:@", min_size=1, max_size=20)


@given(
    flag=st.booleans(),
    count=st.integers(min_value=0, max_value=2**63 - 1),  # options are int64
    ratio=st.floats(allow_nan=False),
    label=_LABELS,
    mode=st.sampled_from(["fast", "slow"]),
)
def test_pipeline_text_round_trip_property(
    flag: bool, count: int, ratio: float, label: str, mode: str
) -> None:
    instance = OptionsPass(flag, count, ratio, label, mode)
    again = _round_trip(instance)
    assert again == instance
    assert math.copysign(1.0, again.ratio) == math.copysign(1.0, ratio)
    assert again.pipeline_text() == instance.pipeline_text()


@given(max_iterations=st.integers(min_value=1, max_value=2**31 - 1), test_convergence=st.booleans())
def test_registered_pass_pipeline_text_round_trip(max_iterations: int, test_convergence: bool):
    cls = get_pass("sparse-iter-fold-encodings")
    instance = cls(max_iterations=max_iterations, test_convergence=test_convergence)
    assert _round_trip(instance) == instance


@pytest.mark.parametrize("label", ["two words", "", "brace}", "a=b c"])
def test_pipeline_text_round_trip_of_awkward_strings(label: str) -> None:
    instance = OptionsPass(label=label)
    assert _round_trip(instance) == instance


# -- build_pass_manager --------------------------------------------------------


SEEN: list[tuple[str, str]] = []


@dataclasses.dataclass(frozen=True)
class RecordPass(SparsecompPass):
    """Record the operations the pass runs on (test only)."""

    NAME = "test-record"

    def run(self, op: ir.Operation, pass_) -> None:
        name = op.attributes["sym_name"] if "sym_name" in op.attributes else None
        SEEN.append((op.name, ir.StringAttr(name).value if name is not None else ""))


@pytest.fixture
def record_pass(monkeypatch) -> list[tuple[str, str]]:
    """Register ``test-record`` for the duration of a test; yields what it saw."""
    module = types.ModuleType("sparsecomp.transforms._test_record")
    module.RecordPass = RecordPass
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(transforms._REGISTRY, "test-record", "_test_record:RecordPass")
    SEEN.clear()
    return SEEN


def run_pipeline(pipeline: str, text: str = TWO_FUNCS) -> ir.Module:
    ctx = make_context()
    module = parse_module(text, "test.mlir", ctx)
    pm = build_pass_manager(pipeline, ctx)
    pm.run(module.operation)
    return module


def test_nested_pass_runs_on_each_function(record_pass) -> None:
    run_pipeline("builtin.module(func.func(test-record))")
    assert record_pass == [("func.func", "a"), ("func.func", "b")]


def test_unnested_pass_runs_on_the_module(record_pass) -> None:
    run_pipeline("builtin.module(test-record)")
    assert record_pass == [("builtin.module", "")]
    record_pass.clear()
    run_pipeline("test-record, func.func(test-record)")
    assert record_pass == [("builtin.module", ""), ("func.func", "a"), ("func.func", "b")]


def test_nested_fold_encodings_folds_every_function() -> None:
    before = run_pipeline("")
    assert str(before).count("= sparse_iter.") == 4
    module = run_pipeline("builtin.module(func.func(sparse-iter-fold-encodings))")
    text = str(module)
    assert "sparse_iter." not in text.replace("#sparse_iter.", "")
    funcs = [op for op in module.body.operations if op.operation.name == "func.func"]
    assert [ir.StringAttr(f.attributes["sym_name"]).value for f in funcs] == ["a", "b"]
    for func in funcs:
        (block,) = func.regions[0].blocks
        (ret,) = block.operations
        assert ret.operation.name == "func.return"
        assert ret.operands[0] == block.arguments[0]


def test_mixed_pipeline_with_upstream_passes_runs() -> None:
    module = run_pipeline(
        "builtin.module(func.func(cse, sparse-iter-fold-encodings), canonicalize)"
    )
    assert "sparse_iter.set_encoding" not in str(module)


@pytest.mark.parametrize(
    ("pipeline", "name"),
    [
        ("builtin.module(nope)", "nope"),
        ("cse, nope", "nope"),
        ("func.func(sparse-iter-verify, nope)", "nope"),
    ],
)
def test_unknown_pass_is_located(pipeline: str, name: str) -> None:
    with pytest.raises(PipelineError) as info:
        build_pass_manager(pipeline, make_context())
    assert f"unknown pass '{name}'" in info.value.message
    for registered in get_all_passes():
        assert registered in info.value.message
    assert info.value.location == f"<pass-pipeline>:1:{pipeline.index(name) + 1}"


def test_unknown_upstream_pass_under_anchor_is_named() -> None:
    pipeline = "builtin.module(func.func(nope))"
    with pytest.raises(PipelineError) as info:
        build_pass_manager(pipeline, make_context())
    assert "unknown pass 'nope'" in info.value.message
    assert info.value.location == f"<pass-pipeline>:1:{pipeline.index('nope') + 1}"


@pytest.mark.parametrize(
    "pipeline",
    [
        "sparse-iter-fold-encodings{max-iterations=abc}",
        "func.func(sparse-iter-fold-encodings{max-iterations=abc})",
        "canonicalize{max-iterations=abc}",
    ],
)
def test_bad_option_value_is_one_located_line(pipeline: str, capfd) -> None:
    with pytest.raises(PipelineError) as info:
        build_pass_manager(pipeline, make_context())
    rendered = info.value.render()
    assert "\n" not in rendered
    assert "'abc'" in rendered
    assert "max-iterations" in rendered
    name = pipeline.rpartition("(")[2].split("{")[0]
    assert info.value.location == f"<pass-pipeline>:1:{pipeline.index(name) + 1}"
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_pass_validation_error_is_located() -> None:
    pipeline = "cse, sparse-iter-fold-encodings{max-iterations=0}"
    with pytest.raises(PipelineError) as info:
        build_pass_manager(pipeline, make_context())
    assert "max-iterations must be at least 1 and below 2^31, got 0" in info.value.message
    assert info.value.location == "<pass-pipeline>:1:6"


def test_integer_options_hold_int64() -> None:
    """An integer option beyond int64 is a located option error: passes hand options to
    C++ (a huge max-iterations or min-bytes was a TypeError traceback)."""
    with pytest.raises(PipelineError, match="expected a 64-bit integer"):
        OptionsPass.from_options({"count": str(2**63)})
    assert OptionsPass.from_options({"count": str(2**63 - 1)}).count == 2**63 - 1
