"""Real images made with Pillow for the media library's tests: each format, a photo with EXIF,
and an animation."""

from __future__ import annotations

import io

from PIL import Image

SECRET_CAMERA = "SecretCam 3000"


def still(fmt: str, width: int = 1500, height: int = 900, colour=(200, 40, 40)) -> bytes:
    image = Image.new("RGBA" if fmt in ("PNG", "WEBP") else "RGB", (width, height), colour)
    for x in range(0, width, 50):  # some edges, so resizing has something to do
        image.paste((20, 20, 160), (x, 0, x + 10, height))
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


def photo_with_exif(width: int = 1200, height: int = 800) -> bytes:
    """A JPEG whose EXIF names a camera and a GPS position, turned 90° by its orientation."""
    image = Image.new("RGB", (width, height), (90, 140, 200))
    exif = Image.Exif()
    exif[0x010F] = SECRET_CAMERA  # Make
    exif[0x0112] = 6  # Orientation: rotate 90° clockwise to show
    gps = exif.get_ifd(0x8825)
    gps[1], gps[2] = "N", (52.0, 31.0, 12.0)
    out = io.BytesIO()
    image.save(out, "JPEG", exif=exif.tobytes(), comment=b"secret comment")
    return out.getvalue()


def animated_gif(width: int = 800, height: int = 400, frames: int = 6) -> bytes:
    pictures = [Image.new("RGB", (width, height), (40 * n % 256, 80, 160)) for n in range(frames)]
    out = io.BytesIO()
    pictures[0].save(out, "GIF", save_all=True, append_images=pictures[1:], duration=90, loop=0,
                     comment=b"made by a secret tool")
    return out.getvalue()


def open_image(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data))
