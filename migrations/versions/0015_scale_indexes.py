"""Indexes for pages at a million subscribers (issue 19 point 3)

- subscriptions (confirmed_at, created_at): the dashboard's growth chart finds the joins of
  the last 30 days as two ranges of it (confirmed in range; never confirmed and created in
  range), instead of reading every subscription.
- subscriptions (unsubscribed_at): the chart's leaves, one range.
- subscribers (suppression): the suppressed filter and the metrics' suppressed counts read
  the few suppressed people, not the whole table.

Revision ID: 0015
Revises: 0014
"""
from alembic import op


# revision identifiers, used by Alembic.
revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('subscriptions', schema=None) as batch_op:
        batch_op.create_index('ix_subscriptions_joined', ['confirmed_at', 'created_at'], unique=False)
        batch_op.create_index('ix_subscriptions_unsubscribed_at', ['unsubscribed_at'], unique=False)
    with op.batch_alter_table('subscribers', schema=None) as batch_op:
        batch_op.create_index('ix_subscribers_suppression', ['suppression'], unique=False)


def downgrade():
    with op.batch_alter_table('subscribers', schema=None) as batch_op:
        batch_op.drop_index('ix_subscribers_suppression')
    with op.batch_alter_table('subscriptions', schema=None) as batch_op:
        batch_op.drop_index('ix_subscriptions_unsubscribed_at')
        batch_op.drop_index('ix_subscriptions_joined')
