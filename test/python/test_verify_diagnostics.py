"""Tests of the ``--verify-diagnostics`` engine (sparsecomp.tools.diagnostics)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparsecomp.tools.diagnostics import (
    SEVERITIES,
    Diagnostic,
    Expectation,
    check,
    compile_message_regex,
    format_diagnostic,
    parse_expectations,
    verify_diagnostics,
)

FILE = "test.mlir"


def diag(severity: str, line: int, message: str, col: int = 1, filename: str = FILE) -> Diagnostic:
    return Diagnostic(severity, filename, line, col, message)


def error(line: int, col: int, message: str, filename: str = FILE) -> Diagnostic:
    return Diagnostic("error", filename, line, col, message)


def parse_ok(text: str) -> list[Expectation]:
    expectations, errors = parse_expectations(text, FILE)
    assert errors == []
    return expectations


def parse_error(text: str) -> Diagnostic:
    expectations, errors = parse_expectations(text, FILE)
    assert expectations == []
    assert len(errors) == 1
    return errors[0]


def only(text: str) -> Expectation:
    expectations = parse_ok(text)
    assert len(expectations) == 1
    return expectations[0]


# --- data types and formatting ---------------------------------------------------------------


def test_diagnostic_rejects_unknown_severity() -> None:
    with pytest.raises(ValueError, match="unknown severity 'fatal'"):
        Diagnostic("fatal", FILE, 1, 1, "boom")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"severity": "info"}, "unknown severity"), ({"count": 0}, "count must be positive")],
)
def test_expectation_validates_fields(kwargs: dict[str, object], match: str) -> None:
    fields: dict[str, object] = {"severity": "error", "line": 1, "message_or_regex": "x"}
    with pytest.raises(ValueError, match=match):
        Expectation(**(fields | kwargs))  # type: ignore[arg-type]


def test_data_types_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        diag("error", 1, "x").line = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Expectation("error", 1, "x").count = 3  # type: ignore[misc]


def test_format_diagnostic_with_location() -> None:
    assert format_diagnostic(diag("warning", 3, "careful", col=7)) == (
        "test.mlir:3:7: warning: careful"
    )


def test_format_diagnostic_unknown_location_omits_line_and_col() -> None:
    assert format_diagnostic(diag("error", 0, "lost", col=5)) == "test.mlir: error: lost"


# --- parsing: where the expectation applies --------------------------------------------------


@pytest.mark.parametrize("severity", SEVERITIES)
def test_annotation_on_its_own_line(severity: str) -> None:
    text = f"%0 = op\n%1 = op  // expected-{severity} {{{{some text}}}}\n"
    assert only(text) == Expectation(severity, 2, "some text", False, 1, 2, 13)


@pytest.mark.parametrize(("spec", "line"), [("@+2", 5), ("@-2", 1), ("@+0", 3), ("@-0", 3)])
def test_relative_offsets(spec: str, line: int) -> None:
    text = f"a\nb\n// expected-error{spec} {{{{x}}}}\nc\nd\n"
    assert only(text).line == line


def test_offset_may_point_past_the_last_line() -> None:
    assert only("// expected-error@+5 {{eof}}").line == 6


def test_offset_before_first_line_is_an_error() -> None:
    text = "a\n  // expected-error@-2 {{x}}\n"
    assert parse_error(text) == error(2, 6, "line offset '-2' is before the start of the file")


def test_above_and_below_skip_annotation_lines() -> None:
    text = "\n".join(
        [
            "%0 = op",  # 1
            "// expected-error@above {{one}}",  # 2
            "// expected-note@above {{two}}",  # 3
            "// expected-error@below {{three}}",  # 4
            "// expected-warning@below {{four}}",  # 5
            "%1 = op",  # 6
            "%2 = op  // expected-error {{five}}",  # 7
            "// expected-error@above {{six}}",  # 8
        ]
    )
    lines = {e.message_or_regex: e.line for e in parse_ok(text)}
    assert lines == {"one": 1, "two": 1, "three": 6, "four": 6, "five": 7, "six": 6}


def test_above_without_a_plain_line_is_an_error() -> None:
    err = parse_error("// expected-error@above {{x}}\n")
    assert err == error(1, 4, "no line without an annotation is above this expected-error")


def test_dangling_below_is_an_error() -> None:
    err = parse_error("a\n// expected-remark@below {{x}}")
    assert err == error(2, 4, "no line without an annotation is below this expected-remark")


def test_below_may_apply_to_the_empty_last_line() -> None:
    assert only("// expected-error@below {{eof}}\n").line == 2


def test_unknown_location() -> None:
    assert only("a\n// expected-error@unknown {{x}}\n").line == 0


def test_marker_reference() -> None:
    text = "// expected-error@#use {{x}}\n%0 = op\n%1 = op // #use\n"
    assert only(text) == Expectation("error", 3, "x", False, 1, 1, 4)


def test_marker_may_follow_code_and_precede_comment_text() -> None:
    text = "%0 = op //#m1 and more\n// expected-warning@#m1 {{x}}\n"
    assert only(text).line == 1


def test_undefined_marker_is_an_error() -> None:
    err = parse_error("// #other\n// expected-error@#missing {{x}}\n")
    assert err == error(2, 4, "reference to undefined marker '#missing' in expected-error")


def test_marker_defined_twice_is_an_error_when_referenced() -> None:
    text = "a // #m\nb // #m\n// expected-error@#m {{x}}\n"
    assert parse_error(text).message == "marker '#m' is defined on several lines: 1, 2"


def test_duplicate_marker_that_is_never_referenced_is_fine() -> None:
    assert parse_expectations("a // #m\nb // #m\n", FILE) == ([], [])


def test_hash_without_comment_is_not_a_marker() -> None:
    text = "#map = affine_map<(d0) -> (d0)>\n// expected-error@#map {{x}}\n"
    assert "undefined marker '#map'" in parse_error(text).message


@pytest.mark.parametrize("spec", ["@", "@+", "@top", "@+1x", "@#", "@#1a", "@-x"])
def test_invalid_line_offset(spec: str) -> None:
    err = parse_error(f"// expected-note{spec} {{{{x}}}}\n")
    assert err == error(1, 4, f"invalid line offset '{spec}' in expected-note")


# --- parsing: message, count, -re --------------------------------------------------------------


def test_message_ends_at_last_closing_braces() -> None:
    assert only("// expected-error {{a}} b {{c}}").message_or_regex == "a}} b {{c"


def test_text_after_the_last_closing_braces_is_ignored() -> None:
    assert only("// expected-error {{abc}} trailing").message_or_regex == "abc"


def test_empty_message_and_no_space_before_braces() -> None:
    assert only("// expected-error{{}}").message_or_regex == ""


def test_whitespace_before_at_is_allowed() -> None:
    assert only("a\n// expected-error  @-1   {{x}}").line == 1


def test_crlf_line_endings() -> None:
    expectations = parse_ok("a\r\n// expected-error@above {{x}}\r\nb // expected-note {{y}}\r\n")
    assert [(e.line, e.message_or_regex) for e in expectations] == [(1, "x"), (3, "y")]


@pytest.mark.parametrize(
    ("annotation", "count", "line"),
    [
        ("expected-error 3 {{x}}", 3, 2),
        ("expected-error@+1 2 {{x}}", 2, 3),
        ("expected-error 1{{x}}", 1, 2),
    ],
)
def test_repeat_count(annotation: str, count: int, line: int) -> None:
    expectation = only(f"a\n// {annotation}\n")
    assert (expectation.count, expectation.line) == (count, line)


def test_zero_count_is_an_error() -> None:
    err = parse_error("// expected-warning 0 {{x}}")
    assert err == error(1, 4, "repeat count in expected-warning must be positive")


@pytest.mark.parametrize(
    "text",
    [
        "// expected-error",
        "// expected-error oops {{x}}",
        "// expected-error {x}}",
        "expected-error 2",
    ],
)
def test_missing_open_braces(text: str) -> None:
    assert parse_error(text).message == "expected '{{' in expected-error"


def test_missing_open_braces_names_the_regex_form() -> None:
    assert parse_error("// expected-note-re@+1").message == "expected '{{' in expected-note-re"


def test_missing_close_braces() -> None:
    err = parse_error("a\n  // expected-error@-1 {{oops }")
    assert err == error(2, 6, "expected '}}' at end of expected-error")


@pytest.mark.parametrize(
    "text",
    [
        "// unexpected-error {{x}}",
        "// RUN: cat %S/expected-errors.mlir",
        "// see expected-error-foo {{x}}",
        "// xexpected-error {{x}}",
        '%0 = op {note = "expected-error"}',
    ],
)
def test_lookalikes_are_not_annotations(text: str) -> None:
    assert parse_expectations(text, FILE) == ([], [])


def test_only_the_first_annotation_on_a_line_counts() -> None:
    expectation = only("// expected-error {{a}} expected-note {{b}}")
    assert (expectation.severity, expectation.message_or_regex) == (
        "error",
        "a}} expected-note {{b",
    )


def test_text_outside_regex_blocks_is_literal() -> None:
    expectation = only("// expected-error-re {{^a{{.}}$}}")
    assert expectation.matches("x ^ab$ y")
    assert not expectation.matches("ab")


def test_regex_annotation_keeps_mlir_form() -> None:
    text = "// expected-error-re {{value {{[0-9]+}} out of range}}"
    expectation = only(text)
    assert expectation.is_regex
    assert expectation.message_or_regex == "value {{[0-9]+}} out of range"
    assert expectation.matches("error: value 42 out of range!")
    assert not expectation.matches("value x out of range")


@pytest.mark.parametrize(
    ("message", "error_text"),
    [
        ("a {{[0-9]+", "found start of regex with no end '}}'"),
        ("a {{(}} b", "invalid regex: missing ), unterminated subpattern at position 0"),
        ("{{)(}}", "invalid regex: unbalanced parenthesis at position 0"),
        ("{{[[:word:]]}}", "invalid regex: unknown character class '[:word:]'"),
    ],
)
def test_invalid_regex_annotations(message: str, error_text: str) -> None:
    err = parse_error(f"x // expected-error-re {{{{{message}}}}}")
    assert err == error(1, 6, error_text)


def test_several_annotations_and_errors_in_one_file() -> None:
    text = "a // expected-error {{1}}\n// expected-error@-9 {{2}}\nb // expected-note {{3}}\n"
    expectations, errors = parse_expectations(text, FILE)
    assert [e.message_or_regex for e in expectations] == ["1", "3"]
    assert [e.line for e in errors] == [2]


# --- message regexes ---------------------------------------------------------------------------


def test_literal_parts_of_a_regex_message_are_escaped() -> None:
    pattern = compile_message_regex("a.b{{c+}}")
    assert pattern.search("xx a.bccc")
    assert not pattern.search("axbc")


def test_regex_search_is_unanchored() -> None:
    assert compile_message_regex("{{[0-9]}}x").search("prefix 7x suffix")


@pytest.mark.parametrize(
    ("block", "good", "bad"),
    [
        ("[[:digit:]]+", "123", "abc"),
        ("[[:alpha:]_]+", "a_b", "123"),
        ("[[:space:]]", " ", "x"),
        ("[[:punct:]]", "%", "a"),
        ("[[:xdigit:]]+", "beef", "xyz"),
    ],
)
def test_posix_classes_are_translated(block: str, good: str, bad: str) -> None:
    pattern = compile_message_regex(f"<{{{{{block}}}}}>")
    assert pattern.fullmatch(f"<{good}>")
    assert not pattern.fullmatch(f"<{bad}>")


def test_regex_block_ends_at_the_first_closing_braces() -> None:
    pattern = compile_message_regex("{{x{2}}}")  # as in MLIR: the block is "x{2", then "}"
    assert pattern.search("x{2}")
    assert not pattern.search("xx")


def test_regex_blocks_become_groups() -> None:
    match = compile_message_regex("{{a|b}}c")
    assert match.search("bc")
    assert not match.search("a")  # "a|b" alone would match "a": the block is grouped


# --- checking ----------------------------------------------------------------------------------


def test_everything_matched_is_success() -> None:
    text = "%0 = op // expected-error {{bad type}}\n// expected-note@-1 {{see}}\n"
    expectations = parse_ok(text)
    diagnostics = [diag("error", 1, "'op': bad type i3"), diag("note", 1, "see here")]
    assert check(expectations, diagnostics, FILE) == []


def test_unexpected_diagnostic() -> None:
    assert check([], [diag("warning", 4, "boo", col=9)], FILE) == [
        error(4, 9, "unexpected warning: boo")
    ]


def test_expected_but_not_produced() -> None:
    expectation = Expectation("remark", 3, "hello", source_line=2, source_col=5)
    assert check([expectation], [], FILE) == [
        error(2, 5, 'expected remark "hello" was not produced')
    ]


def test_not_produced_reports_regex_in_mlir_form() -> None:
    expectations = parse_ok("// expected-error-re {{n = {{[0-9]+}}}}")
    assert check(expectations, [], FILE)[0].message == (
        'expected error "n = {{[0-9]+}}" was not produced'
    )


def test_wrong_line_gives_both_errors() -> None:
    expectations = parse_ok("a // expected-error {{x}}\nb\n")
    assert check(expectations, [diag("error", 2, "x")], FILE) == [
        error(2, 1, "unexpected error: x"),
        error(1, 6, 'expected error "x" was not produced'),
    ]


def test_message_must_contain_the_expected_text() -> None:
    expectations = parse_ok("a // expected-error {{needle}}")
    assert check(expectations, [diag("error", 1, "hay needle stack")], FILE) == []
    assert len(check(expectations, [diag("error", 1, "haystack")], FILE)) == 2


def test_wrong_severity_is_a_near_miss() -> None:
    expectations = parse_ok("a // expected-error {{x}}")
    assert check(expectations, [diag("warning", 1, "x", col=3)], FILE) == [
        error(1, 6, "'warning' diagnostic emitted when expecting a 'error'"),
        error(1, 6, 'expected error "x" was not produced'),
    ]


def test_near_miss_needs_matching_text() -> None:
    expectations = parse_ok("a // expected-error {{x}}")
    errors = check(expectations, [diag("warning", 1, "y", col=3)], FILE)
    assert errors[0] == error(1, 3, "unexpected warning: y")


def test_one_expectation_accounts_for_one_diagnostic_by_default() -> None:
    expectations = parse_ok("a // expected-error {{x}}")
    diagnostics = [diag("error", 1, "x"), diag("error", 1, "x", col=4)]
    assert check(expectations, diagnostics, FILE) == [error(1, 4, "unexpected error: x")]


def test_repeated_annotations_each_take_one() -> None:
    expectations = parse_ok("a // expected-error {{x}}\n// expected-error@-1 {{x}}\n")
    assert check(expectations, [diag("error", 1, "x")] * 2, FILE) == []
    assert len(check(expectations, [diag("error", 1, "x")] * 3, FILE)) == 1


@pytest.mark.parametrize(
    ("produced", "messages"),
    [
        (2, []),
        (1, ['expected error "x" was produced 1 of 2 times']),
        (0, ['expected error "x" was not produced']),
        (3, ["unexpected error: x"]),
    ],
)
def test_repeat_count_must_be_met_exactly(produced: int, messages: list[str]) -> None:
    expectations = parse_ok("a // expected-error 2 {{x}}")
    errors = check(expectations, [diag("error", 1, "x")] * produced, FILE)
    assert [e.message for e in errors] == messages


def test_diagnostic_goes_to_an_expectation_with_room_left() -> None:
    expectations = parse_ok("a // expected-error {{x}}\n// expected-error@-1 {{x y}}\n")
    diagnostics = [diag("error", 1, "x y"), diag("error", 1, "x y")]
    assert check(expectations, diagnostics, FILE) == []


def test_unknown_location_matches_only_at_unknown() -> None:
    expectations = parse_ok("a\n// expected-error@unknown {{lost}}\n")
    assert check(expectations, [diag("error", 0, "lost", col=0, filename="")], FILE) == []
    errors = check(expectations, [diag("error", 1, "lost")], FILE)
    assert [e.message for e in errors] == [
        "unexpected error: lost",
        'expected error "lost" was not produced',
    ]


@pytest.mark.parametrize("name", ["", "-", FILE])
def test_stdin_and_empty_filenames_mean_the_checked_file(name: str) -> None:
    expectations = parse_ok("a // expected-error {{x}}")
    assert check(expectations, [diag("error", 1, "x", filename=name)], FILE) == []


def test_unexpected_without_filename_is_reported_in_the_checked_file() -> None:
    assert check([], [diag("error", 2, "x", filename="-")], FILE) == [
        error(2, 1, "unexpected error: x")
    ]


def test_diagnostics_from_other_files_are_unexpected() -> None:
    expectations = parse_ok("a // expected-error {{x}}")
    errors = check(expectations, [diag("error", 1, "x", filename="other.mlir")], FILE)
    assert errors == [
        error(1, 1, "unexpected error: x", filename="other.mlir"),
        error(1, 6, 'expected error "x" was not produced'),
    ]


def test_unexpected_notes_are_errors_by_default() -> None:
    assert check([], [diag("note", 1, "see current operation")], FILE) == [
        error(1, 1, "unexpected note: see current operation")
    ]


def test_ignore_notes_drops_note_diagnostics_and_expectations() -> None:
    text = "a // expected-error {{x}}\n// expected-note@below {{never}}\nb\n"
    expectations = parse_ok(text)
    diagnostics = [diag("error", 1, "x"), diag("note", 1, "see current operation")]
    assert check(expectations, diagnostics, FILE, ignore_notes=True) == []
    assert len(check(expectations, diagnostics, FILE)) == 2


def test_ignore_notes_still_checks_other_severities() -> None:
    errors = check([], [diag("remark", 2, "r"), diag("note", 2, "n")], FILE, ignore_notes=True)
    assert errors == [error(2, 1, "unexpected remark: r")]


def test_check_accepts_any_iterable_of_diagnostics() -> None:
    expectations = parse_ok("a // expected-error {{x}}")
    assert check(expectations, (d for d in [diag("error", 1, "x")]), FILE) == []


def test_regex_expectation_in_check() -> None:
    expectations = parse_ok("a // expected-error-re {{{{^}}'{{[a-z_.]+}}' op}}")
    assert check(expectations, [diag("error", 1, "'sparse.foo' op bad")], FILE) == []
    assert len(check(expectations, [diag("error", 1, "x 'sparse.foo' op")], FILE)) == 2


def test_verify_diagnostics_reports_parse_errors_first() -> None:
    text = "a // expected-error {{x}}\n// expected-error@-5 {{y}}\n"
    errors = verify_diagnostics(text, [diag("warning", 2, "w")], FILE)
    assert [(e.line, e.message) for e in errors] == [
        (2, "line offset '-5' is before the start of the file"),
        (2, "unexpected warning: w"),
        (1, 'expected error "x" was not produced'),
    ]


def test_verify_diagnostics_success() -> None:
    text = "// expected-note@below {{n}}\nop\n"
    assert verify_diagnostics(text, [diag("note", 2, "n")], FILE) == []


# --- properties --------------------------------------------------------------------------------

messages = st.text(st.characters(blacklist_characters="\n\r"), max_size=30)


@st.composite
def offset_annotation(draw: st.DrawFn) -> tuple[str, int, int]:
    """A file with one ``@+K``/``@-K`` annotation; returns text, its target line, line count."""
    num_lines = draw(st.integers(1, 30))
    source = draw(st.integers(1, num_lines))
    target = draw(st.integers(1, num_lines + 3))
    delta = target - source
    spec = f"@+{delta}" if delta >= 0 else f"@-{-delta}"
    lines = [f"%{i} = op" for i in range(num_lines)]
    lines[source - 1] += f"  // expected-error{spec} {{{{boom}}}}"
    return "\n".join(lines), target, num_lines


@given(offset_annotation())
def test_offset_expectation_matches_its_target_line(case: tuple[str, int, int]) -> None:
    text, target, _ = case
    expectations = parse_ok(text)
    assert [e.line for e in expectations] == [target]
    assert check(expectations, [diag("error", target, "kaboom!")], FILE) == []


@given(offset_annotation(), st.integers(0, 40))
def test_offset_expectation_fails_on_any_other_line(case: tuple[str, int, int], line: int) -> None:
    text, target, _ = case
    line = line if line != target else target + 1
    errors = check(parse_ok(text), [diag("error", line, "kaboom!")], FILE)
    assert [e.message for e in errors] == [
        "unexpected error: kaboom!",
        'expected error "boom" was not produced',
    ]
    assert errors[0].line == line


@given(st.integers(0, 5), st.integers(1, 5), st.sampled_from(["above", "below"]))
def test_stacked_above_below_annotations(before: int, stacked: int, where: str) -> None:
    code = [f"%{i} = op" for i in range(before + 2)]
    annotations = [f"// expected-error@{where} {{{{e{i}}}}}" for i in range(stacked)]
    lines = [*code[:-1], *annotations, code[-1]]
    target = before + 1 if where == "above" else before + 1 + stacked + 1
    assert {e.line for e in parse_ok("\n".join(lines))} == {target}


@given(messages)
def test_literal_message_round_trips(message: str) -> None:
    assert only(f"// expected-warning {{{{{message}}}}}").message_or_regex == message


@given(messages, messages, messages)
def test_any_message_containing_the_text_matches(prefix: str, text: str, suffix: str) -> None:
    expectation = Expectation("error", 1, text)
    assert check([expectation], [diag("error", 1, prefix + text + suffix)], FILE) == []


@given(messages.filter(lambda m: "{{" not in m))
def test_regex_message_without_blocks_is_literal(message: str) -> None:
    pattern = compile_message_regex(message)
    assert pattern.search(message)
    assert pattern.pattern.count("(") == message.count("(")  # every paren escaped, none a group


@given(st.integers(1, 5), st.integers(0, 8))
def test_count_accounting(count: int, produced: int) -> None:
    expectation = Expectation("note", 2, "n", count=count, source_line=1)
    errors = check([expectation], [diag("note", 2, "n")] * produced, FILE)
    unexpected = [e for e in errors if e.message.startswith("unexpected")]
    assert len(unexpected) == max(0, produced - count)
    assert len(errors) - len(unexpected) == (1 if produced < count else 0)


@given(st.permutations(list(range(1, 8))))
def test_diagnostic_order_does_not_matter(order: list[int]) -> None:
    text = "\n".join(f"op{i} // expected-error {{{{e{i}}}}}" for i in range(1, 8))
    diagnostics = [diag("error", i, f"e{i}") for i in order]
    assert check(parse_ok(text), diagnostics, FILE) == []
