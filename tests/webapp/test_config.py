import subprocess
import sys

import pytest

from broadside.core.config import ConfigError
from webapp import REPO_ROOT, create_app


def make(tmp_path, **env):
    return create_app({"INSTANCE_PATH": str(tmp_path)}, environ=env)


def test_defaults(tmp_path):
    app = make(tmp_path)
    assert app.config["DATABASE_URL"] == f"sqlite:///{tmp_path / 'broadside.db'}"
    assert app.config["REDIS_URL"] == "redis://localhost:6379/0"
    assert app.config["BASE_URL"] == "http://localhost:5000"
    assert app.config["SEND_DELAY_MS"] == 200
    assert app.config["SMTP_URL"] == ""
    assert app.config["WEBHOOKS_ALLOW_PRIVATE"] is False
    assert make(tmp_path, WEBHOOKS_ALLOW_PRIVATE="1").config["WEBHOOKS_ALLOW_PRIVATE"] is True
    assert app.template_folder == str(REPO_ROOT / "templates")
    assert app.static_folder == str(REPO_ROOT / "static")


def test_dns_resolver_is_an_address_and_port_or_empty_for_the_systems(tmp_path):
    assert make(tmp_path).config["DNS_RESOLVER"] == ""
    assert make(tmp_path, DNS_RESOLVER=" 127.0.0.1:5353 ").config["DNS_RESOLVER"] == "127.0.0.1:5353"
    assert make(tmp_path, DNS_RESOLVER="[::1]:53").config["DNS_RESOLVER"] == "[::1]:53"
    with pytest.raises(ConfigError) as excinfo:
        make(tmp_path, DNS_RESOLVER="resolver.example.com")
    assert "DNS_RESOLVER must be a resolver's IP address" in str(excinfo.value.code)


def test_generated_secret_key_is_kept_across_restarts(tmp_path):
    first = make(tmp_path).config["SECRET_KEY"]
    second = make(tmp_path).config["SECRET_KEY"]
    assert first == second and len(first) >= 32
    assert (tmp_path / "secret_key").stat().st_mode & 0o077 == 0


@pytest.mark.parametrize("url", ["postgres://u:p@db:5432/x", "postgresql://u:p@db:5432/x"])
def test_postgres_urls_use_psycopg3_and_are_kept_as_given(tmp_path, url):
    config = make(tmp_path, DATABASE_URL=url).config
    assert config["SQLALCHEMY_DATABASE_URI"] == "postgresql+psycopg://u:p@db:5432/x"
    assert config["DATABASE_URL"] == url  # what the self-hoster wrote, as `doctor` prints it


@pytest.mark.parametrize(
    "variable, value",
    [
        ("SEND_DELAY_MS", "fast"),
        ("SEND_DELAY_MS", "-5"),
        ("DATABASE_URL", "mysql://x/y"),
        ("DATABASE_URL", "not a url"),
        ("REDIS_URL", "http://localhost"),
        ("BASE_URL", "localhost:5000"),
        ("SMTP_URL", "smtp://host:port"),
        ("SMTP_URL", "ftp://host"),
        ("SMTP_URL", "postmark://token@host"),
        ("SMTP_URL", "ses://key:secret@not-a-region"),
        ("MAIL_FROM", "nobody"),
        ("SECRET_KEY", "short"),
        ("LOG_FORMAT", "xml"),
        ("SNS_TOPIC_ARNS", "not-an-arn"),
        ("TRUSTED_PROXY_COUNT", "two"),
        ("RETRY_BASE_SECONDS", "0"),
        ("WEBHOOKS_ALLOW_PRIVATE", "maybe"),
        ("DNS_RESOLVER", "dns.google"),
        ("DNS_RESOLVER", "127.0.0.1:99999"),
        ("DNS_RESOLVER", "127.0.0.1:53:53"),
    ],
)
def test_malformed_value_names_the_variable(tmp_path, variable, value):
    with pytest.raises(ConfigError) as excinfo:
        make(tmp_path, **{variable: value})
    assert variable in str(excinfo.value.code)


def test_bad_value_stops_the_cli_with_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "webapp", "routes"],
        env={"PATH": "/usr/bin:/bin", "SEND_DELAY_MS": "soon", "BROADSIDE_INSTANCE_PATH": str(tmp_path)},
        cwd=REPO_ROOT, capture_output=True, text=True,
    )
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1] == "broadside: configuration error: SEND_DELAY_MS must be a whole number, got 'soon'"
    assert "Traceback" not in result.stderr


def test_secure_cookies_follow_https_base_url(tmp_path):
    app = make(tmp_path, BASE_URL="https://news.example.com")
    assert app.config["SESSION_COOKIE_SECURE"] is True
    assert app.config["SESSION_COOKIE_HTTPONLY"] is True
    assert app.config["SESSION_COOKIE_SAMESITE"] == "Lax"
    assert make(tmp_path / "b").config["SESSION_COOKIE_SECURE"] is False
