"""The error tree: each branch's HTTP status, WebSocket close code, RUN_ERROR event
and JSON body, and the invariants every error class of every layer keeps."""

from __future__ import annotations

import importlib
import pkgutil
import re

import msgspec
import pytest

import agui_engine
from agui_engine.protocol.codec import decode_event, encode_event
from agui_engine.protocol.errors import (
    WS_CLOSE_BAD_INPUT,
    WS_CLOSE_BUSY,
    WS_CLOSE_INTERNAL,
    WS_CLOSE_LIMIT,
    WS_CLOSE_UPSTREAM,
    AguiEngineError,
    CapacityError,
    LimitExceededError,
    RemoteInputError,
    UpstreamError,
    UsageError,
)
from agui_engine.protocol.events import RunErrorEvent

BRANCHES = [
    # class, HTTP status, WebSocket close code, default code, built-in base a caller may catch
    (AguiEngineError, 500, WS_CLOSE_INTERNAL, "internal_error", Exception),
    (UsageError, 500, WS_CLOSE_INTERNAL, "usage_error", TypeError),
    (RemoteInputError, 400, WS_CLOSE_BAD_INPUT, "bad_input", ValueError),
    (LimitExceededError, 413, WS_CLOSE_LIMIT, "limit_exceeded", ValueError),
    (UpstreamError, 502, WS_CLOSE_UPSTREAM, "upstream_error", Exception),
    (CapacityError, 503, WS_CLOSE_BUSY, "server_busy", Exception),
]


@pytest.mark.parametrize(("cls", "status", "close", "code", "builtin"), BRANCHES)
def test_each_branch_maps_to_status_close_code_and_run_error(
    cls: type[AguiEngineError], status: int, close: int, code: str, builtin: type[Exception]
) -> None:
    assert (cls.http_status, cls.ws_close_code, cls.default_code) == (status, close, code)
    exc = cls("the thing at $.messages[0] is wrong")
    assert isinstance(exc, builtin) and exc.code == code and str(exc) == exc.message
    event = RunErrorEvent.from_error(exc)
    assert event == RunErrorEvent(message="the thing at $.messages[0] is wrong", code=code)
    # what a transport sends: a valid RUN_ERROR on the wire, and the HTTP error body
    assert decode_event(encode_event(event)) == event
    assert exc.to_json() == {"error": {"code": code, "message": "the thing at $.messages[0] is wrong"}}
    with pytest.raises(builtin):
        raise exc


def test_an_explicit_code_overrides_the_default_everywhere() -> None:
    exc = RemoteInputError("bad", code="my_rule")
    assert exc.code == "my_rule" and RunErrorEvent.from_error(exc).code == "my_rule"
    assert exc.to_json()["error"]["code"] == "my_rule"
    assert exc.http_status == 400  # the status stays the class's


def test_upstream_errors_say_whether_a_retry_may_help() -> None:
    assert UpstreamError("boom").retryable is False
    busy = UpstreamError("overloaded", code="overloaded", retryable=True)
    assert busy.retryable and RunErrorEvent.from_error(busy).code == "overloaded"


def test_close_codes_are_in_the_application_range() -> None:
    # RFC 6455 7.4.2: 4000-4999 is for applications; each branch has its own code
    codes = [WS_CLOSE_BAD_INPUT, WS_CLOSE_LIMIT, WS_CLOSE_UPSTREAM, WS_CLOSE_INTERNAL, WS_CLOSE_BUSY]
    assert len(set(codes)) == len(codes) and all(4000 <= c <= 4999 for c in codes)


def _every_error_class() -> list[type[AguiEngineError]]:
    for pkg_name in ("agui_engine", "agui_engine.adapters", "agui_engine.transports"):
        pkg = importlib.import_module(pkg_name)
        for mod in pkgutil.iter_modules(pkg.__path__):
            if mod.name != "__main__":
                importlib.import_module(f"{pkg_name}.{mod.name}")
    seen: list[type[AguiEngineError]] = []
    todo = [AguiEngineError]
    while todo:  # a finite class tree: each class is visited once
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.append(sub)
                todo.append(sub)
    return seen


def test_every_error_class_of_every_layer_keeps_its_branch_contract() -> None:
    """An error raised anywhere (core, adapters, transports) maps to a status and
    close code of its branch, and its code is a stable snake_case identifier."""
    classes = _every_error_class()
    assert len(classes) > 30 and agui_engine.__name__  # the whole tree, not just errors.py
    for cls in classes:
        where = f"{cls.__module__}.{cls.__qualname__}"
        assert re.fullmatch(r"[a-z][a-z0-9_]*", cls.default_code), where
        assert 4000 <= cls.ws_close_code <= 4999, where
        if issubclass(cls, RemoteInputError):
            assert 400 <= cls.http_status <= 499, where  # the peer's fault
        elif issubclass(cls, UpstreamError):
            assert cls.http_status in (502, 503, 504), where
        elif issubclass(cls, CapacityError):
            assert cls.http_status in (429, 503), where  # "try again later"
        else:
            assert cls.http_status == 500, where  # the embedding program's bug
        if issubclass(cls, LimitExceededError):
            assert cls.http_status == 413 and cls.ws_close_code == WS_CLOSE_LIMIT, where


def test_run_error_events_are_frozen_and_carry_no_traceback() -> None:
    try:
        raise UpstreamError("the provider answered 500")
    except UpstreamError as exc:
        event = RunErrorEvent.from_error(exc)
    wire = encode_event(event)
    assert b"Traceback" not in wire and msgspec.json.decode(wire)["type"] == "RUN_ERROR"
    with pytest.raises(AttributeError):
        event.message = "changed"  # type: ignore[misc]
