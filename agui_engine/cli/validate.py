"""``agui-engine validate``: verify a recorded AG-UI run and show the conversation it builds.

Reads an SSE capture, an NDJSON file or a binary (``application/vnd.ag-ui.event+proto``) capture
(or stdin with ``-``), decodes it incrementally with
:class:`~agui_engine.protocol.codec.EventStreamDecoder` (:class:`~agui_engine.protocol.proto.ProtoEventDecoder`
for the binary one), runs every event through the
:class:`~agui_engine.protocol.verify.Verifier` (collecting, so that all violations are listed) and the
expanded events through an :class:`~agui_engine.protocol.accumulator.Accumulator`. It prints the verdict
(each violation with its rule, event index and ids), then the accumulated conversation, state,
runs and accumulator problems. Exit status: 0 valid, 1 invalid (a violation or an undecodable
event), 2 when the input cannot be read.

Without a path it validates the recorded run shipped in the package
(``agui_engine/data/example-run.sse``); ``--example broken`` shows a stream with violations.
This module is a command-line entry point: it reads files and writes to stdout, nothing else.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from importlib import resources
from typing import IO, Any

import msgspec

from ..genui.component_stream import COMPONENT_HANDLERS
from ..protocol.accumulator import Accumulator
from ..protocol.codec import EventDecodeError, EventStreamDecoder
from ..protocol.proto import ProtoEventDecoder
from ..protocol.verify import Verifier, Violation

__all__ = ["DEFAULT_EXAMPLE", "EXAMPLES", "PREVIEW_CHARS", "READ_CHUNK_BYTES", "add_arguments", "run", "validate_stream"]

#: Shipped recordings: name -> file in agui_engine/data/.
EXAMPLES: dict[str, str] = {"weather": "example-run.sse", "broken": "example-broken.ndjson"}
DEFAULT_EXAMPLE = "weather"

#: Bytes read per chunk: large enough that the decoder's per-call overhead vanishes, small
#: enough that a piped stream is verified while it is still arriving.
READ_CHUNK_BYTES = 64 * 1024
#: Characters of a message shown per line in the conversation view before it is cut.
PREVIEW_CHARS = 400


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path",
        nargs="?",
        help="an SSE capture, NDJSON file or binary (protobuf) capture, or - for stdin (default: the shipped example run)",
    )
    parser.add_argument(
        "--example",
        nargs="?",
        const=DEFAULT_EXAMPLE,
        choices=sorted(EXAMPLES),
        help=f"validate a recording shipped with agui-engine (default: {DEFAULT_EXAMPLE})",
    )
    parser.add_argument(
        "--format",
        choices=["auto", "sse", "ndjson", "proto"],
        default="auto",
        help="framing of the input; auto: protobuf frames if the first byte is NUL (a length prefix), NDJSON "
             "if it is '{', else SSE",
    )
    parser.add_argument(
        "--tolerant",
        action="store_true",
        help="keep unknown event types instead of failing (the AG-UI 1.1 processing rule)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    parser.add_argument("--quiet", action="store_true", help="print only the verdict")


class _Result:
    def __init__(self) -> None:
        self.verifier = Verifier(collect=True)
        self.accumulator = Accumulator(custom_handlers=COMPONENT_HANDLERS)
        self.events = 0
        self.decode_error: EventDecodeError | None = None
        self.format = ""

    @property
    def valid(self) -> bool:
        return self.decode_error is None and not self.verifier.violations


def _chunks(stream: IO[bytes]) -> Iterator[bytes]:
    while True:
        chunk = stream.read(READ_CHUNK_BYTES)
        if not chunk:
            return
        yield chunk


def _sniff(first: bytes) -> str:
    # A protobuf frame starts with its 4-byte big-endian length, under 16 MiB: a NUL, which
    # no SSE or NDJSON text begins with.
    if first[:1] == b"\x00":
        return "proto"
    text = first.lstrip(b"\xef\xbb\xbf \t\r\n")
    return "ndjson" if text[:1] in (b"{", b"[") else "sse"


def validate_stream(stream: IO[bytes], *, format: str = "auto", tolerant: bool = False) -> _Result:
    """Decode, verify and accumulate a whole byte stream (see the module docstring)."""
    result = _Result()
    decoder: EventStreamDecoder | ProtoEventDecoder | None = None
    try:
        for chunk in _chunks(stream):
            if decoder is None:
                result.format = _sniff(chunk) if format == "auto" else format
                decoder = (ProtoEventDecoder(tolerant=tolerant) if result.format == "proto"
                           else EventStreamDecoder(result.format, tolerant=tolerant))  # type: ignore[arg-type]
            _consume(result, decoder.feed(chunk))
        if decoder is None:
            result.format = "sse" if format == "auto" else format
        else:
            _consume(result, decoder.close())
    except EventDecodeError as exc:
        result.decode_error = exc
        return result  # the stream is broken here; what was accepted before stays verified
    result.verifier.close()
    return result


def _consume(result: _Result, events: list[Any]) -> None:
    for event in events:
        result.events += 1
        for expanded in result.verifier.feed(event):
            result.accumulator.apply(expanded)


def run(args: argparse.Namespace) -> int:
    if args.path is not None and args.example is not None:
        print("agui-engine validate: give a path or --example, not both", file=sys.stderr)
        return 2
    if args.path is None:
        name = EXAMPLES[args.example or DEFAULT_EXAMPLE]
        label = f"example {args.example or DEFAULT_EXAMPLE} (agui_engine/data/{name})"
        with resources.files("agui_engine").joinpath("data", name).open("rb") as stream:
            result = validate_stream(stream, format=args.format, tolerant=args.tolerant)
    elif args.path == "-":
        label = "stdin"
        result = validate_stream(sys.stdin.buffer, format=args.format, tolerant=args.tolerant)
    else:
        label = args.path
        try:
            with open(args.path, "rb") as stream:
                result = validate_stream(stream, format=args.format, tolerant=args.tolerant)
        except OSError as exc:
            print(f"agui-engine validate: cannot read {args.path}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    out = sys.stdout
    if hasattr(out, "reconfigure"):
        # A terminal that cannot show a character gets an escape, not a crash at the last line.
        out.reconfigure(errors="backslashreplace")
    if args.json:
        json.dump(_as_json(label, result), out, ensure_ascii=False, indent=2)
        out.write("\n")
    else:
        _print_text(label, result, out, quiet=args.quiet)
    return 0 if result.valid else 1


# --------------------------------------------------------------------------- output


def _violation_line(v: Violation) -> str:
    ids = " ".join(f"{k}={val!r}" for k, val in v.ids.items())
    where = f"event {v.event_index}" + (f" {v.event_type}" if v.event_type else "")
    return f"  {where} [{v.rule}]{' ' + ids if ids else ''}: {v.message}"


def _preview(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.replace("\n", "\\n")
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "..."


def _print_text(label: str, result: _Result, out: IO[str], *, quiet: bool) -> None:
    verifier, acc = result.verifier, result.accumulator
    runs = ", ".join(
        f"{r.run_id or '(unannounced)'} {r.status}" + (f" ({r.outcome})" if r.outcome and r.status == "finished" else "")
        for r in acc.runs
    )
    print(f"agui-engine validate: {label} [{result.format.upper()}]", file=out)
    if result.valid:
        print(f"VALID: {result.events} events; runs: {runs or 'none'}", file=out)
    else:
        count = len(verifier.violations) + (result.decode_error is not None)
        print(f"INVALID: {count} problem(s) in {result.events} events; runs: {runs or 'none'}", file=out)
        for v in verifier.violations:
            print(_violation_line(v), file=out)
        if result.decode_error is not None:
            print(f"  undecodable input, stream abandoned: {result.decode_error}", file=out)
    if verifier.warnings:
        print("warnings:", file=out)
        for v in verifier.warnings:
            print(_violation_line(v), file=out)
    if quiet:
        return
    messages = acc.messages
    print(f"\nconversation ({len(messages)} messages):", file=out)
    for m in messages:
        role = m.get("role", "?")
        owner = f" <{m['subagentRunId']}>" if m.get("subagentRunId") else ""
        head = f"  [{role}] {m['id']}{owner}"
        if role == "tool":
            print(f"{head} -> {m.get('toolCallId')}: {_preview(m.get('content'))}", file=out)
        elif role == "activity":
            print(f"{head} ({m.get('activityType')}): {_preview(m.get('content'))}", file=out)
        else:
            content = m.get("content")
            print(f"{head}: {_preview(content) if content else ''}", file=out)
        for call in m.get("toolCalls") or ():
            fn = call["function"]
            print(f"      tool call {fn['name']} ({call['id']}): {_preview(fn['arguments'])}", file=out)
        for key, value in m.items():
            if key not in _SHOWN_KEYS:
                print(f"      {key}: {_preview(value)}", file=out)
    print(f"\nstate: {_preview(acc.state)}", file=out)
    if acc.pending_interrupts:
        print(f"pending interrupts: {_preview(acc.pending_interrupts)}", file=out)
    for r in acc.runs:
        if r.usage:
            print(f"usage ({r.run_id}): {_preview(r.usage)}", file=out)
        if r.error_message:
            print(f"run error ({r.run_id}): {r.error_code or ''} {r.error_message}", file=out)
    if acc.unhandled_custom:
        counts: dict[str, int] = {}
        for event in acc.unhandled_custom:
            counts[event.name] = counts.get(event.name, 0) + 1
        listed = ", ".join(f"{name} x{n}" for name, n in counts.items())
        print(f"custom events without a handler: {listed}", file=out)
    if acc.problems:
        print("accumulator problems (not applied, the run went on):", file=out)
        for p in acc.problems:
            print(f"  {p}", file=out)


_SHOWN_KEYS = frozenset({"id", "role", "content", "toolCalls", "toolCallId", "activityType", "subagentRunId", "name"})


def _as_json(label: str, result: _Result) -> dict[str, Any]:
    acc = result.accumulator
    return {
        "input": label,
        "format": result.format,
        "valid": result.valid,
        "events": result.events,
        "violations": msgspec.to_builtins(result.verifier.violations),
        "warnings": msgspec.to_builtins(result.verifier.warnings),
        "decodeError": None if result.decode_error is None else str(result.decode_error),
        "runs": msgspec.to_builtins(acc.runs),
        "messages": acc.messages,
        "state": acc.state,
        "pendingInterrupts": acc.pending_interrupts,
        "problems": msgspec.to_builtins(acc.problems),
        "unhandledCustom": [{"name": e.name, "value": e.value} for e in acc.unhandled_custom],
    }
