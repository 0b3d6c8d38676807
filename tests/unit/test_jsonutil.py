"""Lossless JSON (agents_contract.jsonutil): the request body parser's answers (unparsable, too deep, lone
surrogates), exact numbers through parse -> write -> digest, and the binary64 check Claude schemas need.
Pure: no store, no network."""

from __future__ import annotations

import hashlib
from decimal import Decimal

import pytest

from agents_contract import jsonutil
from agents_contract.errors import InvalidRequest
from agents_contract.limits import MAX_JSON_DEPTH

SURROGATE = ("Invalid value for '{}': the string contains an unpaired Unicode surrogate; strings must be valid "
             "Unicode.")


def rejected(data: bytes) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as err:
        jsonutil.loads_request(data)
    error = err.value
    assert error.status == 400 and error.code == "invalid_request_error" and error.type == "invalid_request_error"
    return error


def nested(depth: int, opener: str = "[", closer: str = "]") -> bytes:
    return (opener * depth + closer * depth).encode()


def nested_objects(depth: int) -> bytes:
    return ('{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)).encode()


# ---- loads_request: what a request body may be --------------------------------------------------------

def test_numbers_keep_their_exact_value_and_the_sign_of_minus_zero():
    value = jsonutil.loads_request(b'{"f": 1.10, "z": -0, "i": 12345678901234567890123, "e": 1E2, "n": [0, -5]}')
    assert value == {"f": Decimal("1.10"), "z": Decimal("-0"), "i": 12345678901234567890123, "e": Decimal("1E+2"),
                     "n": [0, -5]}
    assert str(value["f"]) == "1.10" and value["z"].is_signed()
    assert type(value["i"]) is int and [type(n) for n in value["n"]] == [int, int]


@pytest.mark.parametrize("data", [
    b"",
    b"{",
    b'{"a": 1,}',
    b"{'a': 1}",
    b'{"a": 1} trailing',
    b'{"a": NaN}',
    b'{"a": Infinity}',
    b"-Infinity",
    b"\xff\xfe\xfd",  # not UTF-8
], ids=["empty", "unclosed", "trailing comma", "single quotes", "trailing text", "NaN", "Infinity", "-Infinity",
        "not utf-8"])
def test_what_is_not_json_is_the_unparsable_answer(data):
    error = rejected(data)
    assert error.message == "We could not parse the JSON body of your request. The API expects a JSON payload."
    assert error.param is None


@pytest.mark.parametrize("data", [
    nested(MAX_JSON_DEPTH + 1),
    nested_objects(MAX_JSON_DEPTH + 1),
    b'{"a": [' + nested(MAX_JSON_DEPTH - 1) + b"]}",  # mixed objects and arrays, one level too many
    nested(100_000),  # deep enough to exhaust the decoder's own recursion
], ids=["arrays", "objects", "mixed", "decoder recursion"])
def test_more_than_64_levels_is_too_deep(data):
    error = rejected(data)
    assert error.message == ("The request body is nested too deeply: JSON objects and arrays may nest at most 64 "
                             "levels.")
    assert error.param is None


def test_exactly_64_levels_is_accepted():
    value = jsonutil.loads_request(nested(MAX_JSON_DEPTH))
    for _ in range(MAX_JSON_DEPTH - 1):
        (value,) = value
    assert value == []
    value = jsonutil.loads_request(nested_objects(MAX_JSON_DEPTH))
    for _ in range(MAX_JSON_DEPTH - 1):
        value = value["a"]
    assert value == {}


@pytest.mark.parametrize("data, expected", [
    (b'"' + b"[" * 100 + b'"', "[" * 100),  # brackets inside a string are text, not nesting
    (b'{"a": "' + b"{[" * 50 + b'"}', {"a": "{[" * 50}),
    (b"[" + b"[]," * 100 + b"[]]", [[]] * 101),  # wide but two levels deep
], ids=["string body", "string member", "wide"])
def test_many_brackets_that_do_not_nest_are_accepted(data, expected):
    assert jsonutil.loads_request(data) == expected


@pytest.mark.parametrize("data, path", [
    (b'{"a": "\\ud800"}', "a"),
    (b'{"a": ["ok", "x\\udc00y"]}', "a[1]"),
    (b'{"agent": {"tools": [{"name": "x\\uDBFFy"}]}}', "agent.tools[0].name"),
    (b'{"a": {"\\udfff": 1}}', "a"),  # a member name: the object holding it
    (b'["ok", "\\udbff"]', "[1]"),
    (b'{"ok": "\\ud83d\\ude00", "bad": "\\ude00\\ud83d"}', "bad"),  # reversed pair: two lone halves
], ids=["member", "array element", "deep", "member name", "top-level array", "reversed pair"])
def test_a_lone_surrogate_is_rejected_naming_where_it_is(data, path):
    error = rejected(data)
    assert error.message == SURROGATE.format(path) and error.param == path


@pytest.mark.parametrize("data", [b'"\\ud800"', b'{"\\ud800": "x"}'], ids=["string body", "top-level member name"])
def test_a_lone_surrogate_at_the_top_names_the_body(data):
    error = rejected(data)
    assert error.message == SURROGATE.format("body") and error.param is None


@pytest.mark.parametrize("data, expected", [
    (b'{"a": "\\ud83d\\ude00"}', {"a": "\U0001F600"}),  # a pair is one scalar value
    (b'{"a": "\\\\ud800"}', {"a": "\\ud800"}),  # an escaped backslash: plain text
    (b'{"a": "\\u00e9\\uFFFD"}', {"a": "\u00e9\ufffd"}),
], ids=["surrogate pair", "escaped backslash", "non-surrogate escapes"])
def test_valid_unicode_is_accepted(data, expected):
    assert jsonutil.loads_request(data) == expected


# ---- render: the paths error messages name -------------------------------------------------------------

@pytest.mark.parametrize("path, text", [
    ((), ""),
    (("agent", "tools", 0, "name"), "agent.tools[0].name"),
    (("events", 2), "events[2]"),
    ((0, "a"), "[0].a"),
    (("metadata", "clé"), "metadata.clé"),
    (("x\ud800y", "b"), "x\\ud800y.b"),  # a lone surrogate is shown escaped, so the message can be encoded
])
def test_render(path, text):
    assert jsonutil.render(path) == text


# ---- binary64_exact ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, exact", [
    (0, True),
    (2**53, True),
    (2**53 + 1, False),
    (-(2**53) - 1, False),
    (2**64, False),  # a double holds it, but writing the double back gives 18446744073709552000
    (10**400, False),  # beyond any double
    (Decimal("0.1"), True),  # the double nearest 0.1 is written back as 0.1
    (Decimal("0.10000000000000000001"), False),
    (Decimal("1.5e300"), True),
    (Decimal("1e400"), False),
    (Decimal("-1e400"), False),
    (Decimal("1e-400"), False),  # underflows to 0
    (Decimal("-0"), True),
])
def test_binary64_exact(value, exact):
    assert jsonutil.binary64_exact(value) is exact


# ---- dumps and digest ---------------------------------------------------------------------------------------

def test_parsed_numbers_are_written_back_exactly():
    text = '{"a":[1E+2,-0,0.0005,12345678901234567890.123456789],"b":1.10,"c":3}'
    assert jsonutil.dumps(jsonutil.loads(text)) == text


def test_dumps_is_compact_and_keeps_non_ascii():
    assert jsonutil.dumps({"b": "é", "a": [1, True, None, 2.5]}) == '{"b":"é","a":[1,true,null,2.5]}'
    assert jsonutil.dumps({"b": 1, "a": {"d": 2, "c": 3}}, sort_keys=True) == '{"a":{"c":3,"d":2},"b":1}'


def test_dumps_writes_each_decimal_in_its_place():
    values = [Decimal(f"{i}.{'0' * i}") for i in range(12)]  # more than ten: tokens 1 and 10 must not collide
    assert jsonutil.dumps({"v": values, "t": (Decimal("-0.0"),)}, sort_keys=True) == \
        '{"t":[-0.0],"v":[0,1.0,2.00,3.000,4.0000,5.00000,6.000000,7.0000000,8.00000000,9.000000000,' \
        '10.0000000000,11.00000000000]}'


def test_a_string_that_looks_like_a_number_stays_a_string():
    assert jsonutil.dumps({"s": "1.10", "n": Decimal("1.10")}) == '{"s":"1.10","n":1.10}'


def test_digest_is_the_sha256_of_the_canonical_form():
    assert jsonutil.digest({"b": 1, "a": Decimal("1.0")}) == hashlib.sha256(b'{"a":1.0,"b":1}').hexdigest()


@pytest.mark.parametrize("left, right, same", [
    ({"a": 1, "b": [2, 3]}, {"b": [2, 3], "a": 1}, True),  # member order does not matter
    ({"a": Decimal("1.0")}, {"a": Decimal("1.00")}, False),  # the number as sent does
    ({"a": 1}, {"a": Decimal("1.0")}, False),
    ({"a": None}, {}, False),  # presence is kept
    ({"a": [1, 2]}, {"a": [2, 1]}, False),
    ({"a": "1"}, {"a": 1}, False),
])
def test_digest_compares_content_and_presence(left, right, same):
    assert (jsonutil.digest(left) == jsonutil.digest(right)) is same
