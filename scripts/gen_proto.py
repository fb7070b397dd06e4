"""Regenerate the protobuf schema table and the .proto files from the pinned ``@ag-ui/proto``.

Run: ``.venv/bin/python scripts/gen_proto.py`` (build time only; nothing at run time reads npm);
``--check`` writes nothing and exits 1 when a generated file is not what the package gives.

Why this source: the ``@ag-ui/proto`` 1.0.0 npm package does not ship its ``.proto`` files, only
the TypeScript that ``protoc`` + ``protoc-gen-ts_proto`` v2.7.7 generated from them (kept verbatim
in ``dist/index.js.map``'s ``sourcesContent``). That generated code states every message's field
numbers, wire types, presence (``!== undefined`` = explicit, ``!== ""`` = proto3 implicit),
repeated fields and their write order, and every enum: exactly what an encoder needs. This script
reads it and writes

* ``agui_engine/protocol/_proto_schema.py`` -- the table the core codec runs on (generated, never
  edited by hand), and
* ``spec/proto/{events,types,patch}.proto`` -- the same schema as ``.proto`` text (field numbers,
  types, labels; the upstream comments are not recoverable), with the package's MIT ``LICENSE``.

It refuses any version other than :data:`PINNED_VERSION`.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tests" / "js" / "node_modules" / "@ag-ui" / "proto"
PINNED_VERSION = "1.0.0"
SCHEMA_OUT = ROOT / "agui_engine" / "protocol" / "_proto_schema.py"
PROTO_DIR = ROOT / "spec" / "proto"
FILES = ("events", "types", "patch")

_ENUM = re.compile(r"export enum (\w+) \{(.*?)\n\}", re.S)
_MEMBER = re.compile(r"^\s*(\w+) = (-?\d+),", re.M)
_ENCODE = re.compile(
    r"encode\(message: (\w+), writer: BinaryWriter = new BinaryWriter\(\)\): BinaryWriter \{\n"
    r"(.*?)\n    return writer;",
    re.S,
)
_IF = re.compile(r"^    if \(message\.(\w+) !== (\"\"|0|false|undefined)\) \{\n\s+(.*?)\n    \}", re.M)
_FOR = re.compile(r"^    for \(const v of message\.(\w+)\) \{\n\s+(.*?)\n    \}", re.M)
_SCALAR = re.compile(r"writer\.uint32\((\d+)\)\.(\w+)\(")
_NESTED = re.compile(r"(\w+)\.encode\((?:\w+\.wrap\()?[^,]*?,? ?writer\.uint32\((\d+)\)\.fork\(\)")
_GOOGLE = {"Value": "value", "Struct": "struct", "ListValue": "list"}


def _field(stmt: str) -> tuple[int, str]:
    m = _NESTED.search(stmt)
    if m:
        name, tag = m.group(1), int(m.group(2))
        return tag, _GOOGLE.get(name, "message:" + name)
    m = _SCALAR.search(stmt)
    if not m:
        raise SystemExit(f"unrecognised ts-proto statement: {stmt!r}")
    return int(m.group(1)), m.group(2)


def parse(sources: dict[str, str]) -> tuple[dict[str, list[tuple[int, str, int, str, str]]], dict[str, dict[str, int]]]:
    messages: dict[str, list[tuple[int, str, int, str, str]]] = {}
    enums: dict[str, dict[str, int]] = {}
    for name in FILES:
        text = sources[name]
        for m in _ENUM.finditer(text):
            enums[m.group(1)] = {k: int(v) for k, v in _MEMBER.findall(m.group(2)) if int(v) >= 0}
        for m in _ENCODE.finditer(text):
            body = m.group(2)
            fields = []
            stmts = [(s.start(), "repeated", s.group(1), s.group(2)) for s in _FOR.finditer(body)]
            stmts += [(s.start(), "optional" if s.group(2) == "undefined" else "implicit", s.group(1), s.group(3))
                      for s in _IF.finditer(body)]
            for _, label, key, stmt in sorted(stmts):
                tag, kind = _field(stmt)
                if kind == "int32" and key in ("type", "op"):
                    kind = "enum:" + ("EventType" if m.group(1) == "BaseEvent" else "JsonPatchOperationType")
                fields.append((tag >> 3, key, tag, kind, label))
            messages[m.group(1)] = fields
    return messages, enums


_PROTO_TYPES = {"string": "string", "bool": "bool", "int64": "int64", "int32": "int32", "double": "double",
                "value": "google.protobuf.Value", "struct": "google.protobuf.Struct"}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def write_proto(name: str, text: str, messages: dict[str, list[tuple[int, str, int, str, str]]],
                enums: dict[str, dict[str, int]]) -> str:
    imports = {"events": ['"google/protobuf/struct.proto"', '"patch.proto"', '"types.proto"'],
               "types": ['"google/protobuf/struct.proto"'], "patch": ['"google/protobuf/struct.proto"']}[name]
    out = ["// Reconstructed by scripts/gen_proto.py from @ag-ui/proto " + PINNED_VERSION
           + "'s generated code (the npm package ships no .proto).",
           "// Field numbers, types and labels are the upstream schema's; comments are not recoverable.",
           "// Copyright (c) 2025 the AG-UI authors, MIT licence: see LICENSE.", "",
           'syntax = "proto3";', "", "package ag_ui;", ""]
    out += [f"import {i};" for i in imports] + [""]
    for m in _ENUM.finditer(text):
        out.append(f"enum {m.group(1)} {{")
        out += [f"  {k} = {v};" for k, v in enums[m.group(1)].items()]
        out += ["}", ""]
    for m in _ENCODE.finditer(text):
        msg = m.group(1)
        if "_" in msg:
            continue  # nested (ToolCall_Function): written inside its parent
        out.append(f"message {msg} {{")
        for child in [c for c in messages if c.startswith(msg + "_")]:
            out.append(f"  message {child.split('_', 1)[1]} {{")
            out += ["    " + _proto_field(f, msg) for f in messages[child]]
            out.append("  }")
        oneof = msg == "Event" or msg in ("InputContent", "InputContentSource")
        if oneof:
            out.append("  oneof " + ("event" if msg == "Event" else "kind") + " {")
        out += [("    " if oneof else "  ") + _proto_field(f, msg, in_oneof=oneof) for f in messages[msg]]
        if oneof:
            out.append("  }")
        out += ["}", ""]
    return "\n".join(out)


def _proto_field(f: tuple[int, str, int, str, str], parent: str, *, in_oneof: bool = False) -> str:
    number, key, _, kind, label = f
    if kind.startswith("message:"):
        t = kind[8:].replace(parent + "_", "")
    elif kind.startswith("enum:"):
        t = kind[5:]
    else:
        t = _PROTO_TYPES[kind]
    scalar = not kind.startswith("message:") and kind not in ("value", "struct")
    explicit = label == "optional" and not in_oneof and scalar
    prefix = "repeated " if label == "repeated" else ("optional " if explicit else "")
    return f"{prefix}{t} {_snake(key)} = {number};"


def main() -> int:
    meta = json.loads((PACKAGE / "package.json").read_text())
    if meta["version"] != PINNED_VERSION:
        print(f"@ag-ui/proto is {meta['version']}, this generator is pinned to {PINNED_VERSION}", file=sys.stderr)
        return 1
    smap = json.loads((PACKAGE / "dist" / "index.js.map").read_text())
    sources = {Path(s).stem: c for s, c in zip(smap["sources"], smap["sourcesContent"])
               if "/generated/" in s and "google" not in s}
    messages, enums = parse(sources)
    lines = ['"""The AG-UI protobuf schema as a table: GENERATED by scripts/gen_proto.py from @ag-ui/proto '
             + PINNED_VERSION + '. Do not edit.', "",
             "``MESSAGES[name]`` lists ``(number, json_key, tag, kind, label)`` in the order ts-proto writes them;",
             "kind is a scalar (string, bool, int32, int64, double), ``value`` / ``struct`` (google.protobuf),",
             "``enum:<Name>`` or ``message:<Name>``; label is implicit (proto3, default not written),",
             'optional (explicit presence) or repeated. ``ENUMS[name]`` maps member names to numbers."""', "",
             "from __future__ import annotations", "", "from typing import Final", "",
             'PROTO_PACKAGE_VERSION: Final = "' + PINNED_VERSION + '"', "",
             "MESSAGES: Final[dict[str, tuple[tuple[int, str, int, str, str], ...]]] = {"]
    for name, fields in messages.items():
        lines.append(f"    {name!r}: (")
        lines += [f"        {f!r}," for f in fields]
        lines.append("    ),")
    lines += ["}", "", "ENUMS: Final[dict[str, dict[str, int]]] = {"]
    for name, members in enums.items():
        lines.append(f"    {name!r}: {{")
        lines += [f"        {k!r}: {v}," for k, v in members.items()]
        lines.append("    },")
    lines += ["}", ""]
    outputs = {SCHEMA_OUT: "\n".join(lines), PROTO_DIR / "LICENSE": (PACKAGE / "LICENSE").read_text()}
    for name in FILES:
        outputs[PROTO_DIR / f"{name}.proto"] = write_proto(name, sources[name], messages, enums)
    if "--check" in sys.argv[1:]:
        stale = [str(p.relative_to(ROOT)) for p, text in outputs.items() if not p.is_file() or p.read_text() != text]
        if stale:
            print("stale, run scripts/gen_proto.py: " + ", ".join(stale), file=sys.stderr)
            return 1
        return 0
    PROTO_DIR.mkdir(parents=True, exist_ok=True)
    for path, text in outputs.items():
        path.write_text(text)
    print(f"wrote {SCHEMA_OUT.relative_to(ROOT)} ({len(messages)} messages, {len(enums)} enums)"
          f" and {PROTO_DIR.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
