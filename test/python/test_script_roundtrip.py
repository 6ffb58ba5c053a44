"""The printer's round trip (IR -> Python -> IR) over the examples and the lit corpus."""

from __future__ import annotations

from script_corpus import listed, outcomes


def test_round_trip_is_a_fixed_point_but_for_the_listed() -> None:
    found = outcomes()
    failing = {k: v for k, v in found.items() if v != "same"}
    expected = listed()
    assert {k: v for k, v in failing.items() if k not in expected} == {}, "new failures"
    fixed = sorted(k for k in expected if found.get(k) == "same")
    assert fixed == [], "round trip now: drop them from script_roundtrip_exceptions.txt"
    gone = sorted(k for k in expected if k not in found)
    assert gone == [], "no longer inputs: drop them from script_roundtrip_exceptions.txt"
    changed = {k: (expected[k], v) for k, v in failing.items() if expected[k] != v}
    assert changed == {}, "the listed reasons changed"


def test_every_example_round_trips() -> None:
    found = outcomes()
    examples = {k: v for k, v in found.items() if k.startswith("examples/")}
    assert examples
    assert set(examples.values()) == {"same"}, examples
