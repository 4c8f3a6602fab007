"""Owners' session epoch

- owners.session_epoch: counts the owner's password changes. A signed-in session carries the
  epoch it was opened in and is honoured only while the owner's is still the same, so a new
  password (a reset link, `owner reset-password`) signs every other session out; a reset link
  is signed over it, so it works once.

Revision ID: 0020
Revises: 0019
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0020'
down_revision = '0019'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('owners', schema=None) as batch_op:
        batch_op.add_column(sa.Column('session_epoch', sa.Integer(), server_default='0',
                                      nullable=False))


def downgrade():
    with op.batch_alter_table('owners', schema=None) as batch_op:
        batch_op.drop_column('session_epoch')
