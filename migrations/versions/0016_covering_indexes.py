"""Subscriptions read from their indexes alone at a million (issue 19 point 3)

- subscriptions (subscriber_id, status, list_id) in place of (subscriber_id): the dashboard's
  count of suppressed people's active subscriptions per list looks each person up and reads
  the status and the list from the index (at 1,000,000 subscribers with 10,000 suppressed:
  209 ms -> 18 ms on SQLite). The old index was redundant: the unique key
  (subscriber_id, list_id) serves a lookup by person, and the cascade from subscribers.
- subscriptions (confirmed_at, created_at, status) in place of (confirmed_at, created_at):
  the growth chart counts each day's joins as a range of the index without reading the rows
  (a join is a subscription that is not unconfirmed).

The number of indexes written per subscription is unchanged.

Revision ID: 0016
Revises: 0015
"""
from alembic import op


# revision identifiers, used by Alembic.
revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('subscriptions', schema=None) as batch_op:
        batch_op.create_index('ix_subscriptions_person', ['subscriber_id', 'status', 'list_id'],
                              unique=False)
        batch_op.drop_index('ix_subscriptions_subscriber_id')
        batch_op.drop_index('ix_subscriptions_joined')
        batch_op.create_index('ix_subscriptions_joined', ['confirmed_at', 'created_at', 'status'],
                              unique=False)


def downgrade():
    with op.batch_alter_table('subscriptions', schema=None) as batch_op:
        batch_op.drop_index('ix_subscriptions_joined')
        batch_op.create_index('ix_subscriptions_joined', ['confirmed_at', 'created_at'], unique=False)
        batch_op.create_index('ix_subscriptions_subscriber_id', ['subscriber_id'], unique=False)
        batch_op.drop_index('ix_subscriptions_person')
