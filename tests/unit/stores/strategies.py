"""Hypothesis strategies shared by the store property tests."""

from __future__ import annotations

from hypothesis import strategies as st

KEYS = ["a", "b", "c", "d", "e"]
keys = st.sampled_from(KEYS)
bound_keys = st.one_of(st.none(), keys)
values = st.one_of(st.none(), st.integers(0, 9))
present_values = st.integers(0, 9)
times = st.integers(0, 150)
bound_times = st.one_of(st.none(), st.integers(-5, 160))
