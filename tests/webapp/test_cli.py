import os
import pty
import select
import subprocess
import sys
import time

from sqlalchemy import select as sql_select

from broadside.core.models import Owner
from tests.helpers import OWNER_EMAIL, OWNER_PASSWORD, csrf_token_from
from webapp import REPO_ROOT
from webapp.extensions import db

FLASK = (sys.executable, "-m", "flask", "--app", "webapp")


def cli_env(app_config) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "DATABASE_URL": app_config["DATABASE_URL"],
        "REDIS_URL": app_config["REDIS_URL"],
        "SECRET_KEY": app_config["SECRET_KEY"],
        "BROADSIDE_INSTANCE_PATH": app_config["INSTANCE_PATH"],
        "BROADSIDE_NAMESPACE": app_config["BROADSIDE_NAMESPACE"],
    }


def run_cli(app_config, *args, stdin=""):
    return subprocess.run(
        [*FLASK, *args],
        input=stdin, env=cli_env(app_config), cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )


def test_owner_create_and_token_create(app_config, client):
    result = run_cli(app_config, "owner", "create", "Boss@Example.com", "--password-stdin",
                     stdin="a long password\n")
    assert result.returncode == 0, result.stderr
    assert "boss@example.com" in result.stdout

    result = run_cli(app_config, "tokens", "create", "ci")
    assert result.returncode == 0, result.stderr
    token = result.stdout.strip().splitlines()[-1]
    assert token.startswith("bs_")
    response = client.get("/api/whoami", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200

    listed = run_cli(app_config, "tokens", "list")
    assert "ci" in listed.stdout and token not in listed.stdout


def test_owner_create_rejects_short_password(app_config, app):
    result = run_cli(app_config, "owner", "create", "a@example.com", "--password-stdin", stdin="short\n")
    assert result.returncode != 0
    assert "at least 10 characters" in result.stderr


# ---------------------------------------------------------------- owner reset-password

NEW_PASSWORD = "a brand new passphrase"


def sign_in(app, password: str) -> tuple[int, object]:
    """Sign in from a browser of its own (its own app context, so nothing of another client's
    request is cached in `g`); the status and the client."""
    browser = app.test_client()
    with app.app_context():
        token = csrf_token_from(browser.get("/login").text)
    with app.app_context():
        status = browser.post("/login", data={"email": OWNER_EMAIL, "password": password,
                                              "csrf_token": token}).status_code
    return status, browser


def is_signed_in(app, browser) -> bool:
    with app.app_context():
        return browser.get("/").status_code == 200


def stored_hash() -> str:
    db.session.expire_all()
    return db.session.scalar(sql_select(Owner.password_hash))


def test_reset_password_from_a_pipe_signs_every_session_out(app_config, app, owner):
    status, earlier = sign_in(app, OWNER_PASSWORD)
    assert status == 302 and is_signed_in(app, earlier)
    result = run_cli(app_config, "owner", "reset-password", " Owner@Example.com ",
                     stdin=NEW_PASSWORD + "\n")
    assert result.returncode == 0, result.stderr
    assert f"New password set for {OWNER_EMAIL}" in result.stdout
    assert NEW_PASSWORD not in result.stdout + result.stderr
    assert not is_signed_in(app, earlier)
    assert sign_in(app, OWNER_PASSWORD)[0] == 401
    assert sign_in(app, NEW_PASSWORD)[0] == 302


def test_reset_password_for_an_unknown_address_or_a_short_password_changes_nothing(
        app_config, app, owner):
    before = stored_hash()
    unknown = run_cli(app_config, "owner", "reset-password", "nobody@example.com",
                      stdin=NEW_PASSWORD + "\n")
    assert unknown.returncode == 1
    assert "No owner signs in as 'nobody@example.com'; nothing was changed" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    short = run_cli(app_config, "owner", "reset-password", OWNER_EMAIL, stdin="short\n")
    assert short.returncode == 1 and "10 characters" in short.stderr and "Traceback" not in short.stderr
    empty = run_cli(app_config, "owner", "reset-password", OWNER_EMAIL, stdin="")
    assert empty.returncode == 1 and "Nothing was changed" in empty.stderr
    assert stored_hash() == before
    assert sign_in(app, OWNER_PASSWORD)[0] == 302


def read_until(fd: int, text: str, seen: bytearray, start: int = 0, timeout: float = 30) -> int:
    """Read the terminal into `seen` until `text` appears after `start`; where it ends."""
    deadline = time.monotonic() + timeout
    while (found := seen.find(text.encode(), start)) < 0:
        left = deadline - time.monotonic()
        assert left > 0, f"no {text!r} on the terminal; it shows: {seen.decode(errors='replace')!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the program has exited and the terminal is closed
            chunk = b""
        assert chunk, f"the program ended before {text!r}: {seen.decode(errors='replace')!r}"
        seen.extend(chunk)
    return found + len(text)


def test_reset_password_at_a_terminal_asks_twice_and_never_shows_it(app_config, app, owner):
    terminal, program_side = pty.openpty()
    process = subprocess.Popen([*FLASK, "owner", "reset-password", OWNER_EMAIL],
                               stdin=program_side, stdout=program_side, stderr=program_side,
                               env=cli_env(app_config), cwd=REPO_ROOT, start_new_session=True)
    os.close(program_side)
    seen = bytearray()
    try:
        # Each answer is typed only once its prompt shows: the echo is off by then.
        at = read_until(terminal, "New password: ", seen)
        os.write(terminal, NEW_PASSWORD.encode() + b"\n")
        at = read_until(terminal, "Repeat the new password: ", seen, at)
        os.write(terminal, b"a different passphrase\n")  # a typo: asked again
        at = read_until(terminal, "do not match", seen, at)
        at = read_until(terminal, "New password: ", seen, at)
        os.write(terminal, NEW_PASSWORD.encode() + b"\n")
        at = read_until(terminal, "Repeat the new password: ", seen, at)
        os.write(terminal, NEW_PASSWORD.encode() + b"\n")
        read_until(terminal, "is signed out.", seen, at)
        output = seen.decode(errors="replace")
        assert process.wait(timeout=60) == 0, output
    finally:
        os.close(terminal)
        if process.poll() is None:
            process.kill()
            process.wait()
    assert NEW_PASSWORD not in output and "different passphrase" not in output
    assert f"New password set for {OWNER_EMAIL}" in output
    assert sign_in(app, NEW_PASSWORD)[0] == 302
