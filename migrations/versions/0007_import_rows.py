"""Imports the owner can act on

- imports.consent: how the imported people agreed to receive mail ("opted_in": added active;
  "confirm": added unconfirmed and each sent the double opt-in email). Existing imports were
  all "opted_in".
- imports.header: the file's header as uploaded, for the rejected-rows CSV.
- imports.skipped_unsubscribed, skipped_suppressed, warnings, asked: what the report counts.
- import_rejections.kind ("rejected" or "warning") and .fields (the row as uploaded).

Revision ID: 0007
Revises: 0006
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('imports', schema=None) as batch_op:
        batch_op.add_column(sa.Column('consent', sa.String(length=16), server_default='opted_in', nullable=False))
        batch_op.add_column(sa.Column('header', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('skipped_unsubscribed', sa.Integer(), server_default='0', nullable=False))
        batch_op.add_column(sa.Column('skipped_suppressed', sa.Integer(), server_default='0', nullable=False))
        batch_op.add_column(sa.Column('warnings', sa.Integer(), server_default='0', nullable=False))
        batch_op.add_column(sa.Column('asked', sa.Integer(), server_default='0', nullable=False))

    with op.batch_alter_table('import_rejections', schema=None) as batch_op:
        batch_op.add_column(sa.Column('kind', sa.String(length=16), server_default='rejected', nullable=False))
        batch_op.add_column(sa.Column('fields', sa.JSON(), nullable=True))


def downgrade():
    with op.batch_alter_table('import_rejections', schema=None) as batch_op:
        batch_op.drop_column('fields')
        batch_op.drop_column('kind')

    with op.batch_alter_table('imports', schema=None) as batch_op:
        batch_op.drop_column('asked')
        batch_op.drop_column('warnings')
        batch_op.drop_column('skipped_suppressed')
        batch_op.drop_column('skipped_unsubscribed')
        batch_op.drop_column('header')
        batch_op.drop_column('consent')
