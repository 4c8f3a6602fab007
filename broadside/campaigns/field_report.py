"""What a message's merge fields will do to the people it goes to, told before it is sent:
one report for a broadcast (`broadcasts/merge_report.py`: its subject, preheader and body over
its audience) and for an automation (`automations/merge_report.py`: every step's texts over
its trigger's list or segment).

A field nobody has (`{{ nmae }}`) or an attribute some recipients lack renders empty, in the
preview, the subject and the real send alike; that is right for a person's missing value, and
silent for a typo. So the editors, the send page and an automation's enable ask `field_report`
with the texts (named by where they are: "subject", "step 2 body") and who would get them:

- `problems`: merge syntax that is broken or not allowed, with the line and column of the
  real mistake (`broadside.mail.merge_check`). Sending and scheduling are refused until fixed.
- `unknown`: a field nobody has: a name that is not a field (`{{ nmae }}`), or an attribute
  none of the audience has; with the closest known field (`name`, `attributes.city`) when
  one is close.
- `missing`: an attribute (or the name) printed with no fallback that some recipients lack:
  "41 of 299 recipients have no city", with the fallback to add.
- `strays`: a `}}` or `%}` outside any field (Jinja prints it as text: half of a field).

The counts are one query over the audience (a condition over subscribers: the people a send
would reach now, or who are in an automation's list or segment now): COUNT(*) and, per
attribute, how many have it missing, null or empty, through SQLAlchemy's JSON path
(json_extract on SQLite, ->> on PostgreSQL). It runs only when the message uses attributes or
the name, for at most MAX_CHECKED_KEYS of them; the editors bound it to the first `limit`
people (and say "of the first 10,000 checked"), the send page to the first 100,000
(`launch.SEND_PAGE_CHECKED`: counting a million people's attributes took ~1 s on SQLite, in
the page the owner waits for before pressing Send). Known attribute names (for suggestions)
are read from the newest KEY_SAMPLE of them, and only when a field is unknown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, case, func, or_, select, true
from sqlalchemy.orm import Session

from broadside.campaigns.codes.fields import FIELD as CODE_FIELD
from broadside.campaigns.codes.fields import without_codes
from broadside.core.i18n import _, _l, ngettext
from broadside.core.models import Subscriber
from broadside.mail.merge_check import (
    BUILT_INS,
    Use,
    attribute_field,
    field_uses,
    stray_closers,
    suggest,
)
from broadside.mail.merge_fields import MergeError, check_merge_fields

MAX_CHECKED_KEYS = 20
KEY_SAMPLE = 500
MAX_LISTED = 10  # warnings of one kind shown; the rest are summed up
# An editor checks merge fields against at most this many people on each save (the send page
# counts its first 100,000): a typo shows as fast on a list of a million.
EDITOR_CHECKED = 10_000
# How the people a report counts are called (a key of _GROUPS).
RECIPIENTS = "recipients"


@dataclass(frozen=True)
class UnknownField:
    """A field that renders empty for everyone."""

    written: str  # "nmae", "attributes.ctiy"
    label: str  # "nmae", "ctiy": what the field is called
    where: str  # "subject", "preheader" or "body"
    line: int
    column: int | None
    suggestion: str | None  # "name", "attributes.city"
    recipients: int | None = None  # for an attribute: none of this many has it
    sampled: bool = False  # they are the first `recipients` checked, not all of them
    noun: str = RECIPIENTS

    @property
    def place(self) -> str:
        return _place(self.where, self.line, self.column)

    @property
    def group(self) -> str:
        """ "the 299 recipients", or "the first 10,000 recipients checked"."""
        return _group(self.recipients or 0, self.sampled, self.noun, article=True)

    @property
    def message(self) -> str:
        written = f"{{{{ {self.written} }}}}"
        if self.recipients is None:
            said = _("In the %(place)s: %(field)s is not a merge field, so it will be empty "
                     "for everyone.", place=self.place, field=written)
        else:
            said = _("In the %(place)s: none of %(group)s has %(label)s, so %(field)s will be "
                     "empty for everyone.", place=self.place, group=self.group,
                     label=self.label, field=written)
        if not self.suggestion:
            return said
        return said + " " + _("Did you mean %(value)s?",
                              value=f"{{{{ {self.suggestion} }}}}")


@dataclass(frozen=True)
class MissingField:
    """A field printed with no fallback that some recipients do not have."""

    written: str  # "attributes.city" or "name"
    label: str  # "city" or "name"
    missing: int
    recipients: int
    wheres: tuple[str, ...]
    sampled: bool = False  # they are the first `recipients` checked, not all of them
    noun: str = RECIPIENTS

    @property
    def group(self) -> str:
        """ "299 recipients", or "the first 10,000 recipients checked"."""
        return _group(self.recipients, self.sampled, self.noun, article=False)

    @property
    def where_words(self) -> list[str]:
        """The texts it is printed in, in the owner's words ("subject", "step 2 body")."""
        return [where_words(where) for where in self.wheres]

    @property
    def fallback(self) -> str:
        return f'{{{{ {self.written} or "there" }}}}'

    @property
    def message(self) -> str:
        return ngettext("%(num)s of %(group)s has no %(label)s; they will see it empty in the "
                        "%(where)s. Add a fallback: %(fallback)s",
                        "%(num)s of %(group)s have no %(label)s; they will see it empty in the "
                        "%(where)s. Add a fallback: %(fallback)s", self.missing,
                        group=self.group, label=self.label,
                        where=_(" and ").join(self.where_words), fallback=self.fallback)


@dataclass(frozen=True)
class StrayCloser:
    where: str
    line: int
    column: int
    token: str

    @property
    def place(self) -> str:
        return _place(self.where, self.line, self.column)

    @property
    def message(self) -> str:
        opener = "{{" if self.token == "}}" else "{%"
        return _("In the %(place)s: this %(token)s closes nothing and will be sent as it is. "
                 "Is its %(opening)s missing?", place=self.place, token=self.token,
                 opening=opener)


@dataclass(frozen=True)
class MergeReport:
    problems: list[MergeError] = field(default_factory=list)
    unknown: list[UnknownField] = field(default_factory=list)
    missing: list[MissingField] = field(default_factory=list)
    strays: list[StrayCloser] = field(default_factory=list)
    more: int = 0  # warnings left out past MAX_LISTED of a kind

    @property
    def warnings(self) -> list[str]:
        return ([w.message for w in self.unknown] + [m.message for m in self.missing]
                + [s.message for s in self.strays])

    @property
    def warning_count(self) -> int:
        return len(self.unknown) + len(self.missing) + len(self.strays) + self.more


def _group(recipients: int, sampled: bool, noun: str, *, article: bool) -> str:
    """ "299 recipients", "the 299 recipients" or "the first 10,000 recipients checked"
    (always with its article: the first ones are particular people)."""
    forms = _GROUPS.get(noun, _GROUPS[RECIPIENTS])
    return forms[2 if sampled else 1 if article else 0](recipients)


# How each kind of report names the people it counts: (bare, with "the", the first checked),
# each as (one, many); `automations.merge_report` counts its list's or segment's people.
_GROUPS: dict[str, tuple[Callable[[int], str], ...]] = {
    RECIPIENTS: (
        lambda n: ngettext("%(num)s recipient", "%(num)s recipients", n),
        lambda n: ngettext("the %(num)s recipient", "the %(num)s recipients", n),
        lambda n: ngettext("the first %(num)s recipient checked",
                           "the first %(num)s recipients checked", n),
    ),
    "list": (
        lambda n: ngettext("%(num)s person on its list", "%(num)s people on its list", n),
        lambda n: ngettext("the %(num)s person on its list", "the %(num)s people on its list",
                           n),
        lambda n: ngettext("the first %(num)s person on its list checked",
                           "the first %(num)s people on its list checked", n),
    ),
    "segment": (
        lambda n: ngettext("%(num)s person its segment matches",
                           "%(num)s people its segment matches", n),
        lambda n: ngettext("the %(num)s person its segment matches",
                           "the %(num)s people its segment matches", n),
        lambda n: ngettext("the first %(num)s person its segment matches checked",
                           "the first %(num)s people its segment matches checked", n),
    ),
}

# The texts a report names ("subject"; an automation's "step 2 body").
_WHERE = {"subject": _l("subject"), "preheader": _l("preheader"), "body": _l("body"),
          "plain-text part": _l("plain-text part")}
_STEP_WHERE = {
    "subject": _l("step %(number)s subject"), "preheader": _l("step %(number)s preheader"),
    "body": _l("step %(number)s body"), "plain-text part": _l("step %(number)s plain-text part"),
}
_STEP = re.compile(r"step (\d+) (.+)")


def where_words(where: str) -> str:
    """A text's name in the owner's words; a name we do not know, as it is."""
    if where in _WHERE:
        return str(_WHERE[where])
    step = _STEP.fullmatch(where)
    if step and step.group(2) in _STEP_WHERE:
        return str(_STEP_WHERE[step.group(2)]) % {"number": step.group(1)}
    return where


def _place(where: str, line: int, column: int | None) -> str:
    words = where_words(where)
    if where.endswith("body"):
        if column:
            return _("%(where)s, line %(line)s, column %(column)s", where=words, line=line,
                     column=column)
        return _("%(where)s, line %(line)s", where=words, line=line)
    return _("%(where)s, column %(column)s", where=words, column=column) if column else words


Codes = bool | frozenset[str]  # the message mints codes; or the texts (wheres) that do


def _read(texts: Mapping[str, str], codes: Codes = False
          ) -> tuple[list[MergeError], dict[str, list[Use]], list[StrayCloser]]:
    """Each text's merge syntax checked and its uses listed, without reading any recipient.
    `{{ code }}` is a field only where codes are on (then no use is listed); else a problem."""
    problems: list[MergeError] = []
    uses: dict[str, list[Use]] = {}
    strays: list[StrayCloser] = []
    for where, text in texts.items():
        source = text or ""
        if "{" not in source and "}" not in source and "%" not in source:
            continue
        try:
            tree = check_merge_fields(source, where)
        except MergeError as exc:
            problems.append(exc)
            continue
        listed = field_uses(source, tree)
        coded = [use for use in listed if use.kind == "unknown" and use.key == CODE_FIELD]
        if coded and not (codes if isinstance(codes, bool) else where in codes):
            problems.append(without_codes(where, coded[0].line))
        uses[where] = [use for use in listed if use not in coded]
        strays += [StrayCloser(where, line, column, token)
                   for line, column, token in stray_closers(source)]
    return problems, uses, strays


def field_problems(texts: Mapping[str, str], *, codes: Codes = False) -> list[MergeError]:
    """`field_report(...).problems` (what refuses Send and Schedule), without counting anyone:
    the press asks only this."""
    return _read(texts, codes)[0]


def field_report(session: Session, texts: Mapping[str, str],
                 condition: ColumnElement[bool] | None, *, limit: int | None = None,
                 noun: str = RECIPIENTS, codes: Codes = False) -> MergeReport:
    """What the merge fields of `texts` ({where: source}, in the order to report them) will do
    to the people `condition` selects (None: nobody yet); see the module. With `limit`, at
    most that many of them are looked at (an editor asks on every save; the send page the
    first 100,000). `codes`: the message mints a code per recipient (`{{ code }}` known)."""
    problems, uses, strays = _read(texts, codes)
    if problems:
        return MergeReport(problems=problems)
    every = [(where, use) for where, listed in uses.items() for use in listed]
    # Keys with a quote or backslash cannot be a JSON path on SQLite; they are not counted.
    keys = sorted({use.key for _, use in every if use.kind == "attribute"
                   and not set(use.key) & {'"', "\\"}})[:MAX_CHECKED_KEYS]
    name_bare = any(use.kind == "builtin" and use.key == "name" and use.printed_bare
                    for _, use in every)
    recipients, lacking = (_count_missing(session, condition, keys, name_bare, limit)
                           if condition is not None and (keys or name_bare) else (0, {}))
    sampled = limit is not None and recipients >= limit
    # An attribute none of the recipients has is a typo or the wrong audience: say so once.
    nobody = {key for key in keys
              if recipients and lacking[attribute_field(key)] == recipients}
    unknown_uses = [(where, use) for where, use in every
                    if use.kind == "unknown" or (use.kind == "attribute" and use.key in nobody)]
    candidates = _candidates(session, condition) if unknown_uses else {}
    unknown: list[UnknownField] = []
    said: set[tuple[str, str]] = set()
    for where, use in unknown_uses:
        if (where, use.written) in said:
            continue
        said.add((where, use.written))
        written = suggest(use.key, list(candidates))
        hint = candidates[written] if written is not None else None
        unknown.append(UnknownField(use.written, use.key, where, use.line, use.column,
                                    hint if hint != use.written else None,
                                    recipients if use.kind == "attribute" else None,
                                    sampled, noun))
    missing: list[MissingField] = []
    counted = [("name", "name")] if name_bare else []
    for key, written in [*counted, *((key, attribute_field(key)) for key in keys)]:
        count = lacking.get(written, 0)
        if key in nobody or not count:
            continue
        wheres = tuple(where for where in texts if any(
            use.printed_bare and use.written == written for use in uses.get(where, [])))
        if wheres:
            missing.append(MissingField(written, key, count, recipients, wheres, sampled,
                                        noun))
    more = sum(max(0, len(kind) - MAX_LISTED) for kind in (unknown, missing, strays))
    return MergeReport([], unknown[:MAX_LISTED], missing[:MAX_LISTED], strays[:MAX_LISTED],
                       more)


def _lacks(column: Any) -> ColumnElement[Any]:
    return func.sum(case((or_(column.is_(None), column == ""), 1), else_=0))


def _count_missing(session: Session, condition: ColumnElement[bool], keys: list[str],
                   name: bool, limit: int | None) -> tuple[int, dict[str, int]]:
    """(recipients, {"attributes.city": how many lack it, "name": …}) in one query, over at
    most `limit` of them. An attribute is lacking when absent, JSON null or empty text: each
    of those prints nothing."""
    people: Any = Subscriber
    names, attributes = Subscriber.name, Subscriber.attributes
    if limit is not None:
        people = (select(Subscriber.name, Subscriber.attributes).where(condition).limit(limit)
                  .subquery("people"))
        names, attributes, condition = people.c.name, people.c.attributes, true()
    labels = [*(["name"] if name else []), *(attribute_field(key) for key in keys)]
    columns = [*([_lacks(names)] if name else []),
               *(_lacks(attributes[key].as_string()) for key in keys)]
    row = session.execute(select(func.count(), *columns).select_from(people)
                          .where(condition)).one()
    return int(row[0] or 0), {label: int(value or 0) for label, value in zip(labels, row[1:],
                                                                             strict=True)}


def _candidates(session: Session, condition: ColumnElement[bool] | None) -> dict[str, str]:
    """Known fields by the word an owner would type: "name" -> "name", "city" ->
    "attributes.city" (attribute names from the newest KEY_SAMPLE recipients)."""
    query = select(Subscriber.attributes).order_by(Subscriber.id.desc()).limit(KEY_SAMPLE)
    if condition is not None:
        query = query.where(condition)
    known: dict[str, str] = {}
    for attributes in session.scalars(query):
        if isinstance(attributes, dict):
            known.update((key, attribute_field(key)) for key in attributes
                         if isinstance(key, str) and 0 < len(key) <= 100)
    known.update((name, name) for name in BUILT_INS)
    return known
