"""The reputation guard: marks of bounced and complained messages, the guard's pauses, its
lines in Settings, and the indexes that read an identity's sends by time

- reputation_marks: one row per sent message that bounced hard or drew a complaint (UNIQUE per
  message and kind), with its identity and the moment it was sent.
- reputation_pauses: each pause by the guard, with its reason and figures.
- site_settings: complaint and hard-bounce warning and limit lines, in percent (Gmail's).
- deliveries (broadcast_id, sent_at), automation_messages (automation_id, sent_at),
  transactional_messages (identity_id, sent_at): partial, WHERE sent_at IS NOT NULL.

Revision ID: 0030
Revises: 0029
"""
from alembic import op
import sqlalchemy as sa

# revision identifiers, used by Alembic.
revision = '0030'
down_revision = '0029'
branch_labels = None
depends_on = None

SENT = sa.text('sent_at IS NOT NULL')


def upgrade():
    op.create_table(
        'reputation_marks',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('identity_key', sa.Integer(), nullable=False),
        sa.Column('kind', sa.String(length=16), nullable=False),
        sa.Column('source_kind', sa.String(length=24), nullable=False),
        sa.Column('source_id', sa.Integer(), nullable=False),
        sa.Column('sent_at', sa.DateTime(), nullable=False),
        sa.Column('refused', sa.Boolean(), nullable=False),
        sa.Column('recorded_at', sa.DateTime(), nullable=False),
        sa.CheckConstraint("kind IN ('bounced', 'complained')", name=op.f('ck_reputation_marks_kind')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_reputation_marks')),
        sa.UniqueConstraint('source_kind', 'source_id', 'kind', name='uq_reputation_marks_message'),
    )
    op.create_index('ix_reputation_marks_identity_sent', 'reputation_marks',
                    ['identity_key', 'sent_at'], unique=False)
    op.create_table(
        'reputation_pauses',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('identity_key', sa.Integer(), nullable=False),
        sa.Column('paused_at', sa.DateTime(), nullable=False),
        sa.Column('reason', sa.Text(), nullable=False),
        sa.Column('figures', sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_reputation_pauses')),
    )
    op.create_index('ix_reputation_pauses_identity', 'reputation_pauses',
                    ['identity_key', 'paused_at'], unique=False)
    with op.batch_alter_table('site_settings', schema=None) as batch_op:
        batch_op.add_column(sa.Column('complaint_warning_pct', sa.Float(), server_default='0.1', nullable=False))
        batch_op.add_column(sa.Column('complaint_limit_pct', sa.Float(), server_default='0.3', nullable=False))
        batch_op.add_column(sa.Column('bounce_warning_pct', sa.Float(), server_default='2.0', nullable=False))
        batch_op.add_column(sa.Column('bounce_limit_pct', sa.Float(), server_default='5.0', nullable=False))
    op.create_index('ix_deliveries_broadcast_sent', 'deliveries', ['broadcast_id', 'sent_at'],
                    unique=False, postgresql_where=SENT, sqlite_where=SENT)
    op.create_index('ix_automation_messages_automation_sent', 'automation_messages',
                    ['automation_id', 'sent_at'], unique=False,
                    postgresql_where=SENT, sqlite_where=SENT)
    op.create_index('ix_transactional_identity_sent', 'transactional_messages',
                    ['identity_id', 'sent_at'], unique=False,
                    postgresql_where=SENT, sqlite_where=SENT)


def downgrade():
    op.drop_index('ix_transactional_identity_sent', table_name='transactional_messages')
    op.drop_index('ix_automation_messages_automation_sent', table_name='automation_messages')
    op.drop_index('ix_deliveries_broadcast_sent', table_name='deliveries')
    with op.batch_alter_table('site_settings', schema=None) as batch_op:
        batch_op.drop_column('bounce_limit_pct')
        batch_op.drop_column('bounce_warning_pct')
        batch_op.drop_column('complaint_limit_pct')
        batch_op.drop_column('complaint_warning_pct')
    op.drop_index('ix_reputation_pauses_identity', table_name='reputation_pauses')
    op.drop_table('reputation_pauses')
    op.drop_index('ix_reputation_marks_identity_sent', table_name='reputation_marks')
    op.drop_table('reputation_marks')
