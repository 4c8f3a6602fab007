"""What a transactional message keeps, and for how long; revisions in flight

- site_settings.content_retention_days: how long a transactional or test message keeps its
  rendered subject and body (30 days unless the owner sets otherwise); afterwards the worker
  keeps only their SHA-256 and the revision they came from
  (broadside.delivery.content_retention).
- ix_transactional_resets_kept: the password resets whose body (a live sign-in link) is
  still kept, which the worker removes as soon as they are settled: a small index, so that
  pass reads only them, however much other mail is kept.
- ix_transactional_subscriber and ix_transactional_to_email: a person's transactional mail,
  by id or by address, which their page in the dashboard now lists (and their export and
  erase select), read from two index lookups rather than every message.
- ix_transactional_sent_revision and ix_automation_messages_sent: the messages sent in the
  last hour by revision (broadside.delivery.revisions_in_flight), read as an index range
  rather than every message ever sent. Both partial, so a message not sent from a template,
  or an automation message not sent yet (entering writes 100,000 at a time), costs nothing.

Revision ID: 0027
Revises: 0026
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0027'
down_revision = '0026'
branch_labels = None
depends_on = None

RESETS = sa.text("content_removed_at IS NULL AND kind = 'password_reset'")
RESETS_PG = sa.text("content_removed_at IS NULL AND kind::text = 'password_reset'::text")
FROM_TEMPLATE = sa.text("template_revision_id IS NOT NULL")
SENT = sa.text("sent_at IS NOT NULL")


def upgrade():
    with op.batch_alter_table('site_settings', schema=None) as batch_op:
        batch_op.add_column(sa.Column('content_retention_days', sa.Integer(), server_default='30',
                                      nullable=False))
    with op.batch_alter_table('transactional_messages', schema=None) as batch_op:
        batch_op.create_index('ix_transactional_resets_kept', ['created_at'], unique=False,
                              sqlite_where=RESETS, postgresql_where=RESETS_PG)
        batch_op.create_index('ix_transactional_subscriber', ['subscriber_id'], unique=False)
        batch_op.create_index('ix_transactional_to_email', ['to_email'], unique=False)
        batch_op.create_index('ix_transactional_sent_revision', ['sent_at', 'template_revision_id'],
                              unique=False, sqlite_where=FROM_TEMPLATE,
                              postgresql_where=FROM_TEMPLATE)
    with op.batch_alter_table('automation_messages', schema=None) as batch_op:
        batch_op.create_index('ix_automation_messages_sent', ['sent_at', 'revision_id'],
                              unique=False, sqlite_where=SENT, postgresql_where=SENT)


def downgrade():
    with op.batch_alter_table('automation_messages', schema=None) as batch_op:
        batch_op.drop_index('ix_automation_messages_sent', sqlite_where=SENT, postgresql_where=SENT)
    with op.batch_alter_table('transactional_messages', schema=None) as batch_op:
        batch_op.drop_index('ix_transactional_sent_revision', sqlite_where=FROM_TEMPLATE,
                            postgresql_where=FROM_TEMPLATE)
        batch_op.drop_index('ix_transactional_to_email')
        batch_op.drop_index('ix_transactional_subscriber')
        batch_op.drop_index('ix_transactional_resets_kept', sqlite_where=RESETS,
                            postgresql_where=RESETS_PG)
    with op.batch_alter_table('site_settings', schema=None) as batch_op:
        batch_op.drop_column('content_retention_days')
