"""The built-in serdes: round trips, the JSON fast path (orjson) keeping the standard library's
values and errors, and error messages that name the serde, the place and the bytes."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamproc import serde
from streamproc.errors import SerializationError

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**80), 2**80)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300)
@given(json_values)
def test_json_round_trip_equals_the_standard_library(value: Any) -> None:
    data = serde.JSON.serialize(value)
    if value is None:  # None is a Kafka null (a tombstone), never the JSON text null
        assert data is None
        return
    assert isinstance(data, bytes)
    assert serde.JSON.deserialize(data) == value
    assert json.loads(data) == value  # plain JSON any reader understands


def test_json_is_compact_utf8() -> None:
    assert serde.JSON.serialize({"a": [1, 2], "b": "é"}) == '{"a":[1,2],"b":"é"}'.encode()


@pytest.mark.parametrize("big", [2**63, -(2**63) - 1, 2**64, 12345678901234567890123, -(10**30)])
def test_json_integers_beyond_64_bits_are_exact_both_ways(big: int) -> None:
    data = serde.JSON.serialize({"id": big})
    assert data == f'{{"id":{big}}}'.encode()
    assert serde.JSON.deserialize(data) == {"id": big}
    assert type(serde.JSON.deserialize(data)["id"]) is int


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, [1, {"x": math.nan}]])
def test_json_rejects_non_finite_floats_naming_the_value(bad: Any) -> None:
    with pytest.raises(SerializationError, match=r"json serde cannot serialize .* for sink 'out'"):
        serde.JSON.serialize(bad, "sink 'out'")


def test_json_null_values_still_serialise() -> None:
    assert serde.JSON.serialize({"a": None, "b": "null"}) == b'{"a":null,"b":"null"}'


@pytest.mark.parametrize("bad", [{"a": None, "b": math.nan}, {"a": None, math.inf: 1}, ({"x": None}, [-math.inf]),
                                 [None, [[{"deep": math.nan}]]]])
def test_json_rejects_non_finite_floats_next_to_nulls(bad: Any) -> None:
    with pytest.raises(SerializationError, match=r"json serde cannot serialize"):
        serde.JSON.serialize(bad, "sink 'out'")


class _Str(str):
    pass


json_or_not = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=5)
    | st.builds(_Str, st.text(max_size=3)) | st.just(b"x"),
    lambda children: st.lists(children, max_size=3) | st.tuples(children, children)
    | st.dictionaries(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3), children,
                      max_size=3),
    max_leaves=12,
)


@settings(max_examples=500)
@given(json_or_not)
def test_the_null_recheck_is_skipped_only_where_the_standard_encoder_accepts_the_value(value: Any) -> None:
    """orjson's output containing null is re-checked with the standard encoder (it writes NaN and
    Infinity as null) unless _plain_finite says the standard encoder would accept the value."""
    if serde._plain_finite(value):
        json.JSONEncoder(allow_nan=False).encode(value)  # does not raise
    strict = json.JSONEncoder(allow_nan=False)
    try:
        strict.encode(value)
        accepted = True
    except (ValueError, TypeError):
        accepted = False
    if not accepted and value is not None:
        with pytest.raises(SerializationError):
            serde.JSON.serialize(value)


def test_json_decodes_what_the_standard_library_decodes() -> None:
    # orjson rejects these; the serde falls back so values are those of json.loads
    assert math.isnan(serde.JSON.deserialize(b"NaN"))
    assert serde.JSON.deserialize(b'"\\ud800"') == "\ud800"
    assert serde.JSON.deserialize(b"1e400") == math.inf


@pytest.mark.parametrize("data", [b"{", b"\xff\xfe", b"[1,]", b"nul"])
def test_json_malformed_bytes_raise_with_position_and_bytes(data: bytes) -> None:
    with pytest.raises(SerializationError) as info:
        serde.JSON.deserialize(data, "topic 'clicks'")
    msg = str(info.value)
    assert msg.startswith(f"json serde cannot deserialize {len(data)} bytes from topic 'clicks'")
    assert repr(data) in msg


def test_json_key_serde_turns_arrays_into_tuples() -> None:
    key = ("user", 7, ("nested", 1))
    assert serde.JSON_KEY.deserialize(serde.JSON_KEY.serialize(key)) == key


def test_json_unserialisable_object_is_a_serialization_error() -> None:
    with pytest.raises(SerializationError, match=r"json serde cannot serialize object value"):
        serde.JSON.serialize(object(), "x")


def test_json_non_string_dict_keys_like_the_standard_library() -> None:
    value = {1: "a", 2.5: "b", False: "c", None: "d"}
    assert serde.JSON.serialize(value) == json.dumps(value, separators=(",", ":")).encode()


@settings(max_examples=200)
@given(st.text())
def test_string_round_trip(text: str) -> None:
    try:
        encoded = text.encode()
    except UnicodeEncodeError:  # lone surrogates are not UTF-8
        with pytest.raises(SerializationError, match="string serde cannot serialize str"):
            serde.STRING.serialize(text, "k")
        return
    assert serde.STRING.serialize(text) == encoded
    assert serde.STRING.deserialize(encoded) == text


def test_string_errors_name_type_and_bytes() -> None:
    with pytest.raises(SerializationError, match=r"string serde cannot serialize int value 5 for store 's'"):
        serde.STRING.serialize(5, "store 's'")
    with pytest.raises(SerializationError, match=r"string serde cannot deserialize 2 bytes from t: .*b'\\xff\\xfe'"):
        serde.STRING.deserialize(b"\xff\xfe", "t")
    assert serde.STRING.deserialize(bytearray(b"ab")) == "ab"
    assert serde.STRING.serialize(None) is None and serde.STRING.deserialize(None) is None
