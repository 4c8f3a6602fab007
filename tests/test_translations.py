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


def messages_of(cat) -> dict:
    """{msgid: msgstr}, a plural's id and forms as tuples (read_mo gives lists)."""
    def key(value):
        return value if isinstance(value, str) else tuple(value)
    return {key(m.id): key(m.string) for m in cat if m.id}


@pytest.mark.parametrize("locale", TRANSLATED)
def test_the_committed_mo_file_is_the_po_file_compiled(locale):
    """A fresh clone runs from the committed `.mo` (Flask-Babel reads nothing else): it must
    say what the `.po` says (`pybabel compile -d webapp/translations` after every change)."""
    path = CATALOG_DIR / locale / "LC_MESSAGES" / "messages.mo"
    assert path.exists(), f"{path} is missing: run pybabel compile -d webapp/translations"
    with open(path, "rb") as mo:
        committed = messages_of(read_mo(mo))
    expected = BytesIO()
    write_mo(expected, catalog(locale))
    expected.seek(0)
    compiled = messages_of(read_mo(expected))
    assert committed == compiled, f"{locale}: messages.mo is stale: run pybabel compile"


# ---------------------------------------------------------------- words outside _()


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
        if words:
            found[name] = words[:5]
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
        if lines:
            found[name] = lines
    assert not found, found


TRANSLATING = {"_", "_l", "gettext", "ngettext", "lazy_gettext"}


def test_no_message_is_marked_inside_an_f_string():
    """Babel's extractor reads an f-string as one token on Python 3.11: a `_()` inside one is
    never extracted, so never translated."""
    found = []
    for top in ("broadside", "webapp", "jobs"):
        for path in sorted((REPO_ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.JoinedStr):
                    found += [f"{path.relative_to(REPO_ROOT)}:{call.lineno}"
                              for call in ast.walk(node) if isinstance(call, ast.Call)
                              and getattr(call.func, "id", None) in TRANSLATING]
    assert not found, found
