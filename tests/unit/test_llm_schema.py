"""Units of synapsedb.llm without a network: the JSON-schema subset validator, reading JSON out
of a model's text, Retry-After, backoff and the circuit breaker on a fake clock."""

from __future__ import annotations

from email.utils import formatdate
from typing import Any

import pytest

from synapsedb.errors import ValidationError
from synapsedb.llm import BreakerState, check_schema, validate
from synapsedb.llm.breaker import Backoff, CircuitBreaker
from synapsedb.llm.schema import MAX_ERRORS
from synapsedb.llm.wire import Redactor, parse_reply, read_json, refuses_format, retry_after

PERSON: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "annotations are allowed"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "nickname": {"type": ["string", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "role": {"enum": ["admin", "user", 1]},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("value", "errors"),
    [
        ({"name": "Ada", "age": 36}, []),
        ({"name": "Ada", "age": 36.0, "nickname": None, "tags": []}, []),  # 36.0 is an integer
        ({"name": "Ada", "age": 36, "nickname": "A", "role": 1}, []),
        ({"name": "Ada"}, ["$.age: required property missing"]),
        ({"name": "Ada", "age": 36.5}, ["$.age: expected integer, got number"]),
        ({"name": "Ada", "age": True}, ["$.age: expected integer, got boolean"]),
        ({"name": "Ada", "age": -1}, ["$.age: -1 is less than the minimum 0"]),
        ({"name": "Ada", "age": 151}, ["$.age: 151 is more than the maximum 150"]),
        (
            {"name": "Ada", "age": 1, "nickname": 3},
            ["$.nickname: expected string or null, got integer"],
        ),
        ({"name": "Ada", "age": 1, "tags": ["a", 2]}, ["$.tags[1]: expected string, got integer"]),
        (
            {"name": "Ada", "age": 1, "role": True},
            ['$.role: expected one of "admin", "user", 1, got true'],
        ),
        ({"name": "Ada", "age": 1, "x y": 0}, ['$["x y"]: property not allowed by the schema']),
        ([], ["$: expected object, got array"]),
    ],
)
def test_validate(value: Any, errors: list[str]) -> None:
    assert validate(value, PERSON) == errors


def test_additional_properties_as_a_schema_and_nested_paths() -> None:
    schema = {
        "type": "object",
        "additionalProperties": {"type": "array", "items": {"type": "number"}},
    }
    assert validate({"a": [1, 2.5], "b": []}, schema) == []
    assert validate({"a": [1, "2"]}, schema) == ["$.a[1]: expected number, got string"]
    assert validate({"a": 1}, {"type": "object"}) == []  # additionalProperties defaults to true


def test_validate_reports_several_errors_but_not_unboundedly() -> None:
    errors = validate({"name": 1, "age": "x"}, PERSON)
    assert errors == ["$.name: expected string, got integer", "$.age: expected integer, got string"]
    many = validate(
        {"tags": list(range(50))}, {"properties": {"tags": PERSON["properties"]["tags"]}}
    )
    assert len(many) == MAX_ERRORS


def test_enum_compares_as_json_does() -> None:
    assert validate(1.0, {"enum": [1]}) == []
    assert validate(1, {"enum": [True]}) != []
    assert validate([1, {"a": None}], {"enum": [[1, {"a": None}]]}) == []
    assert validate([1, {"a": 0}], {"enum": [[1, {"a": None}]]}) != []


@pytest.mark.parametrize(
    ("schema", "field"),
    [
        ({"type": "object", "properties": {"a": {"type": "text"}}}, "schema.properties.a.type"),
        ({"type": "object", "properties": {"a": {"pattern": "^x"}}}, "schema.properties.a.pattern"),
        ({"anyOf": []}, "schema.anyOf"),
        ({"type": "object", "required": "a"}, "schema.required"),
        ({"type": "array", "items": {"$ref": "#/x"}}, "schema.items.$ref"),
        ({"type": "number", "minimum": "0"}, "schema.minimum"),
        ({"enum": []}, "schema.enum"),
        ({"type": []}, "schema.type"),
        ([], "schema"),
    ],
)
def test_check_schema_refuses_what_it_would_not_enforce(schema: Any, field: str) -> None:
    with pytest.raises(ValidationError) as err:
        check_schema(schema)
    assert err.value.field == field


def test_check_schema_accepts_the_subset() -> None:
    check_schema(PERSON)
    check_schema({"$schema": "x", "title": "t", "type": ["object", "null"], "examples": [{}]})


# -- JSON out of a model's text ----------------------------------------------------------------

OBJ = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1}',
        '  {"a": 1}\n',
        '```json\n{"a": 1}\n```',
        'Here it is: {"a": 1} hope it helps',
        'Sure.\n```\n{"a": 1}\n```',
    ],
)
def test_read_json_finds_the_object(text: str) -> None:
    assert read_json(text, OBJ) == ({"a": 1}, None)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "the answer is empty"),
        ("no json here", "not JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"a": NaN}', "not JSON"),
        ('{"a": "1"}', "$.a: expected integer, got string"),
    ],
)
def test_read_json_says_what_is_wrong(text: str, problem: str) -> None:
    value, got = read_json(text, OBJ)
    assert value is None and got is not None and problem in got


def test_parse_reply_tolerates_what_servers_vary_on() -> None:
    reply = parse_reply(
        b'{"choices": [{"message": {"content": [{"type": "text", "text": "a"}, '
        b'{"type": "text", "text": "b"}]}}]}'
    )
    assert (reply.content, reply.model, reply.finish_reason, reply.usage.total_tokens) == (
        "ab",
        "",
        None,
        0,
    )
    for bad in (b"", b"[]", b'{"choices": []}', b'{"choices": [{"message": 3}]}'):
        with pytest.raises(ValueError, match="not a chat completion"):
            parse_reply(bad)


def test_format_refusals_are_told_apart_from_other_400s() -> None:
    refusal = b'{"error": {"message": "response_format json_schema is not supported"}}'
    assert refuses_format(400, refusal, "json_schema")
    assert refuses_format(422, b"unknown field: response_format", "json_object")
    assert not refuses_format(400, b"messages: required", "json_schema")
    assert not refuses_format(500, refusal, "json_schema")
    assert not refuses_format(400, b"Invalid schema for response_format 'x'", "json_schema")
    assert not refuses_format(400, refusal, "prompt")


# -- Retry-After -------------------------------------------------------------------------------


def test_retry_after_forms() -> None:
    now = 1_700_000_000.0
    assert retry_after({"retry-after": "7"}, now) == 7.0
    assert retry_after({"retry-after": "0.5"}, now) == 0.5
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}, now) == 0.25
    assert retry_after({"retry-after": formatdate(now + 30, usegmt=True)}, now) == 30.0
    assert retry_after({"retry-after": formatdate(now - 30, usegmt=True)}, now) == 0.0
    for bad in ("soon", "-3", "nan", ""):
        assert retry_after({"retry-after": bad}, now) is None
    assert retry_after({}, now) is None


def test_redactor() -> None:
    redact = Redactor("sk-abc123", "https://me:pw-secret@api.example.com:8443/v1")
    assert redact.url == "https://api.example.com:8443/v1"
    assert redact("key sk-abc123 and pw-secret") == "key [redacted] and [redacted]"
    assert Redactor("", "")("nothing to hide") == "nothing to hide"
    hide = redact.hide
    assert hide("at https://me:pw-secret@api.example.com:8443/v1/chat, key sk-abc123") == (
        "at [upstream]/chat, key [redacted]"
    )
    assert hide("API.EXAMPLE.COM:8443 or api.example.com, not myapi.example.com") == (
        "[upstream] or [upstream], not myapi.example.com"
    )
    raw = b'{"error": {"message": "https:\\/\\/api.example.com:8443\\/v1 says sk-abc123"}}'
    assert redact.hide_bytes(raw) == b'{"error": {"message": "[upstream] says [redacted]"}}'
    assert Redactor("", "").hide_bytes(b"nothing") == b"nothing"


# -- backoff and breaker -----------------------------------------------------------------------


def test_backoff_is_full_jitter_under_an_exponential_ceiling() -> None:
    draws = iter([0.0, 0.999, 0.5, 0.5])
    backoff = Backoff(0.5, 4.0, lambda: next(draws))
    assert [backoff.ceiling(n) for n in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert backoff.delay(0) == 0.0
    assert backoff.delay(1) == pytest.approx(0.999)
    assert backoff.delay(10) == 2.0
    assert backoff.delay(10_000) == 2.0  # no overflow


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_breaker_state_machine() -> None:
    clock = Clock()
    breaker = CircuitBreaker(failures=2, cooldown_s=10, clock=clock)
    assert breaker.admit() == (True, False)
    assert breaker.fail() is False and breaker.state is BreakerState.CLOSED
    breaker.succeed()  # a success resets the count
    assert breaker.fail() is False
    assert breaker.fail() is True and breaker.state is BreakerState.OPEN
    assert breaker.admit() == (False, False)
    clock.now = 4
    assert breaker.remaining_s() == 6
    clock.now = 10
    assert breaker.state is BreakerState.HALF_OPEN
    assert breaker.admit() == (True, True)  # one probe
    assert breaker.admit() == (False, False)  # and only one
    assert breaker.fail() is True  # the probe failed: open for another cooldown
    clock.now = 19
    assert breaker.admit() == (False, False)
    clock.now = 20
    assert breaker.admit() == (True, True)
    breaker.succeed()
    assert breaker.state is BreakerState.CLOSED and breaker.failures == 0
    assert breaker.admit() == (True, False)
