"""Hypothesis strategies shared by the fuzzing tests."""

from __future__ import annotations

from hypothesis import strategies as st

# The hostile pieces the fuzzing found defects with, and a few of their relatives.
HOSTILE = st.one_of(
    st.integers(4290, 4400).map(lambda n: "1" * n),  # around int()'s digit limit
    st.integers(300, 420).map(lambda n: "9" * n),  # past float's range: inf
    st.sampled_from(["²", "¹", "٣", "1²", "0x", "-", "1_000", "\x00", "\ufffd", "\u2028"]),
    st.integers(900, 3000).map(lambda n: "[" * n),  # past the JSON decoder's recursion
    st.integers(900, 3000).map(lambda n: '{"a":' * n),
    st.integers(100, 2000).map(lambda n: "<a>" * n),
    st.tuples(st.sampled_from("a 0.:(x-\t"), st.integers(1000, 5000)).map(lambda t: t[0] * t[1]),
)
