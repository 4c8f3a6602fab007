"""Ids never reused on SQLite; progress mark for automatic resumption; read-only API tokens

- subscribers, mailing_lists and broadcasts become AUTOINCREMENT on SQLite (their ids are in
  unsubscribe links, tokens and API answers; without it SQLite hands the id of a deleted
  newest row to the next insert). SQLite can only set that when a table is created, so each
  is rebuilt (Alembic's batch mode copies the rows, ids included, and SQLite's sequence starts
  from the largest). PostgreSQL's sequences never reuse an id: nothing to do there.
- broadcasts.settled_at_resume: the deliveries that had reached sent, skipped or failed when
  the worker last resumed the broadcast by itself (progress is measured against it).
- api_tokens.read_only.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

REBUILT = ("mailing_lists", "subscribers", "broadcasts")


def upgrade():
    with op.batch_alter_table("broadcasts") as batch_op:
        batch_op.add_column(sa.Column("settled_at_resume", sa.Integer(), server_default="0", nullable=False))
    with op.batch_alter_table("api_tokens") as batch_op:
        batch_op.add_column(sa.Column("read_only", sa.Boolean(), server_default=sa.false(), nullable=False))
    if op.get_bind().dialect.name == "sqlite":
        for table in REBUILT:
            # migrations/env.py turns foreign keys off for SQLite while migrating: dropping the
            # old copy of a parent table must not cascade to its children.
            with op.batch_alter_table(table, recreate="always",
                                      table_kwargs={"sqlite_autoincrement": True}):
                pass


def downgrade():
    if op.get_bind().dialect.name == "sqlite":
        for table in REBUILT:
            with op.batch_alter_table(table, recreate="always",
                                      table_kwargs={"sqlite_autoincrement": False}):
                pass
    with op.batch_alter_table("api_tokens") as batch_op:
        batch_op.drop_column("read_only")
    with op.batch_alter_table("broadcasts") as batch_op:
        batch_op.drop_column("settled_at_resume")
