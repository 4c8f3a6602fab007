"""Single-use codes minted in the send log

- codes: one per send-log row (a delivery or an automation message) of a broadcast or step
  that mints them: the code (UNIQUE across the installation), its prefix, the row it was
  minted in (UNIQUE per kind and row: a row claimed again keeps its code), whose it is, from
  which message, when it was minted and when redeemed.
- broadcasts.codes_prefix, automation_steps.codes_prefix: the owner's setting (NULL: off);
  revisions.codes_prefix, automation_revisions.codes_prefix: the same frozen with the content.

Revision ID: 0026
Revises: 0025
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0026'
down_revision = '0025'
branch_labels = None
depends_on = None

_PREFIXED = ('broadcasts', 'revisions', 'automation_steps', 'automation_revisions')


def upgrade():
    op.create_table('codes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('code', sa.String(length=21), nullable=False),
    sa.Column('prefix', sa.String(length=12), nullable=False),
    sa.Column('source_kind', sa.String(length=24), nullable=False),
    sa.Column('source_id', sa.Integer(), nullable=False),
    sa.Column('subscriber_id', sa.Integer(), nullable=True),
    sa.Column('broadcast_id', sa.Integer(), nullable=True),
    sa.Column('automation_id', sa.Integer(), nullable=True),
    sa.Column('step_id', sa.Integer(), nullable=True),
    sa.Column('minted_at', sa.DateTime(), nullable=False),
    sa.Column('redeemed_at', sa.DateTime(), nullable=True),
    sa.CheckConstraint("source_kind IN ('delivery', 'automation_message')", name=op.f('ck_codes_source_kind')),
    sa.ForeignKeyConstraint(['broadcast_id'], ['broadcasts.id'], name=op.f('fk_codes_broadcast_id_broadcasts'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['subscriber_id'], ['subscribers.id'], name=op.f('fk_codes_subscriber_id_subscribers'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_codes')),
    sa.UniqueConstraint('code', name=op.f('uq_codes_code')),
    sa.UniqueConstraint('source_kind', 'source_id', name='uq_codes_source')
    )
    with op.batch_alter_table('codes', schema=None) as batch_op:
        batch_op.create_index('ix_codes_subscriber', ['subscriber_id', 'id'], unique=False)
    for table in _PREFIXED:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column('codes_prefix', sa.String(length=12), nullable=True))


def downgrade():
    for table in reversed(_PREFIXED):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column('codes_prefix')
    with op.batch_alter_table('codes', schema=None) as batch_op:
        batch_op.drop_index('ix_codes_subscriber')
    op.drop_table('codes')
