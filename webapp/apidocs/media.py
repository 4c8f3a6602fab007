"""The OpenAPI document's part for the media library (`webapp/api/media.py`): its schemas and
paths, merged into the document by `document.py`."""

from __future__ import annotations

from typing import Any

from broadside.core.models.media import MAX_ALT
from webapp.api.media import DEFAULT_PAGE, MAX_PAGE
from webapp.apidocs.paths import operation, paging, reply
from webapp.apidocs.schemas import ID, MOMENT, nullable, obj

MEDIA = {"name": "media_id", "in": "path", "required": True, "schema": ID,
         "description": "The image's id."}

MEDIA_SCHEMAS: dict[str, Any] = {
    "Media": obj({
        "id": ID,
        "url": {"type": "string", "format": "uri", "description": (
            "What an email uses: `BASE_URL/media/<sha256>.<ext>`, or `MEDIA_URL<sha256>.<ext>` "
            "when MEDIA_URL is set. The bytes behind it never change (cached a year).")},
        "url_2x": {**nullable({"type": "string", "format": "uri"}), "description": (
            "The same picture at twice the pixels, for sharp screens; null when the upload "
            "was no wider than the email (never enlarged).")},
        "width": {"type": "integer", "minimum": 1,
                  "description": "The 1x image's width: its width in the email, in CSS pixels "
                                 "(at most the design's width)."},
        "height": {"type": "integer", "minimum": 1},
        "alt": {"type": "string", "maxLength": MAX_ALT},
        "name": {"type": "string", "description": "The uploaded file's name."},
        "content_type": {"type": "string",
                         "enum": ["image/png", "image/jpeg", "image/gif", "image/webp"]},
        "bytes": {"type": "integer", "minimum": 0, "description": "The 1x file's size."},
        "animated": {"type": "boolean"},
        "created_at": MOMENT,
    }),
    "MediaPage": obj({"items": {"type": "array", "items": {"$ref": "#/components/schemas/Media"}},
                      "next": nullable(ID)}),
    "MediaInUse": obj({
        "error": {"type": "string"}, "field": {"type": "string", "const": "id"},
        "used_by": {"type": "array", "items": obj({
            "kind": {"type": "string", "enum": ["broadcast", "automation", "template"]},
            "id": ID, "title": {"type": "string"},
            "state": {"type": "string", "description": "The broadcast's status (draft, "
                      "scheduled, queued, sending, paused), the automation's (enabled, paused), "
                      "or `live` for a transactional template."}})}}),
}

EXAMPLE = {"id": 4, "url": "https://news.example.com/media/"
           "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.jpg",
           "url_2x": "https://news.example.com/media/"
           "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08@2x.jpg",
           "width": 600, "height": 400, "alt": "The harbour at dawn", "name": "harbour.jpg",
           "content_type": "image/jpeg", "bytes": 48211, "animated": False,
           "created_at": "2026-12-05T10:00:00Z"}

MEDIA_PATHS: dict[str, Any] = {
    "/api/media": {
        "get": operation(
            "Media", "listMedia", "The media library, a page at a time",
            "Ascending id. Pass the `next` of one page as `after` to get the following one; "
            "`next` is null on the last page.",
            parameters=paging(DEFAULT_PAGE, MAX_PAGE,
                              "The previous page's `next`: only images with a higher id."),
            responses={"200": reply("A page of images.", "MediaPage",
                                    {"items": [EXAMPLE], "next": None})},
            errors=("Invalid",)),
        "post": operation(
            "Media", "uploadMedia", "Upload an image",
            "A PNG, JPEG, GIF or WebP of at most 10 MB, verified by decoding it (not by its "
            "name or type), its metadata (EXIF, XMP, ICC, comments) removed, resized to the "
            "design's width at 1x and 2x (never enlarged; an animated GIF stays animated). "
            "The same file uploaded again is the same image: 200 with it (its alt text set "
            "when it had none). Anything else (not an image, truncated, over 10 MB, a "
            "decompression bomb) is 422 naming `file`.",
            write=True,
            request={"required": True, "content": {"multipart/form-data": {"schema": {
                "type": "object", "required": ["file"], "properties": {
                    "file": {"type": "string", "contentMediaType": "application/octet-stream",
                             "description": "The image (with a filename or without)."},
                    "alt": {"type": "string", "maxLength": MAX_ALT, "description": (
                        "What the image shows, for readers who cannot see it.")}}}}}},
            responses={"201": reply("Uploaded.", "Media", EXAMPLE),
                       "200": reply("This file was in the library already.", "Media",
                                    EXAMPLE)},
            errors=("Invalid",)),
    },
    "/api/media/{media_id}": {
        "delete": operation(
            "Media", "deleteMedia", "Delete an image",
            "Its files go too: emails already sent that show it show a broken image. 409, "
            "with `used_by`, while a draft, a scheduled or sending broadcast, a live "
            "automation or a transactional template uses it.",
            parameters=[MEDIA], write=True,
            responses={"204": {"description": "Deleted."},
                       "409": reply("In use.", "MediaInUse", {
                           "error": "This image is used by broadcast “November news” (draft). "
                                    "Take it out of it first, then delete it.",
                           "field": "id", "used_by": [{"kind": "broadcast", "id": 7,
                                                       "title": "November news",
                                                       "state": "draft"}]})},
            errors=("NotFound",)),
    },
}
