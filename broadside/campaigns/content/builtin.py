"""The three templates every installation has: a newsletter with sections, an announcement and
a plain letter.

They are code, not rows: an upgrade brings their newest wording to every installation, nothing
an owner does can delete or change them (starting from one and saving it as a template makes
the owner's own copy), and a restored or emptied database still has them. Their key
("newsletter", "announcement", "letter") is their id where an owner's template has a number.
They take the design in Settings (no design changes), so they wear the owner's brand.

Merge fields: `name` with a fallback (some people have none), the unsubscribe link is the
layout's own footer, so no body repeats it.
"""

from __future__ import annotations

from dataclasses import dataclass


def N_(message: str) -> str:
    """Marks a name or description for the catalogs; translated where it is shown
    (`templates._of_builtin`, in the request's language). The rest is the owner's starting
    content, in English."""
    return message


@dataclass(frozen=True)
class BuiltIn:
    key: str
    name: str
    description: str
    subject: str
    preheader: str
    body: str
    body_format: str  # "markdown" or "html"
    editor: str


NEWSLETTER = BuiltIn(
    key="newsletter",
    name=N_("Newsletter with sections"),
    description=N_("A regular issue: a short opening, three sections with headings, links to "
                "read more, and a sign-off."),
    subject="{{ name or 'Hello' }}, here is what's new this month",
    preheader="Three things worth your time, in five minutes.",
    body_format="markdown",
    editor="markdown",
    body="""Hi {{ name or "there" }},

A short hello to open the issue: what happened since the last one, and what is in this one.
Two or three sentences are plenty.

---

## The main story

Lead with the thing most readers came for. Say what happened, why it matters to them, and
what they can do about it.

[Read the whole story →](https://example.com/story)

---

## Worth knowing

- **A short item.** One sentence that tells the whole thing.
- **Another item.** With a [link](https://example.com/item) if there is more to read.
- **A date for the diary.** What, when, where.

---

## From the community

A reply, a question or a photo a reader sent in. People read what other people wrote.

---

Thanks for reading. Reply to this email: every answer reaches a person.

See you next month,\\
The team
""",
)

ANNOUNCEMENT = BuiltIn(
    key="announcement",
    name=N_("Announcement"),
    description=N_("One piece of news with the facts at a glance (what, when, where) and one "
                "clear link. Written in HTML, with a table for the facts."),
    subject="Announcing: the one-line news",
    preheader="The news in a sentence, and what it means for you.",
    body_format="html",
    editor="html",
    body="""<h1>The news, in one line</h1>
<p>Hi {{ name or "there" }},</p>
<p>Say the news first, in one or two sentences: what is new, and why it is good news for the
person reading.</p>
<table role="presentation" width="100%" cellpadding="8" cellspacing="0" border="0"
       style="border-collapse: collapse; border-top: 1px solid #d0d5dd;
              border-bottom: 1px solid #d0d5dd; margin: 16px 0;">
  <tr>
    <th align="left" valign="top" width="30%" style="padding: 8px;">What</th>
    <td valign="top" style="padding: 8px;">The thing, named plainly</td>
  </tr>
  <tr>
    <th align="left" valign="top" style="padding: 8px; border-top: 1px solid #d0d5dd;">When</th>
    <td valign="top" style="padding: 8px; border-top: 1px solid #d0d5dd;">
      The date (and the time, with its zone)</td>
  </tr>
  <tr>
    <th align="left" valign="top" style="padding: 8px; border-top: 1px solid #d0d5dd;">Where</th>
    <td valign="top" style="padding: 8px; border-top: 1px solid #d0d5dd;">
      The place, or the address online</td>
  </tr>
</table>
<p>Then the detail that helps someone decide: who it is for, what it costs, what to bring.</p>
<p style="text-align: center; margin: 24px 0;"><strong>
  <a href="https://example.com/news">Find out more and sign up →</a></strong></p>
<p>Questions? Reply to this email and we will answer.</p>
<p>The team</p>
""",
)

LETTER = BuiltIn(
    key="letter",
    name=N_("Plain letter"),
    description=N_("A personal note, as one person writes to another: no headings, no pictures, "
                "just paragraphs and a signature."),
    subject="A note from us",
    preheader="",
    body_format="markdown",
    editor="markdown",
    body="""Dear {{ name or "friend" }},

Write the way you would write to one person you know. Start with why you are writing today.

Keep each paragraph to one thought. Short paragraphs are easier to read on a phone, and a
letter that reads like a person wrote it is the one people answer.

If you ask for something, ask once, near the end, and make it easy: one link, or "just
reply to this email".

With best wishes,

Your name
""",
)

BUILT_INS: tuple[BuiltIn, ...] = (NEWSLETTER, ANNOUNCEMENT, LETTER)
BY_KEY = {template.key: template for template in BUILT_INS}
