"""An upload made fit for email (broadside/mail/media_images.py), with real images made by
Pillow: each format decoded and resized at 1x and 2x, never enlarged, animations kept,
metadata gone, and every kind of bad file refused with a sentence."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from broadside.mail.media_images import (
    MAX_UPLOAD_BYTES,
    MediaError,
    prepare,
    widths,
)
from tests.media_images import (
    SECRET_CAMERA,
    animated_gif,
    open_image,
    photo_with_exif,
    still,
)


@pytest.mark.parametrize(("fmt", "ext", "content_type"), [
    ("PNG", "png", "image/png"), ("JPEG", "jpg", "image/jpeg"),
    ("GIF", "gif", "image/gif"), ("WEBP", "webp", "image/webp")])
def test_each_format_is_decoded_and_resized_at_1x_and_2x_in_its_own_format(fmt, ext,
                                                                          content_type):
    prepared = prepare(still(fmt, 1500, 900), design_width=600)
    assert (prepared.ext, prepared.content_type) == (ext, content_type)
    assert (prepared.width, prepared.height) == (600, 360)
    one_x, two_x = open_image(prepared.one_x), open_image(prepared.two_x)
    assert one_x.format == two_x.format == fmt
    assert one_x.size == (600, 360) and two_x.size == (1200, 720)
    assert not prepared.animated


def test_the_2x_is_never_enlarged():
    assert widths(400, 600) == (400, None)
    assert widths(900, 600) == (600, 900)
    assert widths(3000, 600) == (600, 1200)
    small = prepare(still("PNG", 400, 300), design_width=600)
    assert (small.width, small.height, small.two_x) == (400, 300, None)
    between = prepare(still("JPEG", 900, 300), design_width=600)
    assert open_image(between.two_x).size == (900, 300)  # its own width, not 1200
    assert (between.width, between.height) == (600, 200)


def test_exif_and_comments_are_gone_and_the_orientation_applied():
    data = photo_with_exif(1200, 800)
    assert SECRET_CAMERA.encode() in data and b"secret comment" in data
    prepared = prepare(data, design_width=600)
    for stored in (prepared.one_x, prepared.two_x):
        assert SECRET_CAMERA.encode() not in stored
        assert b"Exif" not in stored and b"secret comment" not in stored
        picture = open_image(stored)
        assert dict(picture.getexif()) == {}
        assert "comment" not in picture.info and "exif" not in picture.info
    # Orientation 6: the 1200 × 800 pixels stand up as 800 × 1200, then 600 wide.
    assert (prepared.width, prepared.height) == (600, 900)


def test_an_animated_gif_stays_animated_every_frame_resized():
    prepared = prepare(animated_gif(800, 400, frames=6), design_width=600)
    assert prepared.animated
    for stored, size in ((prepared.one_x, (600, 300)), (prepared.two_x, (800, 400))):
        picture = open_image(stored)
        assert picture.format == "GIF" and picture.is_animated and picture.n_frames == 6
        assert picture.size == size
        assert picture.info.get("loop") == 0 and picture.info.get("duration") == 90
        assert b"secret tool" not in stored
    frames = []
    picture = open_image(prepared.one_x)
    for n in range(picture.n_frames):
        picture.seek(n)
        frames.append(picture.convert("RGB").getpixel((10, 10)))
    assert len(set(frames)) == 6  # the frames still differ


def test_a_file_renamed_png_that_is_not_an_image_is_refused():
    with pytest.raises(MediaError, match="not a PNG, JPEG, GIF or WebP") as refused:
        prepare(b"%PDF-1.7\n a document renamed photo.png\n" * 20, design_width=600)
    assert refused.value.field == "file" and refused.value.status_code == 422


def test_a_format_we_do_not_take_is_refused_though_pillow_reads_it():
    out = io.BytesIO()
    Image.new("RGB", (50, 50)).save(out, "BMP")
    with pytest.raises(MediaError, match="not a PNG, JPEG, GIF or WebP"):
        prepare(out.getvalue(), design_width=600)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP"])
def test_a_truncated_image_is_refused(fmt):
    whole = still(fmt, 1500, 900)
    with pytest.raises(MediaError, match="truncated or damaged|not a PNG"):
        prepare(whole[: len(whole) // 2], design_width=600)


def test_an_empty_file_and_one_over_10_mb_are_refused_before_decoding():
    with pytest.raises(MediaError, match="Choose an image"):
        prepare(b"", design_width=600)
    with pytest.raises(MediaError, match="at most 10 MB"):
        prepare(b"\x89PNG\r\n\x1a\n" + b"\0" * MAX_UPLOAD_BYTES, design_width=600)


@pytest.mark.parametrize(("width", "height"), [(10_000, 10_000), (30_000, 30_000)])
def test_a_decompression_bomb_is_refused_from_its_header(width, height):
    out = io.BytesIO()
    Image.new("1", (width, height)).save(out, "PNG")  # a few KB claiming 100 or 900 megapixels
    assert out.tell() < 200_000
    with pytest.raises(MediaError, match="decompression bomb"):
        prepare(out.getvalue(), design_width=600)
