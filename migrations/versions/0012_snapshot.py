"""The audience snapshot in chunks (issue 19 point 2)

- broadcasts.snapshot_cursor, snapshot_until: the subscriber ids up to `snapshot_until` (the
  highest at the press) are the candidates; the worker snapshots them in chunks, moving the
  cursor with a guarded UPDATE in each chunk's transaction. 0 and 0 (complete) for every
  existing broadcast: those were snapshotted whole at the press.
- broadcasts.audience_estimate: a list's active subscriptions, counted by the worker, for the page.
- broadcasts.audience_rules: a segment's rules frozen at the press.

Revision ID: 0012
Revises: 0011
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('broadcasts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('snapshot_cursor', sa.Integer(), server_default='0', nullable=False))
        batch_op.add_column(sa.Column('snapshot_until', sa.Integer(), server_default='0', nullable=False))
        batch_op.add_column(sa.Column('audience_estimate', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('audience_rules', sa.Text(), nullable=True))


def downgrade():
    with op.batch_alter_table('broadcasts', schema=None) as batch_op:
        batch_op.drop_column('audience_rules')
        batch_op.drop_column('audience_estimate')
        batch_op.drop_column('snapshot_until')
        batch_op.drop_column('snapshot_cursor')
