"""Indexes that hold only the rows their queries read (issue 19 point 1: the import)

Each of these columns is NULL on nearly every row an import writes (a new person, their
subscription, its `subscribed` event), and every query that reads the index asks for a value
(an equality, a range, IS NOT NULL, a foreign key's `= $1`), which implies the column is not
NULL: the partial index serves the same queries, and the import's rows no longer add an entry
nobody reads (a batch of 5,000 new people on PostgreSQL: ~0.89x).

- subscriptions (unsubscribed_at) WHERE unsubscribed_at IS NOT NULL: the growth chart's
  leaves, a range per day.
- events (broadcast_id, id) WHERE broadcast_id IS NOT NULL: a broadcast's events (the
  compaction; the cascade when a broadcast is deleted).
- subscribers (suppression) WHERE suppression IS NOT NULL, on PostgreSQL only: the suppressed
  filter, the dashboard's suppressed people, the metrics' counts. SQLite keeps the whole
  index: its planner reads an id range's unsuppressed people (`suppression IS NULL`: the
  snapshot's chunks, a segment's audience) from it alone, faster than from their rows.

Revision ID: 0017
Revises: 0016
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None

# (table, index, columns, the column that is not NULL, on SQLite too)
INDEXES = (
    ('subscriptions', 'ix_subscriptions_unsubscribed_at', ['unsubscribed_at'], 'unsubscribed_at',
     True),
    ('events', 'ix_events_broadcast_id', ['broadcast_id', 'id'], 'broadcast_id', True),
    ('subscribers', 'ix_subscribers_suppression', ['suppression'], 'suppression', False),
)


def _replace(partial: bool) -> None:
    sqlite = op.get_bind().dialect.name == 'sqlite'
    for table, name, columns, column, on_sqlite in INDEXES:
        if sqlite and not on_sqlite:
            continue
        where = {'postgresql_where': sa.text(f'{column} IS NOT NULL'),
                 'sqlite_where': sa.text(f'{column} IS NOT NULL')} if partial else {}
        op.drop_index(name, table_name=table)
        op.create_index(name, table, columns, unique=False, **where)


def upgrade():
    _replace(partial=True)


def downgrade():
    _replace(partial=False)
