"""Owners' sessions, one row per signed-in browser

- owner_sessions: the SHA-256 of each signed-in browser's session token (the cookie holds the
  token). A session counts only while its row exists, so signing out ends it on the server
  (a copied cookie stops working) without signing the owner's other browsers out; a new
  password deletes all of the owner's rows. Sessions opened before this revision carry no
  token and end: everybody signs in once more.

Revision ID: 0022
Revises: 0021
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0022'
down_revision = '0021'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('owner_sessions',
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('owner_id', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('last_seen_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['owner_id'], ['owners.id'],
                            name=op.f('fk_owner_sessions_owner_id_owners'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('token_hash', name=op.f('pk_owner_sessions'))
    )
    with op.batch_alter_table('owner_sessions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_owner_sessions_owner_id'), ['owner_id'], unique=False)


def downgrade():
    with op.batch_alter_table('owner_sessions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_owner_sessions_owner_id'))
    op.drop_table('owner_sessions')
