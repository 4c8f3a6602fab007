"""Steps the browser tests share (import from here, never from a test module)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from playwright.sync_api import Page, expect

from tests.helpers import OWNER_EMAIL, OWNER_PASSWORD

DASHBOARD = re.compile("^(Dashboard|Übersicht|Tableau de bord|Panel)$")


def sign_in(page: Page, base_url: str) -> None:
    """Sign in as the owner through the real form and land on the dashboard."""
    page.goto(base_url + "/login")
    page.get_by_label("Email").fill(OWNER_EMAIL)
    page.get_by_label("Password").fill(OWNER_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    # The dashboard, in the person's language when they chose one.
    expect(page.get_by_role("heading", name=DASHBOARD)).to_be_visible()


# At phone width: no table wider than its card (nothing left to scroll to, with no cue), and
# the tables named drawn one block per row, every cell with a visible data-label equal
# to its column's header (a column whose header is read to screen readers only, a column of
# buttons or ticks, needs none).
TABLES_ON_A_PHONE = """(stacked) => {
  const problems = new Set();
  if (document.scrollingElement.scrollWidth > innerWidth)
    problems.add(`the page is ${document.scrollingElement.scrollWidth} px wide`);
  const name = t => t.id ? '#' + t.id : 'table.' + [...t.classList].join('.');
  for (const table of document.querySelectorAll('main table')) {
    if (!table.checkVisibility()) continue;
    const box = table.closest('.table-wrap, .card') || table.parentElement;
    if (table.scrollWidth > box.clientWidth + 1 || table.offsetWidth > box.clientWidth + 1)
      problems.add(`${name(table)} is wider than its box: ${table.scrollWidth} px in ${box.clientWidth} px`);
  }
  for (const selector of stacked) {
    const table = document.querySelector(selector);
    if (!table) { problems.add(`no ${selector}`); continue; }
    const heads = [...table.tHead.rows[0].cells].map(th => {
      const hidden = th.querySelector('.sr-only');
      return hidden && hidden.textContent.trim() === th.textContent.trim() ? '' : th.textContent.trim();
    });
    const rows = [...table.tBodies].flatMap(b => [...b.rows]).filter(r => r.checkVisibility());
    if (!rows.length) problems.add(`${selector} has no rows to check`);
    for (const row of rows) {
      const display = getComputedStyle(row).display;
      if (display === 'table-row') problems.add(`${selector}: a row is still a table row`);
      [...row.cells].forEach((cell, i) => {
        if (!cell.checkVisibility() || !heads[i]) return;
        const shown = getComputedStyle(cell, '::before').content;
        const label = cell.dataset.label === undefined ? 'nothing' : JSON.stringify(cell.dataset.label);
        if (cell.dataset.label !== heads[i] || shown !== JSON.stringify(heads[i]))
          problems.add(`${selector}: a cell of "${heads[i]}" is labelled ${label} (shown: ${shown})`);
      });
    }
  }
  return [...problems];
}"""


def table_problems(page: Page, stacked: Sequence[str] = ()) -> list[str]:
    """What is wrong with the page's tables on a phone (TABLES_ON_A_PHONE); `stacked`: the
    selectors of the tables that must be one labelled block per row."""
    return page.evaluate(TABLES_ON_A_PHONE, list(stacked))


# Text out of its box: the page's own text elements, outside the tables that scroll on purpose.
# Text wider than its box. A screen reader's text (.sr-only) is clipped to one pixel by design.
OVERFLOWING = """() => [...document.querySelectorAll(`main p, main dd, main dt, main li, main td, main th,
  main label, main small, main h1, main h2, main button, main .button, main code, main legend`)]
  .filter(e => e.offsetParent !== null && !e.closest('.table-wrap') && !e.closest('.sr-only')
    && e.scrollWidth > e.clientWidth + 1)
  .map(e => e.tagName + ': ' + e.textContent.trim().slice(0, 60))"""


def fits(page: Page, what: str) -> None:
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0, \
        f"{what} scrolls sideways"
    found = page.evaluate(OVERFLOWING)
    assert found == [], f"{what}: text out of its box: {found}"
