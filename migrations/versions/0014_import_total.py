"""Import total rows

- imports.total_rows: the file's rows, counted before the first is written, so the progress
  bar shows an exact total instead of an estimate from the first 64 KB.

Revision ID: 0014
Revises: 0013
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('imports', schema=None) as batch_op:
        batch_op.add_column(sa.Column('total_rows', sa.Integer(), nullable=True))


def downgrade():
    with op.batch_alter_table('imports', schema=None) as batch_op:
        batch_op.drop_column('total_rows')
