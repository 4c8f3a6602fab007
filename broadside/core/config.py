"""Configuration from the environment (12-factor), validated once at start.

Order: built-in defaults, then the environment (with `.env` honoured), then the mapping a
caller (a test) passes to `create_app`. A malformed value stops start-up with one line that
names the variable: `ConfigError` is a `SystemExit`, so the Flask CLI and gunicorn print the
message and exit instead of dumping a traceback.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dotenv import dotenv_values
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from broadside.core.mailbox_urls import MailboxUrlError, check_mailbox_url, check_verp_domain
from broadside.core.proxy_networks import parse_networks
from broadside.core.transport_urls import TransportUrlError, check_transport_url


class ConfigError(SystemExit):
    """A configuration value is missing or malformed; the message names the variable."""

    def __init__(self, variable: str, problem: str) -> None:
        self.variable = variable
        super().__init__(f"broadside: configuration error: {variable} {problem}")


# Every variable Broadside reads, its default, and what it is for (the README repeats this).
ENV_VARS = (
    "DATABASE_URL",
    "REDIS_URL",
    "SECRET_KEY",
    "BASE_URL",
    "SMTP_URL",
    "MAIL_FROM",
    "SEND_DELAY_MS",
    "SEND_HOURLY_LIMIT",
    "ACCOUNT_RATE",
    "MAX_IMPORT_BYTES",
    "MAX_IDENTITIES",
    "WEBHOOK_SECRET",
    "DKIM_SELECTOR",
    "DKIM_PRIVATE_KEY_FILE",
    "BOUNCE_MAILBOX_URL",
    "VERP_DOMAIN",
    "BOUNCE_MAILBOX_POLL_SECONDS",
    "METRICS_TOKEN",
    "LOG_FORMAT",
    "BROADSIDE_NAMESPACE",
    "SNS_TOPIC_ARNS",
    "TRUSTED_PROXY_COUNT",
    "TRUSTED_PROXIES",
    "RETRY_BASE_SECONDS",
    "WEBHOOKS_ALLOW_PRIVATE",
    "FEEDS_ALLOW_PRIVATE",
    "PROVIDER_ENDPOINTS_ALLOW_PRIVATE",
    "DNS_RESOLVER",
    "MEDIA_URL",
    "BACKUP_DIR",
    "BACKUP_MAX_AGE_HOURS",
)


def normalise_database_url(value: str) -> str:
    """Accept sqlite and postgres URLs; postgres ones are pinned to the psycopg 3 driver."""
    if value.startswith("postgres://"):
        value = "postgresql://" + value[len("postgres://") :]
    try:
        url = make_url(value)
    except ArgumentError as exc:
        raise ConfigError("DATABASE_URL", f"is not a database URL ({exc})") from None
    backend = url.get_backend_name()
    if backend == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    elif backend != "sqlite":
        raise ConfigError("DATABASE_URL", "must be a sqlite:/// or postgresql:// URL")
    return url.render_as_string(hide_password=False)


def _check_url(variable: str, value: str, schemes: tuple[str, ...]) -> str:
    parts = urlsplit(value)
    if parts.scheme not in schemes or not parts.netloc:
        raise ConfigError(variable, f"must be a {' or '.join(s + '://' for s in schemes)} URL")
    try:
        parts.port  # noqa: B018 - raises ValueError on a non-numeric port
    except ValueError:
        raise ConfigError(variable, "has a port that is not a number") from None
    return value


def _int(variable: str, value: Any, minimum: int = 0) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ConfigError(variable, f"must be a whole number, got {value!r}") from None
    if number < minimum:
        raise ConfigError(variable, f"must be at least {minimum}, got {number}")
    return number


def _rate(variable: str, value: Any) -> float | None:
    """Requests per second, more than 0 (at most 10,000); empty: none."""
    text = "" if value is None else str(value).strip()
    if not text:
        return None
    try:
        number = float(text)
    except ValueError:
        raise ConfigError(variable, f"must be a number of requests per second, got {value!r}") from None
    if not 0 < number <= 10_000:
        raise ConfigError(variable, f"must be more than 0 and at most 10000, got {text}")
    return number


def _flag(variable: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(variable, f"must be 1 or 0, got {value!r}")


def parse_resolver(value: str) -> tuple[str, int] | None:
    """"host:port", "host" (port 53) or "[v6]:port" -> (address, port); "" -> None (the
    system's resolver). ValueError, in words, for anything else: the host must be an IP
    address, since a resolver cannot be found by name."""
    text = (value or "").strip()
    if not text:
        return None
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ("" if not rest else "x")
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"must be a resolver's IP address with an optional port (\"127.0.0.1:53\", "
                         f"\"[::1]:5353\"), or empty for the system's resolver; got {value!r}") from None
    if not port_text:
        return host, 53
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"has a port that is not a number from 1 to 65535: {value!r}")
    return host, int(port_text)


def private_folder(path: Path) -> Path:
    """A folder only its owner can enter (0700): the instance folder holds the secret key, the
    SQLite database, uploaded address lists and the outbox."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        if path.stat().st_mode & 0o077:
            path.chmod(0o700)
    except OSError:
        pass  # not ours to change: leave it as it is
    return path


def _secret_key(instance_path: Path) -> str:
    """A random key generated once and kept, so links and sessions survive restarts."""
    path = instance_path / "secret_key"
    if path.exists():
        return path.read_text().strip()
    key = secrets.token_urlsafe(48)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    return key


REPO_ROOT = Path(__file__).resolve().parents[2]


def process_environment() -> dict[str, str]:
    """The environment a process reads its configuration from: `.env` (at the repository's
    root), overridden by the real environment. Shared by the web app and the worker."""
    return {**{k: v for k, v in dotenv_values(REPO_ROOT / ".env").items() if v is not None},
            **os.environ}


def instance_folder(given: str | os.PathLike[str] | None = None) -> str:
    """The instance folder (secret key, logo, .eml outbox, SQLite database by default): the one
    given, else BROADSIDE_INSTANCE_PATH, else `instance/` at the repository's root."""
    return str(given or os.environ.get("BROADSIDE_INSTANCE_PATH") or REPO_ROOT / "instance")


def _dkim(selector: str, key_file: str) -> dict[str, str]:
    """The default identity's DKIM: both set or neither; the key read from its file here (the
    worker signs with it; whether it can sign is checked by the signer, which refuses to send
    unsigned)."""
    if bool(selector) != bool(key_file):
        missing = "DKIM_PRIVATE_KEY_FILE" if selector else "DKIM_SELECTOR"
        raise ConfigError(missing, "must be set too: DKIM signing needs a selector and a key")
    key = ""
    if key_file:
        try:
            key = Path(key_file).read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError("DKIM_PRIVATE_KEY_FILE",
                              f"cannot be read ({type(exc).__name__}): {key_file}") from None
    return {"DKIM_SELECTOR": selector.strip().lower(), "DKIM_PRIVATE_KEY_FILE": key_file,
            "DKIM_PRIVATE_KEY": key}


def load_config(instance_path: Path, environ: Mapping[str, str], overrides: Mapping[str, Any]) -> dict:
    """Merge defaults, the environment and overrides, then validate every value."""
    private_folder(instance_path)
    raw: dict[str, Any] = {
        "DATABASE_URL": f"sqlite:///{instance_path / 'broadside.db'}",
        "REDIS_URL": "redis://localhost:6379/0",
        "BASE_URL": "http://localhost:5000",
        "SMTP_URL": "",
        "MAIL_FROM": "Broadside <newsletter@localhost>",
        "SEND_DELAY_MS": "200",
        "SEND_HOURLY_LIMIT": "0",
        "ACCOUNT_RATE": "",  # the default identity's provider account: requests/s, empty: none
        "MAX_IMPORT_BYTES": str(200 * 1024 * 1024),  # a million rows is ~60 MB
        "MAX_IDENTITIES": "50",  # sending identities beside the default (each one a stream)
        "WEBHOOK_SECRET": "",
        "DKIM_SELECTOR": "",  # the default identity's DKIM selector (with the key's file)
        "DKIM_PRIVATE_KEY_FILE": "",  # its private key, PEM (read once, kept as DKIM_PRIVATE_KEY)
        "BOUNCE_MAILBOX_URL": "",  # the default identity's bounce mailbox (imaps://...)
        "VERP_DOMAIN": "",  # its VERP Return-Path's domain (empty: the mailbox's)
        "BOUNCE_MAILBOX_POLL_SECONDS": "60",  # how often the worker reads each mailbox
        "METRICS_TOKEN": "",
        "LOG_FORMAT": "plain",
        "BROADSIDE_NAMESPACE": "broadside",
        "SNS_TOPIC_ARNS": "",
        "TRUSTED_PROXY_COUNT": "0",
        "TRUSTED_PROXIES": "",  # the reverse proxies' addresses/networks (webapp/proxies.py)
        "RETRY_BASE_SECONDS": "30",
        "WEBHOOKS_ALLOW_PRIVATE": "0",
        "FEEDS_ALLOW_PRIVATE": "0",  # a feed automation's feed may be on the own network
        "PROVIDER_ENDPOINTS_ALLOW_PRIVATE": "0",
        "DNS_RESOLVER": "",  # the DNS checks' resolver, "host:port"; empty: the system's
        "MEDIA_URL": "",  # where the media library's files are served from; empty: BASE_URL/media/
        "BACKUP_DIR": "",  # where `backup` archives are kept: doctor shows the newest; empty: not told
        "BACKUP_MAX_AGE_HOURS": "26",  # a newest backup older than this is a warning
    }
    raw.update({k: v for k, v in environ.items() if k in ENV_VARS and v != ""})
    raw.update(overrides)

    config: dict[str, Any] = dict(overrides)
    # Kept as given (what `doctor` prints); the engine gets it pinned to psycopg 3.
    config["DATABASE_URL"] = str(raw["DATABASE_URL"])
    database_uri = normalise_database_url(config["DATABASE_URL"])
    config["REDIS_URL"] = _check_url("REDIS_URL", str(raw["REDIS_URL"]), ("redis", "rediss", "unix"))
    base_url = _check_url("BASE_URL", str(raw["BASE_URL"]), ("http", "https")).rstrip("/")
    config["BASE_URL"] = base_url
    # The default identity's transport: SMTP as always, or a provider's API (ses://,
    # postmark://, resend://, mailgun://), validated like an identity's transport URL.
    try:
        config["SMTP_URL"] = check_transport_url(str(raw["SMTP_URL"] or ""))
    except TransportUrlError as exc:
        raise ConfigError("SMTP_URL", f"is not usable: {exc}") from None
    mail_from = str(raw["MAIL_FROM"])
    if "@" not in mail_from:
        raise ConfigError("MAIL_FROM", f"must contain an email address, got {mail_from!r}")
    config["MAIL_FROM"] = mail_from
    config["SEND_DELAY_MS"] = _int("SEND_DELAY_MS", raw["SEND_DELAY_MS"])
    config["SEND_HOURLY_LIMIT"] = _int("SEND_HOURLY_LIMIT", raw["SEND_HOURLY_LIMIT"])
    config["ACCOUNT_RATE"] = _rate("ACCOUNT_RATE", raw["ACCOUNT_RATE"])
    config["MAX_IMPORT_BYTES"] = _int("MAX_IMPORT_BYTES", raw["MAX_IMPORT_BYTES"], minimum=1)
    config["MAX_IDENTITIES"] = _int("MAX_IDENTITIES", raw["MAX_IDENTITIES"])
    config["WEBHOOK_SECRET"] = str(raw["WEBHOOK_SECRET"] or "")
    config.update(_dkim(str(raw["DKIM_SELECTOR"] or ""), str(raw["DKIM_PRIVATE_KEY_FILE"] or "")))
    try:
        config["BOUNCE_MAILBOX_URL"] = check_mailbox_url(str(raw["BOUNCE_MAILBOX_URL"] or ""))
        config["VERP_DOMAIN"] = check_verp_domain(str(raw["VERP_DOMAIN"] or ""))
    except MailboxUrlError as exc:
        variable = "VERP_DOMAIN" if "domain name" in str(exc) else "BOUNCE_MAILBOX_URL"
        raise ConfigError(variable, f"is not usable: {exc}") from None
    try:
        poll = float(str(raw["BOUNCE_MAILBOX_POLL_SECONDS"]))
    except ValueError:
        poll = -1.0
    if not 0 < poll <= 86400:
        raise ConfigError("BOUNCE_MAILBOX_POLL_SECONDS", "must be a number of seconds from 0 to 86400")
    config["BOUNCE_MAILBOX_POLL_SECONDS"] = poll
    config["METRICS_TOKEN"] = str(raw["METRICS_TOKEN"] or "")
    log_format = str(raw["LOG_FORMAT"]).lower()
    if log_format not in ("plain", "json"):
        raise ConfigError("LOG_FORMAT", f"must be 'plain' or 'json', got {log_format!r}")
    config["LOG_FORMAT"] = log_format
    namespace = str(raw["BROADSIDE_NAMESPACE"])
    if not namespace.replace("-", "").replace("_", "").isalnum():
        raise ConfigError("BROADSIDE_NAMESPACE", "may hold only letters, digits, - and _")
    config["BROADSIDE_NAMESPACE"] = namespace

    arns = [a.strip() for a in str(raw["SNS_TOPIC_ARNS"] or "").split(",") if a.strip()]
    for arn in arns:
        if not arn.startswith("arn:aws:sns:") or arn.count(":") != 5:
            raise ConfigError("SNS_TOPIC_ARNS", f"must be comma-separated SNS topic ARNs, got {arn!r}")
    config["SNS_TOPIC_ARNS"] = ",".join(arns)
    config["TRUSTED_PROXY_COUNT"] = _int("TRUSTED_PROXY_COUNT", raw["TRUSTED_PROXY_COUNT"])
    config["BACKUP_DIR"] = str(raw["BACKUP_DIR"] or "").strip()
    config["BACKUP_MAX_AGE_HOURS"] = _int("BACKUP_MAX_AGE_HOURS", raw["BACKUP_MAX_AGE_HOURS"], minimum=1)
    try:
        proxies = parse_networks(str(raw["TRUSTED_PROXIES"] or ""))
    except ValueError as exc:
        raise ConfigError("TRUSTED_PROXIES", str(exc)) from None
    config["TRUSTED_PROXIES"] = ", ".join(str(network) for network in proxies)
    try:
        retry_base = float(str(raw["RETRY_BASE_SECONDS"]))
    except ValueError:
        raise ConfigError(
            "RETRY_BASE_SECONDS", f"must be a number of seconds, got {raw['RETRY_BASE_SECONDS']!r}"
        ) from None
    if not 0 < retry_base <= 3600:
        raise ConfigError("RETRY_BASE_SECONDS", "must be between 0 and 3600")
    config["RETRY_BASE_SECONDS"] = retry_base
    config["WEBHOOKS_ALLOW_PRIVATE"] = _flag("WEBHOOKS_ALLOW_PRIVATE", raw["WEBHOOKS_ALLOW_PRIVATE"])
    config["FEEDS_ALLOW_PRIVATE"] = _flag("FEEDS_ALLOW_PRIVATE", raw["FEEDS_ALLOW_PRIVATE"])
    # A provider transport's ?endpoint= may be a private or loopback address (a relay of one's
    # own, the test suite's fake providers); link-local and metadata addresses never.
    config["PROVIDER_ENDPOINTS_ALLOW_PRIVATE"] = _flag("PROVIDER_ENDPOINTS_ALLOW_PRIVATE",
                                                       raw["PROVIDER_ENDPOINTS_ALLOW_PRIVATE"])

    # The resolver the DNS checks ask (SPF, DKIM, DMARC, MX): an IP address and port; empty:
    # the system's (/etc/resolv.conf).
    try:
        parse_resolver(str(raw["DNS_RESOLVER"] or ""))
    except ValueError as exc:
        raise ConfigError("DNS_RESOLVER", str(exc)) from None
    config["DNS_RESOLVER"] = str(raw["DNS_RESOLVER"] or "").strip()
    # The media library's images in emails: MEDIA_URL + "<sha256>.<ext>" (a bucket or CDN that
    # holds copies of the files); it ends with "/", added when left out.
    media_url = str(raw["MEDIA_URL"] or "").strip()
    if media_url:
        media_url = _check_url("MEDIA_URL", media_url, ("http", "https")).rstrip("/") + "/"
    config["MEDIA_URL"] = media_url

    secret = raw.get("SECRET_KEY") or _secret_key(instance_path)
    if len(str(secret)) < 16:
        raise ConfigError("SECRET_KEY", "must be at least 16 characters long")
    config["SECRET_KEY"] = str(secret)

    is_https = base_url.startswith("https://")
    config.setdefault("SQLALCHEMY_DATABASE_URI", database_uri)
    config.setdefault("SESSION_COOKIE_HTTPONLY", True)
    config.setdefault("SESSION_COOKIE_SAMESITE", "Lax")
    config.setdefault("SESSION_COOKIE_SECURE", is_https)
    config.setdefault("REMEMBER_COOKIE_HTTPONLY", True)
    config.setdefault("REMEMBER_COOKIE_SAMESITE", "Lax")
    config.setdefault("REMEMBER_COOKIE_SECURE", is_https)
    config.setdefault("MAX_CONTENT_LENGTH", config["MAX_IMPORT_BYTES"] + 64 * 1024)
    config.setdefault("WTF_CSRF_TIME_LIMIT", None)
    return config
