"""A confirmed bulk action's set of people

- bulk_action_members(action_id, subscriber_id): the people a bulk action was confirmed for,
  written in the transaction of its `bulk_actions` row (the selected ids, or everyone the
  filter matched at that moment). The worker acts only on them: someone who comes to match
  the filter afterwards is never included (a bulk erase confirmed for one person erased
  three). Each batch deletes the rows it went through, so the table holds only what is still
  to do. No FOREIGN KEYs (a person erased meanwhile is what a run must find missing); on
  SQLite a WITHOUT ROWID table, its primary key the rows themselves.
- bulk_actions.no_longer_matched: the people of the set left alone because, when the worker
  reached them, they no longer matched the filter (or were erased meanwhile).
- An action still queued or running has no set to act on (it was confirmed before sets were
  stored), and its filter now would reach whoever matches today: it is stopped, saying so,
  rather than finished as if nobody were left or run over people nobody confirmed.

Revision ID: 0023
Revises: 0022
"""
from datetime import datetime, timezone

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0023'
down_revision = '0022'
branch_labels = None
depends_on = None

UPGRADE_STOPPED = ("Broadside was upgraded while this action waited: the batches before "
                   "the upgrade are done. Confirm it again for the rest; a confirmation "
                   "now fixes exactly who it is for.")


def upgrade():
    op.create_table(
        'bulk_action_members',
        sa.Column('action_id', sa.Integer(), autoincrement=False, nullable=False),
        sa.Column('subscriber_id', sa.Integer(), autoincrement=False, nullable=False),
        sa.PrimaryKeyConstraint('action_id', 'subscriber_id',
                                name=op.f('pk_bulk_action_members')),
        sqlite_with_rowid=False,
    )
    with op.batch_alter_table('bulk_actions') as batch:
        batch.add_column(sa.Column('no_longer_matched', sa.Integer(), server_default='0',
                                   nullable=False))
    op.execute(sa.text(
        "UPDATE bulk_actions SET status = 'failed', finished_at = :now, error = :error "
        "WHERE status IN ('queued', 'running')"
    ).bindparams(now=datetime.now(timezone.utc).replace(tzinfo=None), error=UPGRADE_STOPPED))


def downgrade():
    with op.batch_alter_table('bulk_actions') as batch:
        batch.drop_column('no_longer_matched')
    op.drop_table('bulk_action_members')
