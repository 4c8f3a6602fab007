"""Bounce mailboxes: where each one's reading stands, and the messages read from it

- bounce_mailboxes: one row per mailbox (its server, login and folder, hashed): UIDVALIDITY,
  the highest UID read, the counts and the last error the System page shows.
- mailbox_messages: each message processed, written in the transaction of its effect; UNIQUE
  per mailbox and (UIDVALIDITY, UID), and per mailbox and Message-ID: applied once.

Revision ID: 0029
Revises: 0028
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0029'
down_revision = '0028'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('bounce_mailboxes',
    sa.Column('key', sa.String(length=40), nullable=False),
    sa.Column('label', sa.String(length=300), nullable=False),
    sa.Column('uid_validity', sa.BigInteger(), nullable=True),
    sa.Column('last_uid', sa.BigInteger(), nullable=False),
    sa.Column('processed_count', sa.BigInteger(), nullable=False),
    sa.Column('unrecognised_count', sa.BigInteger(), nullable=False),
    sa.Column('last_read_at', sa.DateTime(), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('last_error_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('key', name=op.f('pk_bounce_mailboxes'))
    )
    op.create_table('mailbox_messages',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('mailbox_key', sa.String(length=40), nullable=False),
    sa.Column('uid_validity', sa.BigInteger(), nullable=False),
    sa.Column('uid', sa.BigInteger(), nullable=False),
    sa.Column('message_key', sa.String(length=300), nullable=False),
    sa.Column('outcome', sa.String(length=16), nullable=False),
    sa.Column('detail', sa.Text(), nullable=False),
    sa.Column('processed_at', sa.DateTime(), nullable=False),
    sa.CheckConstraint("outcome IN ('hard', 'soft', 'complaint', 'unmatched', 'unrecognised')", name=op.f('ck_mailbox_messages_outcome')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_mailbox_messages')),
    sa.UniqueConstraint('mailbox_key', 'message_key', name='uq_mailbox_messages_message'),
    sa.UniqueConstraint('mailbox_key', 'uid_validity', 'uid', name='uq_mailbox_messages_uid')
    )


def downgrade():
    op.drop_table('mailbox_messages')
    op.drop_table('bounce_mailboxes')
