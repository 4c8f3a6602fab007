"""Benchmark: uploading a 10 MB photo to the media library.

A realistic worst case: a 12-megapixel JPEG (4000 × 3000) just under 10 MB, a smooth scene
with strong sensor noise (noise is what makes a photo big and slow to decode), with EXIF.
Timed, median of several rounds, each on the same bytes:

- `verify + resize`: `broadside.mail.media_images.prepare` alone (decoded whole by Pillow,
  orientation applied, metadata dropped, resized to 600 px and 1200 px, both encoded);
- `the same, full-size decode`: with the JPEG's reduced-scale decoding (`draft`) turned off,
  which is what the shipped code saves;
- `upload`: `broadside.mail.media.upload` into a migrated SQLite database (hash, verify,
  resize, INSERT of both files, commit); each round a new file (one byte of EXIF changes), so
  no round is the "same file again" shortcut.

Run: .venv/bin/python bench/media_upload.py [rounds]   (no Redis, no PostgreSQL needed)
"""

from __future__ import annotations

import io
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_BYTES = 10 * 1024 * 1024 - 64 * 1024
DESIGN_WIDTH = 600


def noisy_photo(seed: int = 42) -> bytes:
    from PIL import Image

    rng = random.Random(seed)
    width, height = 4000, 3000
    scene = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    noise = Image.frombytes("RGB", (width, height), rng.randbytes(width * height * 3))
    picture = Image.blend(scene, noise, 0.4)
    exif = Image.Exif()
    exif[0x010F] = "Bench camera"
    for quality in range(98, 40, -1):
        out = io.BytesIO()
        picture.save(out, "JPEG", quality=quality, exif=exif.tobytes())
        if out.tell() <= TARGET_BYTES:
            return out.getvalue()
    raise SystemExit("could not make a photo under 10 MB")


def timed(action, rounds: int) -> list[float]:
    times = []
    for n in range(rounds):
        started = time.perf_counter()
        action(n)
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    from PIL import JpegImagePlugin

    from broadside.mail import media_images
    from broadside.mail.media_images import prepare

    photo = noisy_photo()
    print(f"photo: 4000 × 3000 JPEG, {len(photo) / (1024 * 1024):.2f} MB; "
          f"{rounds} rounds, median (min-max)")

    shipped = timed(lambda n: prepare(photo, design_width=DESIGN_WIDTH), rounds)
    draft = JpegImagePlugin.JpegImageFile.draft
    JpegImagePlugin.JpegImageFile.draft = lambda self, mode, size: None  # type: ignore[method-assign,assignment,return-value]
    try:
        full = timed(lambda n: prepare(photo, design_width=DESIGN_WIDTH), rounds)
    finally:
        JpegImagePlugin.JpegImageFile.draft = draft  # type: ignore[method-assign]

    with tempfile.TemporaryDirectory() as folder:
        from flask_migrate import upgrade

        from broadside.mail import media as library
        from webapp import create_app
        from webapp.extensions import db

        app = create_app({"DATABASE_URL": f"sqlite:///{folder}/bench.db",
                          "INSTANCE_PATH": folder, "SECRET_KEY": "bench-secret-key-0123456789"},
                         environ={})
        with app.app_context():
            upgrade(directory=str(ROOT / "migrations"))
            marker = photo.index(b"Bench camera")

            def upload(n: int) -> None:
                unique = photo[:marker] + bytes([65 + n % 26]) + photo[marker + 1:]
                done = library.upload(db.session, unique, filename="photo.jpg", alt="",
                                      design_width=DESIGN_WIDTH, uploaded_by=None)
                assert done.created
            stored = timed(upload, rounds)
            db.session.remove()
            db.engine.dispose()
            app.extensions["broadside_redis"].close()

    def line(label: str, times: list[float]) -> None:
        print(f"  {label:<34} {statistics.median(times):7.0f} ms  "
              f"({min(times):.0f}-{max(times):.0f})")
    line("verify + resize (shipped)", shipped)
    line("the same, full-size decode", full)
    line("upload into SQLite (hash, store)", stored)
    print(f"  reduced-scale decode saves: {statistics.median(full) / statistics.median(shipped):.2f}x"
          f"; limits: {media_images.MAX_UPLOAD_BYTES // (1024 * 1024)} MB, "
          f"{media_images.MAX_PIXELS // 1_000_000} megapixels")


if __name__ == "__main__":
    main()
