"""One writer per state, kept by the code: no module but its owner writes `Subscription.status`
(`broadside.audience.subscriptions`) or `Import.status` (`broadside.audience.transfer.lifecycle`).

The source of the web app, the worker and the domain is read as Python (not grepped as text):
outside the owner, nothing inserts or deletes subscriptions, no UPDATE of subscriptions sets
their status or the fields that move with it, no SQL text writes either table's rows that way,
and no ORM object's status is assigned.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SOURCES = ("broadside", "jobs", "webapp")
SUBSCRIPTIONS_OWNER = "broadside/audience/subscriptions.py"
IMPORTS_OWNER = "broadside/audience/transfer/lifecycle.py"
# The fields a subscription's transition sets with its status.
SUBSCRIPTION_FIELDS = {"status", "confirmed_at", "unsubscribed_at", "unsubscribe_source"}
WRITES = {"update", "insert", "delete", "dialect_insert"}
SQL_WRITE = r"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+{table}\b"


def _table_of(node: ast.AST) -> str | None:
    """"subscriptions" or "imports" when `node` names that model or its table."""
    text = ast.unparse(node)
    if text in ("Subscription", "Subscription.__table__", "_SUBSCRIPTIONS"):
        return "subscriptions"
    if text in ("Import", "Import.__table__", "_IMPORTS"):
        return "imports"
    return None


def _written_table(call: ast.Call) -> tuple[str, str] | None:
    """(kind, table) when `call` is update/insert/delete (or dialect_insert) of a watched table."""
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(
        func, ast.Attribute) else None
    if name not in WRITES:
        return None
    for arg in call.args:
        table = _table_of(arg)
        if table is not None:
            return ("insert" if name == "dialect_insert" else name), table
    return None


def _root_write(node: ast.AST) -> tuple[str, str] | None:
    """The watched write a method chain (`update(X).where(...).values(...)`) starts from."""
    while True:
        if isinstance(node, ast.Call):
            found = _written_table(node)
            if found is not None:
                return found
            node = node.func
        elif isinstance(node, ast.Attribute):
            node = node.value
        else:
            return None


def violations(path: str, source: str) -> list[str]:
    """What in this module writes a status it does not own (empty for the owners)."""
    found: list[str] = []
    owns_subscriptions = path == SUBSCRIPTIONS_OWNER
    owns_imports = path == IMPORTS_OWNER
    for node in ast.walk(ast.parse(source)):
        where = f"{path}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Call):
            write = _written_table(node)
            if write == ("insert", "subscriptions") or write == ("delete", "subscriptions"):
                if not owns_subscriptions:
                    found.append(f"{where}: {write[0]} of subscriptions")
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "values":
                root = _root_write(func.value)
                keys = {k.arg for k in node.keywords}
                if root == ("update", "subscriptions") and keys & SUBSCRIPTION_FIELDS \
                        and not owns_subscriptions:
                    found.append(f"{where}: UPDATE of subscriptions sets {keys & SUBSCRIPTION_FIELDS}")
                if root == ("update", "imports") and "status" in keys and not owns_imports:
                    found.append(f"{where}: UPDATE of imports sets status")
            if ast.unparse(func) == "Subscription" and not owns_subscriptions:
                found.append(f"{where}: a Subscription made by hand")
            if ast.unparse(func) == "Import":
                for keyword in node.keywords:
                    if keyword.arg == "status" and \
                            ast.unparse(keyword.value) != "lifecycle.INITIAL.value":
                        found.append(f"{where}: an Import made in a state other than the first")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for table, owner in (("subscriptions", owns_subscriptions), ("imports", owns_imports)):
                if not owner and re.search(SQL_WRITE.format(table=table), node.value, re.I):
                    found.append(f"{where}: SQL that writes {table}")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if not isinstance(target, ast.Attribute):
                    continue
                owner_name = ast.unparse(target.value).lower()
                if target.attr in SUBSCRIPTION_FIELDS and "subscription" in owner_name \
                        and not owns_subscriptions:
                    found.append(f"{where}: {ast.unparse(target)} assigned")
                if target.attr == "status" and "import" in owner_name and not owns_imports:
                    found.append(f"{where}: {ast.unparse(target)} assigned")
    return found


def test_only_the_owners_write_a_subscriptions_or_an_imports_status():
    found = []
    for folder in SOURCES:
        for file in sorted((ROOT / folder).rglob("*.py")):
            path = file.relative_to(ROOT).as_posix()
            found += violations(path, file.read_text(encoding="utf-8"))
    assert found == []


@pytest.mark.parametrize("source", [
    "update(Subscription).where(Subscription.id == 1).values(status='active')",
    "session.execute(update(Subscription.__table__).values(unsubscribed_at=None))",
    "dialect_insert(session, Subscription.__table__).values(status='active')",
    "delete(Subscription).where(Subscription.list_id == 1)",
    "session.add(Subscription(subscriber_id=1, list_id=1, status='active'))",
    "subscription.status = 'active'",
    "text('UPDATE subscriptions SET status = :s')",
    "q = '''insert into subscriptions (subscriber_id) values (1)'''",
    "update(Import).where(Import.id == 1).values(status='done')",
    "Import(list_id=1, status='running')",
    "import_record.status = 'failed'",
])
def test_the_check_sees_each_way_of_writing_a_status(source):
    assert violations("broadside/audience/elsewhere.py", source)


def test_the_check_leaves_other_writes_alone():
    assert not violations("broadside/audience/elsewhere.py", "\n".join([
        "update(Subscription).where(Subscription.id == 1).values(confirmation_sent_at=now)",
        "update(Import).where(Import.id == 1).values(asked=Import.asked + 1)",
        "Import(list_id=1, status=lifecycle.INITIAL.value)",
        "select(Subscription.status).where(Subscription.status == 'active')",
    ]))
