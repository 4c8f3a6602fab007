"""Settings -> Design: the look of every email and public page, validated before it is saved.

- The brand colour is `#rrggbb`; the text put on it (a button's label) is black or white,
  whichever contrasts more, and links on the white email body use the colour darkened until
  it reaches WCAG's 4.5:1 against white, so no choice of colour makes text unreadable.
- The email layout's width is from MIN_WIDTH to MAX_WIDTH pixels, its font one of FONTS (font
  stacks every mail client has: no web fonts, which most clients never load).
- The footer text is plain text, printed above the postal address and the unsubscribe link.
- The logo is checked by its bytes, not its name or the browser's content type: PNG, JPEG,
  GIF or WebP, at most MAX_LOGO_BYTES and MAX_LOGO_SIDE pixels a side (read from the image's
  own header, so no image library is needed). Its bytes are kept in the database
  (`brand_files`, so every web host serves it), named by its content hash: a new logo is a new
  URL, so the long cache the route gives it is never stale, and an old email keeps showing the
  logo it was sent with (removing the logo takes it off new emails and the pages; its bytes
  stay for them). A logo stored before revision 0039 is a file in the instance path's
  `brand/`: `logo_bytes` takes them all into the database the first time one of them is
  asked for (the files stay).

Nothing here knows the web: the caller passes that folder and the public base URL.
Every update validates everything first and then writes in one commit (or nothing).
"""

from __future__ import annotations

import hashlib
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from babel.numbers import format_decimal
from babel.support import LazyProxy
from markupsafe import Markup
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from broadside.core.i18n import _, _l, current_locale
from broadside.core.models import BrandFile, SiteSettings
from broadside.core.site_settings import SettingsError, get_settings
from broadside.mail.rendering import DARK_BODY, EmailDesign

DEFAULT_COLOUR = "#1f5fbf"
MIN_WIDTH, MAX_WIDTH, DEFAULT_WIDTH = 480, 800, 600
MAX_FOOTER_TEXT = 1000
MAX_LOGO_BYTES = 512 * 1024
MAX_LOGO_SIDE = 2000
# How big the logo is shown in an email (it is scaled down to fit, never up).
LOGO_BOX = (240, 80)

# key -> (label, CSS font stack). Stacks of fonts installed with the common systems.
FONTS: dict[str, tuple[LazyProxy, str]] = {
    "system": (_l("System (the reader's own interface font)"),
               '-apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, Helvetica, Arial, sans-serif'),
    "sans": (_l("Helvetica / Arial"), "Helvetica, Arial, sans-serif"),
    "humanist": (_l("Trebuchet / Tahoma"), '"Trebuchet MS", "Lucida Grande", Tahoma, sans-serif'),
    "verdana": (_l("Verdana (wide, very legible)"), "Verdana, Geneva, sans-serif"),
    "serif": (_l("Georgia (serif)"), 'Georgia, "Times New Roman", Times, serif'),
    "mono": (_l("Monospace"), 'Menlo, Consolas, "Courier New", monospace'),
}

_COLOUR = re.compile(r"#[0-9a-f]{6}")
LOGO_NAME = re.compile(r"[0-9a-f]{32}\.(?:png|jpg|gif|webp)")
LOGO_TYPES = {"png": "image/png", "jpg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}


# ---------------------------------------------------------------- colour

def clean_colour(value: str | None) -> str:
    colour = (value or "").strip().lower()
    if len(colour) == 6 and re.fullmatch(r"[0-9a-f]{6}", colour):
        colour = "#" + colour
    if not _COLOUR.fullmatch(colour):
        raise SettingsError("colour", f"“{(value or '').strip()[:20]}” is not a colour we can "
                            "use: write it as # and six hexadecimal digits, for example #1f5fbf.")
    return colour


def _luminance(colour: str) -> float:
    def channel(hex2: str) -> float:
        c = int(hex2, 16) / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(colour[i:i + 2]) for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """WCAG 2.1 contrast ratio of two `#rrggbb` colours (1 to 21)."""
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def text_on(colour: str) -> str:
    """Near-black or white, whichever is more readable on `colour`."""
    dark, light = "#111418", "#ffffff"
    return dark if contrast(colour, dark) >= contrast(colour, light) else light


def readable_on_white(colour: str) -> str:
    """`colour`, darkened in small steps until text in it reads on white (4.5:1)."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    while contrast(f"#{r:02x}{g:02x}{b:02x}", "#ffffff") < 4.5:
        r, g, b = int(r * 0.9), int(g * 0.9), int(b * 0.9)
    return f"#{r:02x}{g:02x}{b:02x}"


def readable_on_dark(colour: str) -> str:
    """`colour`, lightened in small steps until text in it reads on the email's dark-mode
    body (DARK_BODY, 4.5:1): the links' colour when the reader's client is in dark mode."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    while contrast(f"#{r:02x}{g:02x}{b:02x}", DARK_BODY) < 4.5:
        r, g, b = (c + max(1, (255 - c) // 8) if c < 255 else c for c in (r, g, b))
    return f"#{r:02x}{g:02x}{b:02x}"


# ---------------------------------------------------------------- the logo's bytes

class LogoError(SettingsError):
    def __init__(self, message: str) -> None:
        super().__init__("logo", message)


@dataclass(frozen=True)
class ImageInfo:
    extension: str  # png, jpg, gif, webp
    width: int
    height: int


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """Walk the JPEG's segments to its frame header (SOFn), which holds the size."""
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2:i + 4])
        if length < 2:
            return None
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if i + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[i + 5:i + 9])
            return width, height
        i += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        (bits,) = struct.unpack("<I", data[21:25])
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    return None


def sniff_image(data: bytes) -> ImageInfo | None:
    """The image's type and size from its own header; None when it is none of ours."""
    size: tuple[int, int] | None = None
    if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR" and len(data) >= 24:
        extension, size = "png", struct.unpack(">II", data[16:24])
    elif data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        extension, size = "gif", struct.unpack("<HH", data[6:10])
    elif data.startswith(b"\xff\xd8\xff"):
        extension, size = "jpg", _jpeg_size(data)
    elif data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        extension, size = "webp", _webp_size(data)
    else:
        return None
    if size is None or not (size[0] and size[1]):
        return None
    return ImageInfo(extension, int(size[0]), int(size[1]))


def check_logo(data: bytes) -> ImageInfo:
    """The logo's type and size, or a LogoError that says what to change."""
    if not data:
        raise LogoError(_("Choose an image file to upload."))
    if len(data) > MAX_LOGO_BYTES:
        raise LogoError(_("This image is %(size)s KB; a logo can be at most %(limit)s KB. Save "
                          "it smaller (or as PNG or WebP) and upload it again.",
                          size=format_decimal(round(len(data) / 1024), locale=current_locale()),
                          limit=MAX_LOGO_BYTES // 1024))
    info = sniff_image(data)
    if info is None:
        raise LogoError(_("This file is not a PNG, JPEG, GIF or WebP image (we read the file "
                          "itself, not its name). Export the logo in one of these formats."))
    if info.width > MAX_LOGO_SIDE or info.height > MAX_LOGO_SIDE:
        raise LogoError(_("This image is %(width)s × %(height)s pixels; a logo can be at most "
                          "%(limit)s pixels on each side. Scale it down and upload it again.",
                          width=info.width, height=info.height, limit=MAX_LOGO_SIDE))
    return info


def logo_url(base_url: str, file_name: str) -> str:
    return f"{base_url.rstrip('/')}/brand/logo/{file_name}"


def _add_logo(session: Session, name: str, data: bytes) -> None:
    """The bytes under their name, once (the same logo stored twice is one row). Does not
    commit."""
    if session.get(BrandFile, name) is None:
        session.add(BrandFile(name=name, content_type=LOGO_TYPES[name.rsplit(".", 1)[1]],
                              data=data))


def logo_bytes(session: Session, file_name: str, legacy: Path | None = None) -> bytes | None:
    """The stored logo of that name, or None (a name that is not one of ours included). When
    it is only a file in `legacy` (the instance path's `brand/`, before revision 0039), every
    logo file there is taken into the database first (old emails show older logos), each
    only if its bytes are the ones its name says; the files stay."""
    if not LOGO_NAME.fullmatch(file_name):
        return None
    data = session.scalar(select(BrandFile.data).where(BrandFile.name == file_name))
    if data is not None:
        return bytes(data)
    if legacy is None or not (legacy / file_name).is_file():
        return None
    found = None
    for path in sorted(legacy.iterdir()):
        if not LOGO_NAME.fullmatch(path.name) or not path.is_file():
            continue
        data = path.read_bytes()  # each at most MAX_LOGO_BYTES
        if hashlib.sha256(data).hexdigest()[:32] != path.name.split(".")[0]:
            continue
        _add_logo(session, path.name, data)
        found = data if path.name == file_name else found
    try:
        session.commit()
    except IntegrityError:  # taken in by another request meanwhile: the same bytes
        session.rollback()
    return found


def store_logo(session: Session, data: bytes, *, base_url: str,
               commit: bool = True) -> SiteSettings:
    """Check the image, keep its bytes, make it the logo (one commit; with `commit=False`, the
    caller's: the automations that follow the design are refrozen in it). The bytes go in
    the same commit: a logo's name never points at nothing."""
    info = check_logo(data)
    name = f"{hashlib.sha256(data).hexdigest()[:32]}.{info.extension}"
    _add_logo(session, name, data)
    settings = get_settings(session)
    settings.logo_file = name
    settings.logo_width, settings.logo_height = info.width, info.height
    settings.logo_url = logo_url(base_url, name)
    if commit:
        session.commit()
    return settings


def remove_logo(session: Session, *, commit: bool = True) -> SiteSettings:
    """No logo on new emails and on the pages. The file stays: emails already sent show it."""
    settings = get_settings(session)
    settings.logo_file = settings.logo_url = None
    settings.logo_width = settings.logo_height = None
    if commit:
        session.commit()
    return settings


# ---------------------------------------------------------------- the rest of the design

@dataclass(frozen=True)
class DesignInput:
    colour: str
    width: str
    font: str
    footer_text: str


@dataclass(frozen=True)
class Design:
    """A validated design, saved or not (the preview shows one before it is saved)."""

    colour: str
    width: int
    font: str
    footer_text: str
    logo_file: str | None = None
    logo_url: str | None = None
    logo_width: int | None = None
    logo_height: int | None = None


def clean_width(value: object) -> int:
    text = str(value if value is not None else "").strip().removesuffix("px").strip()
    if not text.isdigit() or not MIN_WIDTH <= int(text) <= MAX_WIDTH:
        raise SettingsError("width", _("The email's width is a whole number of pixels from "
                                       "%(min)s to %(max)s (600 suits most readers).",
                                       min=MIN_WIDTH, max=MAX_WIDTH))
    return int(text)


def clean_font(value: str | None) -> str:
    if value not in FONTS:
        raise SettingsError("font", "Choose one of the fonts in the list.")
    return value


def clean_footer_text(value: str | None) -> str:
    text = "\n".join(line.strip() for line in (value or "").replace("\r\n", "\n").split("\n"))
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    if len(text) > MAX_FOOTER_TEXT:
        raise SettingsError("footer_text", "The footer text is too long "
                                           f"(at most {MAX_FOOTER_TEXT} characters).")
    return text


def validate_design(values: DesignInput, current: Design) -> Design:
    """`values` checked (SettingsError naming the first wrong field), with `current`'s logo."""
    return Design(colour=clean_colour(values.colour), width=clean_width(values.width),
                  font=clean_font(values.font), footer_text=clean_footer_text(values.footer_text),
                  logo_file=current.logo_file, logo_url=current.logo_url,
                  logo_width=current.logo_width, logo_height=current.logo_height)


def saved_design(settings: SiteSettings | None) -> Design:
    """The design in the settings row (the defaults before there is one)."""
    if settings is None:
        return Design(DEFAULT_COLOUR, DEFAULT_WIDTH, "system", "")
    font = settings.email_font if settings.email_font in FONTS else "system"
    colour = settings.brand_colour if _COLOUR.fullmatch(settings.brand_colour or "") \
        else DEFAULT_COLOUR
    return Design(colour, settings.email_width or DEFAULT_WIDTH, font, settings.footer_text or "",
                  settings.logo_file, settings.logo_url, settings.logo_width,
                  settings.logo_height)


def current_design(session: Session) -> Design:
    """The saved design; reads only (a public page's GET creates no settings row)."""
    return saved_design(session.get(SiteSettings, 1))


def update_design(session: Session, values: DesignInput, *, base_url: str,
                  commit: bool = True) -> SiteSettings:
    """Save colour, width, font and footer text (one commit, or the caller's with
    `commit=False`). The logo's URL is made again from `base_url`, so saving the design after
    BASE_URL changed mends it."""
    design = validate_design(values, current_design(session))
    settings = get_settings(session)
    settings.brand_colour, settings.email_width = design.colour, design.width
    settings.email_font, settings.footer_text = design.font, design.footer_text
    if settings.logo_file:
        settings.logo_url = logo_url(base_url, settings.logo_file)
    if commit:
        session.commit()
    return settings


def _logo_box(width: int, height: int) -> tuple[int, int]:
    scale = min(1.0, LOGO_BOX[0] / width, LOGO_BOX[1] / height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def email_design(design: Design, *, from_name: str = "", logo_url: str | None = None
                 ) -> EmailDesign:
    """What the email layout needs of a design. `logo_url` overrides the stored absolute one
    (the owner's preview loads the logo from the page's own host)."""
    url = logo_url if logo_url is not None else (design.logo_url or "")
    shown = (_logo_box(design.logo_width, design.logo_height)
             if url and design.logo_width and design.logo_height else (0, 0))
    name = " ".join(from_name.split())
    return EmailDesign(
        colour=design.colour, on_colour=text_on(design.colour),
        link_colour=readable_on_white(design.colour),
        dark_link_colour=readable_on_dark(design.colour), width=design.width,
        font_stack=Markup(FONTS[design.font][1]), footer_text=design.footer_text,
        logo_url=url if shown[0] else "", logo_alt=f"{name} logo" if name else "Logo",
        logo_width=shown[0], logo_height=shown[1],
    )


def sending_design(session: Session, from_name: str = "") -> EmailDesign:
    """The design new emails are frozen with (read when a revision is frozen: invariant 8)."""
    return email_design(current_design(session), from_name=from_name)
