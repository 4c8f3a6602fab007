"""The OpenAPI document's fields for "at each reader's own hour": a subscriber's `timezone`
(`broadside.campaigns.broadcasts.local_time.clean_timezone`) and a broadcast's `send_at_local`
(`clean_local_time`), as `webapp/apidocs/schemas.py` puts them in its schemas."""

from __future__ import annotations

from typing import Any

READER_TIMEZONE: dict[str, Any] = {
    "type": ["string", "null"], "maxLength": 64, "pattern": "^[A-Za-z0-9_+/-]*$",
    "examples": ["Asia/Tokyo", "Europe/Berlin"],
    "description": "An IANA time zone name this server knows; null: none (a broadcast at each "
                   "reader's hour gives them the owner's)."}
TIMEZONE = {"timezone": READER_TIMEZONE}
TIMEZONE_INPUT = {**READER_TIMEZONE, "description": "Their time zone (replaces a known person's "
                  "when given); 422 naming the field when the server does not know it."}
TIMEZONE_PATCH = {**READER_TIMEZONE, "description": 'null or "" removes it; 422 naming the '
                  "field when the server does not know it."}

SEND_AT_LOCAL: dict[str, Any] = {
    "type": ["string", "null"], "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$",
    "examples": ["09:00"], "description": (
        "HH:MM: each reader gets it at that time in their own time zone, within 24 hours of the "
        "send (readers without one: the owner's time zone, Settings); null: everyone at once. "
        "Not together with an A/B test (refused at send). 422 naming the field when not HH:MM.")}
# Spread into each broadcast schema: `**LOCAL_TIME`.
LOCAL_TIME = {"send_at_local": SEND_AT_LOCAL}


# A reader's language (broadside.core.i18n.clean_locale): what they are written to in.
READER_LOCALE = {"type": ["string", "null"], "maxLength": 35, "examples": ["de", "pt-BR"],
                 "pattern": "^([A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*)?$",
                 "description": "A language tag (BCP 47, such as de, fr or pt-BR); null: the "
                 "list's default language."}
