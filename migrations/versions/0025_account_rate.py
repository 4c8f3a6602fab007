"""One ceiling per provider account: each identity's `account_rate`

- identities.account_rate: requests per second the identity's provider account allows (one
  SMTP message or one provider request each), shared by every identity sending through the
  same account, the smallest value set winning; NULL: none set on this identity.

Revision ID: 0025
Revises: 0024
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0025'
down_revision = '0024'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('identities', schema=None) as batch_op:
        batch_op.add_column(sa.Column('account_rate', sa.Float(), nullable=True))


def downgrade():
    with op.batch_alter_table('identities', schema=None) as batch_op:
        batch_op.drop_column('account_rate')
