"""What an identity needs for deliverability: its bounce mailbox, its VERP domain, its DKIM key

- identities.bounce_mailbox_url: the IMAP mailbox its bounces come back to (a secret, like
  the transport URL); empty: none.
- identities.verp_domain: the domain of its VERP Return-Path; empty: the mailbox's own.
- identities.dkim_selector, dkim_private_key: DKIM signing of its SMTP mail (the key a secret);
  empty: not signed.

Revision ID: 0028
Revises: 0027
"""
from alembic import op
import sqlalchemy as sa

# revision identifiers, used by Alembic.
revision = '0028'
down_revision = '0027'
branch_labels = None
depends_on = None

def upgrade():
    with op.batch_alter_table('identities', schema=None) as batch_op:
        batch_op.add_column(sa.Column('bounce_mailbox_url', sa.Text(), server_default='', nullable=False))
        batch_op.add_column(sa.Column('verp_domain', sa.String(length=253), server_default='', nullable=False))
        batch_op.add_column(sa.Column('dkim_selector', sa.String(length=63), server_default='', nullable=False))
        batch_op.add_column(sa.Column('dkim_private_key', sa.Text(), server_default='', nullable=False))

def downgrade():
    with op.batch_alter_table('identities', schema=None) as batch_op:
        batch_op.drop_column('dkim_private_key')
        batch_op.drop_column('dkim_selector')
        batch_op.drop_column('verp_domain')
        batch_op.drop_column('bounce_mailbox_url')

