"""The invitations whose body (a live link to join with a role) is still kept: the worker
removes them as soon as they are settled, as it does password resets, from a small index of
their own (broadside.delivery.content_retention).

Revision ID: 0032
Revises: 0031
"""
from alembic import op
import sqlalchemy as sa

# revision identifiers, used by Alembic.
revision = '0032'
down_revision = '0031'
branch_labels = None
depends_on = None

KEPT = sa.text("content_removed_at IS NULL AND kind = 'invitation'")
KEPT_PG = sa.text("content_removed_at IS NULL AND kind::text = 'invitation'::text")


def upgrade():
    with op.batch_alter_table('transactional_messages', schema=None) as batch_op:
        batch_op.create_index('ix_transactional_invitations_kept', ['created_at'], unique=False,
                              sqlite_where=KEPT, postgresql_where=KEPT_PG)


def downgrade():
    with op.batch_alter_table('transactional_messages', schema=None) as batch_op:
        batch_op.drop_index('ix_transactional_invitations_kept', sqlite_where=KEPT,
                            postgresql_where=KEPT_PG)
