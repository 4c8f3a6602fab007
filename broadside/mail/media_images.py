"""An uploaded image made fit for email: verified, cleaned and resized (Pillow).

- Verified by decoding it whole, never by its name or the browser's type: only Pillow's PNG,
  JPEG, GIF and WebP readers are tried, and every pixel is decoded, so a renamed file, a
  truncated one and a damaged one are refused with a sentence saying so.
- A decompression bomb (a small file that claims a huge picture) is refused from its header,
  before any pixel is decoded: at most MAX_PIXELS a frame, MAX_FRAMES frames and
  MAX_ANIMATION_PIXELS decoded in all.
- Its metadata is dropped: EXIF (GPS position, camera, owner), XMP, ICC profile, text chunks
  and comments are never written out. An EXIF orientation is applied first (a phone's photo
  stands up), and an ICC profile is converted to sRGB (what mail clients assume) before it
  goes.
- Resized to the email's width (Settings -> Design) at 1x and, for screens with twice the
  pixels, 2x; never upscaled: an image no wider than the design has no 2x, one between one
  and two design widths has a 2x at its own width.
- An animated GIF (or WebP) stays animated: every frame is resized, with its own duration and
  the loop count kept.

The result keeps the upload's format (a PNG stays a PNG). Nothing here knows the database.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from io import BytesIO

from babel.numbers import format_decimal
from PIL import Image, ImageCms, ImageOps, ImageSequence, UnidentifiedImageError

from broadside.core.errors import ValidationError
from broadside.core.i18n import _, _l, current_locale

MAX_UPLOAD_BYTES = 10 * 1024 * 1024
MAX_PIXELS = 50_000_000  # one frame: a 50-megapixel photo; more is a bomb, or no email's
MAX_FRAMES = 500
MAX_ANIMATION_PIXELS = 150_000_000  # decoded over all frames
MAX_ANIMATION_OUTPUT = 40_000_000  # pixels over all frames of the resized 2x (kept in memory)

# Pillow's format -> (our extension, content type). Only these readers are ever tried.
FORMATS: dict[str, tuple[str, str]] = {
    "PNG": ("png", "image/png"), "JPEG": ("jpg", "image/jpeg"),
    "GIF": ("gif", "image/gif"), "WEBP": ("webp", "image/webp"),
}
CONTENT_TYPES = dict(FORMATS.values())
JPEG_QUALITY = WEBP_QUALITY = 85
RESIZABLE_MODES = ("RGB", "RGBA", "L", "LA")


class MediaError(ValidationError):
    """The upload is not an image we take; the message says what to do (field `file`)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="file")


@dataclass(frozen=True)
class Prepared:
    ext: str
    content_type: str
    width: int  # the 1x image's
    height: int
    one_x: bytes
    two_x: bytes | None  # None: the original was no wider than the 1x
    animated: bool


def megabytes(size: int) -> str:
    return _("%(size)s MB", size=format_decimal(size / (1024 * 1024), "#,##0.0",
                                                locale=current_locale()))


# Said in the language of the request that uploads (`str()` when raised).
NOT_AN_IMAGE = _l("This file is not a PNG, JPEG, GIF or WebP image (we read the file itself, "
                  "not its name). Export it in one of these formats and upload it again.")
DAMAGED = _l("This image could not be read to its end: the file is truncated or damaged. "
             "Export it again and upload the new file.")


def widths(original: int, design_width: int) -> tuple[int, int | None]:
    """The 1x and 2x widths for an image `original` pixels wide: never wider than it."""
    one_x = min(original, design_width)
    return one_x, (min(original, 2 * design_width) if original > one_x else None)


def _height(width: int, height: int, to_width: int) -> int:
    return max(1, round(height * to_width / width))


def _open(data: bytes) -> Image.Image:
    if not data:
        raise MediaError(_("Choose an image file to upload."))
    if len(data) > MAX_UPLOAD_BYTES:
        raise MediaError(_("This file is %(size)s; an image can be at most %(mb)s MB. Save it "
                           "smaller (a JPEG of the width your email shows is plenty) and upload "
                           "it again.", size=megabytes(len(data)),
                           mb=MAX_UPLOAD_BYTES // (1024 * 1024)))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(BytesIO(data), formats=list(FORMATS))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise MediaError(_too_many_pixels()) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        raise MediaError(str(NOT_AN_IMAGE)) from None
    width, height = image.size
    if width < 1 or height < 1:
        raise MediaError(str(NOT_AN_IMAGE))
    if width * height > MAX_PIXELS:
        raise MediaError(_too_many_pixels(width, height))
    return image


def _too_many_pixels(width: int = 0, height: int = 0) -> str:
    said = f" claims {width:,} × {height:,} pixels" if width else " claims more pixels than we open"
    return (f"This image{said}: at most {MAX_PIXELS // 1_000_000} megapixels are taken (a file "
            "that small claiming that many is how a decompression bomb looks). Scale it down "
            "and upload it again.")


def prepare(data: bytes, *, design_width: int) -> Prepared:
    """The upload verified, cleaned and resized for an email `design_width` pixels wide, or a
    MediaError saying why not."""
    image = _open(data)
    fmt = image.format or ""
    ext, content_type = FORMATS[fmt]
    try:
        if getattr(image, "n_frames", 1) > 1:
            return _animated(image, fmt, design_width)
        return _still(image, fmt, design_width)
    except MediaError:
        raise
    except Exception:  # any failure to decode (truncated, damaged, a codec's refusal)
        raise MediaError(str(DAMAGED)) from None
    finally:
        image.close()


# ---------------------------------------------------------------- a still image

def _still(image: Image.Image, fmt: str, design_width: int) -> Prepared:
    ext, content_type = FORMATS[fmt]
    one_x_width, two_x_width = widths(image.width, design_width)
    if fmt == "JPEG":  # decode at 1/2, 1/4 or 1/8 scale when that still covers the largest
        largest = two_x_width or one_x_width
        image.draft(None, (largest, _height(image.width, image.height, largest)))
    image.load()  # every pixel decoded: a truncated or damaged file fails here
    picture = _to_srgb(ImageOps.exif_transpose(image) or image)
    # The orientation may have swapped the sides: the widths are of the picture as it stands.
    one_x_width, two_x_width = widths(picture.width, design_width)
    if two_x_width is not None or picture.width != one_x_width:
        picture = _resizable(picture)
    two_x = _resized(picture, two_x_width) if two_x_width else None
    one_x = _resized(two_x if two_x is not None else picture, one_x_width)
    return Prepared(ext, content_type, one_x.width, one_x.height, _encode(one_x, fmt),
                    _encode(two_x, fmt) if two_x is not None else None, animated=False)


def _to_srgb(image: Image.Image) -> Image.Image:
    """The picture in sRGB when it carries another ICC profile (its colours as its author saw
    them); unchanged when it has none or the profile cannot be read."""
    profile = image.info.get("icc_profile")
    if not profile or image.mode not in ("RGB", "RGBA", "CMYK"):
        return image.convert("RGB") if image.mode == "CMYK" else image
    try:
        converted = ImageCms.profileToProfile(
            image, ImageCms.ImageCmsProfile(BytesIO(profile)), ImageCms.createProfile("sRGB"),
            outputMode="RGBA" if image.mode == "RGBA" else "RGB")
    except (ImageCms.PyCMSError, OSError, ValueError):
        converted = None
    if converted is None:
        return image.convert("RGB") if image.mode == "CMYK" else image
    return converted


def _resizable(image: Image.Image) -> Image.Image:
    """A mode Lanczos resampling works in (a palette image resizes only by nearest pixel)."""
    if image.mode in RESIZABLE_MODES:
        return image
    return image.convert("RGBA" if image.has_transparency_data else "RGB")


def _resized(image: Image.Image, width: int) -> Image.Image:
    if image.width == width:
        return image
    size = (width, _height(image.width, image.height, width))
    return image.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)


def _clean(image: Image.Image) -> Image.Image:
    """No metadata goes with it: only what draws the pixels (a palette's transparent index)."""
    image.info = {k: v for k, v in image.info.items() if k == "transparency"}
    return image


def _encode(image: Image.Image, fmt: str) -> bytes:
    image = _clean(image)
    out = BytesIO()
    if fmt == "JPEG":
        if image.mode not in ("RGB", "L"):
            image = image.convert("RGB")
        image.save(out, "JPEG", quality=JPEG_QUALITY, optimize=True, progressive=True)
    elif fmt == "PNG":
        image.save(out, "PNG", optimize=True)
    elif fmt == "WEBP":
        image.save(out, "WEBP", quality=WEBP_QUALITY)
    else:
        image.save(out, "GIF", optimize=True)
    return out.getvalue()


# ---------------------------------------------------------------- an animation

def _animated(image: Image.Image, fmt: str, design_width: int) -> Prepared:
    ext, content_type = FORMATS[fmt]
    count = int(getattr(image, "n_frames", 1))
    if count > MAX_FRAMES or count * image.width * image.height > MAX_ANIMATION_PIXELS:
        raise MediaError(f"This animation has {count:,} frames of {image.width:,} × "
                         f"{image.height:,} pixels: too many to resize (at most {MAX_FRAMES} "
                         "frames, and fewer when they are large). Shorten it or make it smaller.")
    one_x_width, two_x_width = widths(image.width, design_width)
    largest = two_x_width or one_x_width
    if count * largest * _height(image.width, image.height, largest) > MAX_ANIMATION_OUTPUT:
        raise MediaError(f"This animation has {count:,} frames of {image.width:,} × "
                         f"{image.height:,} pixels: too large to resize for email. Shorten it or "
                         "make it smaller.")
    loop = image.info.get("loop")  # absent: it plays once, and so will ours
    frames: list[Image.Image] = []
    durations: list[int] = []
    for frame in _frames(image):
        durations.append(int(frame.info.get("duration") or 100))
        frames.append(_resized(frame.convert("RGBA"), largest))
    two_x = frames if two_x_width else None
    one_x = [_resized(f, one_x_width) for f in frames] if two_x is not None else frames
    return Prepared(ext, content_type, one_x[0].width, one_x[0].height,
                    _encode_animation(one_x, durations, loop, fmt),
                    _encode_animation(two_x, durations, loop, fmt) if two_x is not None else None,
                    animated=True)


def _frames(image: Image.Image) -> Iterator[Image.Image]:
    """Each frame as shown (Pillow composes a GIF's frame over the ones before it), decoded
    whole: a truncated animation fails here."""
    for frame in ImageSequence.Iterator(image):
        frame.load()
        yield frame


def _encode_animation(frames: list[Image.Image], durations: list[int], loop: object,
                      fmt: str) -> bytes:
    for frame in frames:
        _clean(frame)
    options: dict[str, object] = {"save_all": True, "append_images": frames[1:],
                                  "duration": durations}
    if isinstance(loop, int):
        options["loop"] = loop
    out = BytesIO()
    if fmt == "GIF":
        # Every frame is whole (composed): each replaces the one before it.
        frames[0].save(out, "GIF", disposal=2, **options)
    else:
        frames[0].save(out, fmt, quality=WEBP_QUALITY, **options)
    return out.getvalue()
