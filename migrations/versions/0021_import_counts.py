"""An import's blank rows and the people it welcomed, counted for its result

- imports.empty_rows: the file's blank rows, skipped (they were dropped without a word).
- imports.welcomed: the people an import asked to welcome who entered a welcome series; the
  result page says so, or that the list had no enabled welcome automation (it used to say
  welcomes were sent either way).

Revision ID: 0021
Revises: 0020
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0021'
down_revision = '0020'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('imports') as batch:
        batch.add_column(sa.Column('empty_rows', sa.Integer(), server_default='0',
                                   nullable=False))
        batch.add_column(sa.Column('welcomed', sa.Integer(), server_default='0',
                                   nullable=False))


def downgrade():
    with op.batch_alter_table('imports') as batch:
        batch.drop_column('welcomed')
        batch.drop_column('empty_rows')
