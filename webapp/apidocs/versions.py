"""The OpenAPI document's `versions` of a broadcast or an automation step: the message in other
languages, as `broadside.campaigns.content.versions.clean_versions` takes and stores them."""

from __future__ import annotations

from broadside.campaigns.content.versions import MAX_BODY_CHARS, MAX_LINE_CHARS, MAX_VERSIONS

VERSIONS_EXAMPLE = {"locale": "de", "subject": "Neuigkeiten im November", "preheader": "",
                    "body": "Hallo {{ name }}!"}
# The message in other languages (broadside.campaigns.content.versions.clean_versions).
VERSIONS = {"type": "array", "maxItems": MAX_VERSIONS, "items": {
    "type": "object", "required": ["locale", "subject"], "additionalProperties": True,
    "properties": {
        "locale": {"type": "string", "maxLength": 35, "description": "A language tag: de, "
                   "fr, pt-BR, zh-Hans (case and _ forgiven; stored as shown)."},
        "subject": {"type": "string", "minLength": 1, "maxLength": MAX_LINE_CHARS},
        "preheader": {"type": "string", "maxLength": MAX_LINE_CHARS},
        "body": {"type": "string", "maxLength": MAX_BODY_CHARS,
                 "description": "In the message's own format (markdown or html)."}}},
    "description": (
        "The message in other languages, one per language: each reader gets the version of "
        "their language (their own, else their list's), or else the message's own fields, "
        "the default version (in Settings' default language). A bad tag, a language given "
        "twice or the default's, or a version without a subject is 422 with field "
        "`versions`. Given: all of them, replacing what was; [] for none."),
    "example": [VERSIONS_EXAMPLE]}
VERSIONS_INPUT = {**VERSIONS, "type": ["array", "null"]}  # null: none, as []
