"""Deleting a list reads only what names it: indexes on deliveries.list_id and events.list_id

Deleting a list sets its deliveries' and events' list to NULL (their foreign keys' ON DELETE
SET NULL), in the owner's request. With no index on either column, each delete read every
delivery and every event ever written, whatever the list's size: at a million people with
3,000,000 deliveries, an empty list took 0.58 s to delete on SQLite and 0.32 s on PostgreSQL,
growing with the history (and holding SQLite's one writer all that while). With them, 2-4 ms.

- deliveries (list_id): every copy written since segments names its list.
- events (list_id) WHERE list_id IS NOT NULL: only a subscription's events name a list (an
  import's, a sign-up's, an unsubscribe's); a delivery's never do. The foreign key's
  `list_id = $1` implies the column is not NULL, so the partial index serves it (0017).

Revision ID: 0019
Revises: 0018
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None


def upgrade():
    op.create_index('ix_deliveries_list_id', 'deliveries', ['list_id'], unique=False)
    op.create_index('ix_events_list_id', 'events', ['list_id'], unique=False,
                    postgresql_where=sa.text('list_id IS NOT NULL'),
                    sqlite_where=sa.text('list_id IS NOT NULL'))


def downgrade():
    op.drop_index('ix_events_list_id', table_name='events')
    op.drop_index('ix_deliveries_list_id', table_name='deliveries')
