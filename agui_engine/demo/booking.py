"""The demo's table booking, in A2UI v0.9: what the embedded model draws with ``render_a2ui``.

Theory of operation
-------------------
"Book a table for two" (with the ``render_a2ui`` tool offered, ``agui-engine demo --a2ui``) is
answered with two surfaces of the A2UI basic catalog, both pure data built here:

* :func:`booking_form` -- ``table-booking``: a Card holding a form (``TextField`` name and guests,
  a ``DateTimeInput``, a long-text ``TextField`` for requests) whose values are bound to
  ``/booking/...`` of the data model, and a primary ``Button`` whose action ``book_table`` carries
  them (``{"path": ...}`` in its context, resolved by the renderer when it is clicked);
* :func:`availability_dashboard` -- ``table-availability``: tonight's figures in a Row of Cards
  and a ``List`` repeated over ``/slots`` (a template with relative paths);
* :func:`booking_confirmation` -- ``booking-confirmation``, drawn once the ``book_table`` action
  comes back (the middleware's ``log_a2ui_event`` convention): what was booked, read from the
  action's context.

Component order is parent first (the root, then its children), so a streamed surface grows from
the top. The restaurant, its figures and its slots are fixed demo data and say so; no booking is
ever made. No IO.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "AVAILABILITY_SURFACE",
    "BOOKING_ACTION",
    "BOOKING_SURFACE",
    "CONFIRMATION_SURFACE",
    "DEMO_RESTAURANT",
    "availability_dashboard",
    "booking_confirmation",
    "booking_form",
    "for_a2ui_version",
    "is_booking_request",
    "party_size",
]

BOOKING_SURFACE: Final = "table-booking"
AVAILABILITY_SURFACE: Final = "table-availability"
CONFIRMATION_SURFACE: Final = "booking-confirmation"
#: The name of the form button's action (what comes back as the user action).
BOOKING_ACTION: Final = "book_table"

#: The demo restaurant: fixed, illustrative data.
DEMO_RESTAURANT: Final[dict[str, Any]] = {
    "name": "Trattoria Demo",
    "address": "12 Via Esempio (demo data)",
    "date": "2026-12-04T19:30",
    "free_tables": 4,
    "wait_minutes": 15,
    "rating": "4.6 / 5",
    "slots": [
        {"time": "18:30", "seats": "3 tables for 2"},
        {"time": "19:30", "seats": "1 table for 2, 1 for 4"},
        {"time": "21:00", "seats": "2 tables for 6"},
    ],
}

_WORDS: Final = ("book", "table", "reserv")
_NUMBERS: Final = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                   "a couple": 2}


def is_booking_request(text: str) -> bool:
    """Whether ``text`` asks for a table ("book a table", "a reservation for four")."""
    lowered = text.lower()
    return any(word in lowered for word in _WORDS)


def party_size(text: str) -> int:
    """The number of guests ``text`` names ("for two", "for 4 people"); 2 when it names none."""
    lowered = text.lower()
    match = re.search(r"\bfor\s+(\d{1,2})\b", lowered)
    if match:
        return max(1, int(match.group(1)))
    for word, n in _NUMBERS.items():
        if re.search(rf"\bfor\s+{word}\b", lowered):
            return n
    return 2


def _text(component_id: str, text: Any, variant: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"id": component_id, "component": "Text", "text": text}
    if variant is not None:
        out["variant"] = variant
    return out


def for_a2ui_version(surface: dict[str, Any], version: str) -> dict[str, Any]:
    """``surface`` (``render_a2ui`` arguments) as A2UI ``version`` allows it: v1.0's basic Text has no
    heading variants (``caption`` and ``body`` only), so an ``hN`` heading becomes Markdown (``## text``,
    which v1.0's Text renders); v0.9 as it is."""
    if version != "v1.0":
        return surface
    components = []
    for comp in surface.get("components", ()):
        variant = comp.get("variant") if comp.get("component") == "Text" else None
        if isinstance(variant, str) and len(variant) == 2 and variant[0] == "h" and variant[1].isdigit():
            comp = {k: v for k, v in comp.items() if k != "variant"}
            if isinstance(comp.get("text"), str):
                comp["text"] = "#" * int(variant[1]) + " " + comp["text"]
        components.append(comp)
    return {**surface, "components": components}


def booking_form(guests: int) -> dict[str, Any]:
    """``render_a2ui`` arguments: the booking form, its data model pre-filled for ``guests``."""
    fields = ("name", "when", "guests", "notes")
    components = [
        {"id": "root", "component": "Card", "child": "form"},
        {"id": "form", "component": "Column", "children": ["title", "place", "name", "when", "guests", "notes", "book"]},
        _text("title", "Book a table", "h2"),
        _text("place", f"{DEMO_RESTAURANT['name']} · {DEMO_RESTAURANT['address']}", "caption"),
        {"id": "name", "component": "TextField", "label": "Name", "value": {"path": "/booking/name"}},
        {"id": "when", "component": "DateTimeInput", "label": "Date and time", "value": {"path": "/booking/when"},
         "enableDate": True, "enableTime": True},
        {"id": "guests", "component": "TextField", "label": "Guests", "value": {"path": "/booking/guests"},
         "variant": "number"},
        {"id": "notes", "component": "TextField", "label": "Requests", "value": {"path": "/booking/notes"},
         "variant": "longText"},
        {"id": "book", "component": "Button", "child": "book-label", "variant": "primary",
         "action": {"event": {"name": BOOKING_ACTION,
                              "context": {f: {"path": f"/booking/{f}"} for f in fields}}}},
        _text("book-label", "Book the table"),
    ]
    data = {"booking": {"name": "", "when": DEMO_RESTAURANT["date"], "guests": str(guests), "notes": ""}}
    return {"surfaceId": BOOKING_SURFACE, "components": components, "data": data}


def availability_dashboard() -> dict[str, Any]:
    """``render_a2ui`` arguments: tonight's availability, figures and a list over ``/slots``."""
    figures = [("free", "Free tables", str(DEMO_RESTAURANT["free_tables"])),
               ("wait", "Wait", f"{DEMO_RESTAURANT['wait_minutes']} min"),
               ("rating", "Rating", DEMO_RESTAURANT["rating"])]
    components: list[dict[str, Any]] = [
        {"id": "root", "component": "Column", "children": ["heading", "figures", "slots-title", "slots"]},
        _text("heading", f"Tonight at {DEMO_RESTAURANT['name']} (demo data)", "h3"),
        {"id": "figures", "component": "Row", "children": [f"{key}-card" for key, _, _ in figures],
         "justify": "spaceBetween"},
    ]
    for key, label, value in figures:
        components += [
            {"id": f"{key}-card", "component": "Card", "child": f"{key}-col"},
            {"id": f"{key}-col", "component": "Column", "children": [f"{key}-label", f"{key}-value"]},
            _text(f"{key}-label", label, "caption"),
            _text(f"{key}-value", value, "h4"),
        ]
    components += [
        _text("slots-title", "Open slots", "h4"),
        {"id": "slots", "component": "List", "children": {"componentId": "slot", "path": "/slots"}},
        {"id": "slot", "component": "Row", "children": ["slot-time", "slot-seats"]},
        _text("slot-time", {"path": "time"}),
        _text("slot-seats", {"path": "seats"}),
    ]
    return {"surfaceId": AVAILABILITY_SURFACE, "components": components,
            "data": {"slots": [dict(s) for s in DEMO_RESTAURANT["slots"]]}}


def booking_confirmation(context: Mapping[str, Any]) -> dict[str, Any]:
    """``render_a2ui`` arguments: the confirmation of the booking the action's ``context`` describes."""
    name = str(context.get("name") or "").strip() or "you"
    guests = str(context.get("guests") or "").strip() or "?"
    when = str(context.get("when") or "").strip() or DEMO_RESTAURANT["date"]
    notes = str(context.get("notes") or "").strip()
    lines = [f"A table for {guests} on {when.replace('T', ' at ')}, under the name {name}."]
    if notes:
        lines.append(f"Requests: {notes}")
    lines.append("This is the demo: nothing was reserved.")
    components = [
        {"id": "root", "component": "Card", "child": "done"},
        {"id": "done", "component": "Column", "children": ["done-title", *[f"line-{i}" for i in range(len(lines))]]},
        _text("done-title", f"Booked at {DEMO_RESTAURANT['name']}", "h3"),
        *[_text(f"line-{i}", line) for i, line in enumerate(lines)],
    ]
    return {"surfaceId": CONFIRMATION_SURFACE, "components": components}
