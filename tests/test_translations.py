"""The shipped catalogs: every message the code marks is translated in every shipped language
(none empty, none fuzzy, placeholders kept), the committed `.mo` files say what their `.po`
files say, and no template or Python message shows a person words outside the translation
layer."""

from __future__ import annotations

import ast
import re
from html.parser import HTMLParser
from io import BytesIO
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.mofile import read_mo, write_mo
from babel.messages.pofile import read_po
from jinja2 import Environment

from broadside.core.i18n import CATALOG_DIR, LOCALES
from webapp import REPO_ROOT

KEYWORDS = {"_": None, "gettext": None, "ngettext": (1, 2), "_l": None, "lazy_gettext": None,
            "N_": None}
TRANSLATED = [locale for locale in LOCALES if locale != "en"]


def marked_messages() -> set[str | tuple[str, ...]]:
    """What `pybabel extract -F babel.cfg` finds in the code, as msgids."""
    with open(REPO_ROOT / "babel.cfg") as cfg:
        method_map, options_map = parse_mapping_cfg(cfg)
    found: set[str | tuple[str, ...]] = set()
    for _file, _line, message, _comments, _context in extract_from_dir(
            str(REPO_ROOT), method_map, options_map, keywords=KEYWORDS):
        found.add(message if isinstance(message, str) else tuple(message))
    return found


@pytest.fixture(scope="module")
def in_code() -> set:
    return marked_messages()


def catalog(locale: str):
    with open(CATALOG_DIR / locale / "LC_MESSAGES" / "messages.po", "rb") as po:
        return read_po(po, locale=locale)


@pytest.mark.parametrize("locale", TRANSLATED)
def test_every_marked_message_is_translated(locale, in_code):
    cat = catalog(locale)
    ids = {m.id if isinstance(m.id, str) else tuple(m.id) for m in cat if m.id}
    missing = sorted(str(m) for m in in_code - ids)
    assert not missing, f"{locale}: not in the catalog (docs/TRANSLATING.md): {missing[:20]}"
    untranslated = [m.id for m in cat if m.id and (
        not m.string or (isinstance(m.string, tuple) and not all(m.string)))]
    assert not untranslated, f"{locale}: untranslated: {untranslated[:20]}"
    fuzzy = [m.id for m in cat if m.id and m.fuzzy]
    assert not fuzzy, f"{locale}: fuzzy (check the translation, then remove the flag): {fuzzy[:20]}"
    unused = sorted(str(m) for m in ids - in_code)
    assert not unused, f"{locale}: no longer in the code (update with --ignore-obsolete): {unused[:20]}"
    problems = [(m.id, [str(e) for e in errors]) for m, errors in cat.check()]
    assert not problems, f"{locale}: placeholders differ from the English: {problems[:10]}"


@pytest.mark.parametrize("locale", TRANSLATED)
def test_the_committed_mo_file_is_the_po_file_compiled(locale):
    """A fresh clone runs from the committed `.mo` (Flask-Babel reads nothing else): it must
    say what the `.po` says (`pybabel compile -d webapp/translations` after every change)."""
    path = CATALOG_DIR / locale / "LC_MESSAGES" / "messages.mo"
    assert path.exists(), f"{path} is missing: run pybabel compile -d webapp/translations"
    with open(path, "rb") as mo:
        committed = {m.id: m.string for m in read_mo(mo) if m.id}
    expected = BytesIO()
    write_mo(expected, catalog(locale))
    expected.seek(0)
    compiled = {m.id: m.string for m in read_mo(expected) if m.id}
    assert committed == compiled, f"{locale}: messages.mo is stale: run pybabel compile"


# ---------------------------------------------------------------- words outside _()

# Templates not yet through the translation layer, each with why. Can only shrink: an entry
# whose template is clean fails the test below until it is removed.
NOT_YET: dict[str, str] = dict.fromkeys([
    "_body_editor.html",
    "_codes_field.html",
    "_roles.html",
    "_test_send_field.html",
    "analytics/_broadcast.html",
    "analytics/_choice_fields.html",
    "analytics/_list.html",
    "analytics/_public_notice.html",
    "analytics/_send_choice.html",
    "analytics/_settings.html",
    "apidocs/reference.html",
    "archive/_list_archive.html",
    "archive/_publish.html",
    "archive/_view_link.html",
    "archive/index.html",
    "archive/link_problem.html",
    "archive/public_base.html",
    "attachments/_field.html",
    "audit/index.html",
    "auth/enrol_two_factor.html",
    "auth/forgot.html",
    "auth/login.html",
    "auth/reset_password.html",
    "auth/reset_refused.html",
    "auth/reset_sent.html",
    "auth/setup.html",
    "auth/two_factor.html",
    "automations/_counts.html",
    "automations/_step_body.html",
    "automations/_step_text.html",
    "automations/delete.html",
    "automations/edit.html",
    "automations/index.html",
    "automations/messages.html",
    "base.html",
    "broadcasts/_body_field.html",
    "broadcasts/_confirm_attachments.html",
    "broadcasts/_confirm_images.html",
    "broadcasts/_deliveries.html",
    "broadcasts/_delivery_results.html",
    "broadcasts/_merge_check.html",
    "broadcasts/_preview.html",
    "broadcasts/_progress.html",
    "broadcasts/_progress_line.html",
    "broadcasts/_save_status.html",
    "broadcasts/_send_actions.html",
    "broadcasts/_template_actions.html",
    "broadcasts/_test_fill.html",
    "broadcasts/_test_state.html",
    "broadcasts/_test_status.html",
    "broadcasts/_text_automatic.html",
    "broadcasts/_text_field.html",
    "broadcasts/_timeline.html",
    "broadcasts/_timeline_row.html",
    "broadcasts/cancel_confirm.html",
    "broadcasts/deliveries.html",
    "broadcasts/edit.html",
    "broadcasts/index.html",
    "broadcasts/preview_problem.html",
    "broadcasts/retry_confirm.html",
    "broadcasts/send_confirm.html",
    "broadcasts/show.html",
    "broadcasts/timeline.html",
    "dashboard/_growth.html",
    "dashboard/_recent.html",
    "dashboard/home.html",
    "deliverability/_chart.html",
    "deliverability/index.html",
    "email/layout.html",
    "error.html",
    "identities/_dkim_fields.html",
    "identities/_dkim_record.html",
    "identities/_dns.html",
    "identities/_fields.html",
    "identities/delete.html",
    "identities/edit.html",
    "identities/index.html",
    "library/_block_fields.html",
    "library/_design_words.html",
    "library/_nav.html",
    "library/_save_as_form.html",
    "library/_start_from.html",
    "library/block.html",
    "library/blocks.html",
    "library/edit.html",
    "library/index.html",
    "library/save_as.html",
    "lists/delete.html",
    "lists/index.html",
    "lists/show.html",
    "media/_insert.html",
    "media/delete.html",
    "media/index.html",
    "people/accept.html",
    "people/refused.html",
    "security/_enrol.html",
    "security/enrol.html",
    "security/index.html",
    "security/recovery_codes.html",
    "settings/_automations_reached.html",
    "settings/_design_preview.html",
    "settings/design.html",
    "settings/index.html",
    "settings/webhooks.html",
    "settings/webhooks_endpoint.html",
    "signup/_snippet.html",
    "signup/check_inbox.html",
    "signup/confirm.html",
    "signup/confirmed.html",
    "signup/join.html",
    "signup/left_since.html",
    "signup/throttled.html",
    "subscribers/_import_progress.html",
    "subscribers/bulk_confirm.html",
    "subscribers/import_status.html",
    "system/_applying.html",
    "system/_checks.html",
    "system/_live.html",
    "system/index.html",
    "system/outbox_message.html",
    "transactional/_body_field.html",
    "transactional/_form.html",
    "transactional/_preview.html",
    "transactional/_sends.html",
    "transactional/_text_field.html",
    "transactional/index.html",
    "transactional/new.html",
    "transactional/show.html",
    "unsubscribe/_departures_panel.html",
    "unsubscribe/_departures_table.html",
    "unsubscribe/_paused_note.html",
    "unsubscribe/_suppression_panel.html",
    "unsubscribe/_your_data.html",
    "unsubscribe/confirm.html",
    "unsubscribe/departures.html",
    "unsubscribe/done.html",
    "unsubscribe/erase.html",
    "unsubscribe/erased.html",
    "unsubscribe/lift.html",
    "unsubscribe/preferences.html",
    "unsubscribe/problem.html",
    "unsubscribe/public_base.html",
    "unsubscribe/resubscribed.html",
], "English only until its area is translated")

# Text a person reads that is the same in every language: names of things and formats.
NAMES = {"Broadside", "Markdown", "HTML", "API", "SMTP", "CSV", "JSON", "DKIM", "SPF", "DMARC",
         "MX", "IMAP", "URL", "RSS", "OK", "QR", "TOTP", "ID", "Gmail", "Outlook", "PNG",
         "JPEG", "GIF", "WebP", "PDF", "SES", "Postmark", "Resend", "Mailgun", "Redis",
         "PostgreSQL", "SQLite", "Prometheus", "VERP", "OpenAPI", "B", "I", "U", "H1", "H2",
         "Trix", "honcho", "List-Unsubscribe", "Reply-To", "BIMI", "curl", "Python"}
SPOKEN_ATTRIBUTES = {"title", "placeholder", "aria-label", "alt", "hx-confirm", "data-confirm",
                     "aria-description", "aria-roledescription", "label"}
LETTER = re.compile(r"[^\W\d_]", re.UNICODE)
HOLE = "\x00"


def holed(source: str, env: Environment) -> str:
    """The template with every Jinja construct replaced by one HOLE, and each {% trans %}
    block (translated as a whole) with one HOLE too: what is left is what the template says
    in plain words."""
    out: list[str] = []
    depth = 0
    after_block_begin = False
    for _line, kind, value in env.lex(source):
        if kind == "data":
            if depth == 0:
                out.append(value)
            continue
        if kind == "whitespace":
            continue
        if after_block_begin and kind == "name":
            depth += {"trans": 1, "endtrans": -1}.get(value, 0)
        after_block_begin = kind == "block_begin"
        if not out or out[-1] != HOLE:
            out.append(HOLE)
    return "".join(out)


class Words(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self.skipping += 1
        values = dict(attrs)
        for name, value in attrs:
            spoken = name in SPOKEN_ATTRIBUTES or (
                name == "value" and tag == "input" and values.get("type") in ("submit", "button"))
            if spoken and value:
                self.said(value)

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self.skipping:
            self.skipping -= 1

    def handle_data(self, data):
        if not self.skipping:
            self.said(data)

    def said(self, text: str) -> None:
        words = " ".join(text.replace(HOLE, " ").split())
        if not LETTER.search(words):
            return
        if all(word.strip(".,:;()[]/·—–-+*#'\"!?…→←↑↓×%&|") in NAMES or not LETTER.search(word)
               for word in words.split()):
            return
        self.found.append(words)


def words_outside_translation(path: Path, env: Environment) -> list[str]:
    parser = Words()
    parser.feed(holed(path.read_text(), env))
    parser.close()
    return parser.found


def test_no_template_shows_words_outside_the_translation_layer():
    from webapp import create_app  # noqa: F401 - the app's Jinja settings

    env = Environment(extensions=["jinja2.ext.i18n"])
    found = {}
    for path in sorted((REPO_ROOT / "templates").rglob("*.html")):
        name = str(path.relative_to(REPO_ROOT / "templates"))
        words = words_outside_translation(path, env)
        if words and name not in NOT_YET:
            found[name] = words[:5]
        if not words and name in NOT_YET:
            found[name] = ["clean now: remove it from NOT_YET"]
    assert not found, "\n".join(f"{name}: {words}" for name, words in found.items())


def test_the_lint_sees_words_and_spares_translated_ones(tmp_path):
    env = Environment(extensions=["jinja2.ext.i18n"])
    page = tmp_path / "page.html"
    page.write_text('<p>{{ _("Saved") }}</p><p>{% trans n=1 %}One {{ n }}{% endtrans %}</p>'
                    '<input type="submit" value="{{ _(\'Send\') }}"> <b>SMTP</b> · 3'
                    '<script>let words = "ignored";</script>')
    assert words_outside_translation(page, env) == []
    page.write_text('<p>Saved {{ when }}</p><a title="Open it" href="#">{{ _("x") }}</a>'
                    '<input type="submit" value="Send">')
    assert words_outside_translation(page, env) == ["Saved", "Open it", "Send"]


# Python modules whose flash() messages are not yet translated. Can only shrink.
FLASH_NOT_YET: dict[str, str] = dict.fromkeys([
    "webapp/analytics/views.py",
    "webapp/archive/views.py",
    "webapp/auth/second_step.py",
    "webapp/auth/views.py",
    "webapp/automations/views.py",
    "webapp/broadcasts/sending_views.py",
    "webapp/broadcasts/views.py",
    "webapp/deliverability/views.py",
    "webapp/identities/views.py",
    "webapp/library/block_views.py",
    "webapp/library/views.py",
    "webapp/lists/views.py",
    "webapp/media/views.py",
    "webapp/people/invitation.py",
    "webapp/security_pages/policy.py",
    "webapp/security_pages/views.py",
    "webapp/settings/views.py",
    "webapp/settings/webhooks.py",
    "webapp/system/views.py",
    "webapp/transactional/views.py",
    "webapp/unsubscribe/owner.py",
], "English only until its area is translated")


def literal_flashes(path: Path) -> list[int]:
    """Lines where `flash(...)` is given words as a plain or f-string, not through _()."""
    tree = ast.parse(path.read_text())
    lines = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "flash"
                and node.args and isinstance(node.args[0], ast.Constant | ast.JoinedStr)):
            lines.append(node.lineno)
    return lines


def test_flashed_messages_go_through_the_translation_layer():
    found = {}
    for path in sorted((REPO_ROOT / "webapp").rglob("*.py")):
        name = str(path.relative_to(REPO_ROOT))
        lines = literal_flashes(path)
        if lines and name not in FLASH_NOT_YET:
            found[name] = lines
        if not lines and name in FLASH_NOT_YET:
            found[name] = ["clean now: remove it from FLASH_NOT_YET"]
    assert not found, found
