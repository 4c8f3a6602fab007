"""Transactional templates, and what a transactional message keeps of its request and content

- transactional_templates: the owner's templates for the API's one-off mail (a password reset,
  a receipt), edited; a name unique among those not deleted (a template is only marked
  deleted, so what was sent from it keeps its revisions).
- transactional_template_revisions: a template frozen when saved (invariant 8), the content a
  message is rendered from.
- transactional_messages: the revision a message came from; the API client's Idempotency-Key
  and the hash of its request, written in the row's own INSERT (UNIQUE: one row per key);
  after the retention, the content's SHA-256 and when the content was removed, with a partial
  index over the messages whose content is still kept.

Revision ID: 0024
Revises: 0023
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0024'
down_revision = '0023'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('transactional_templates',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('subject', sa.String(length=300), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('identity_id', sa.Integer(), nullable=True),
    sa.Column('essential', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('deleted_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['identity_id'], ['identities.id'], name=op.f('fk_transactional_templates_identity_id_identities')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_transactional_templates'))
    )
    with op.batch_alter_table('transactional_templates', schema=None) as batch_op:
        batch_op.create_index('uq_transactional_templates_live_name', ['name'], unique=True, sqlite_where=sa.text('deleted_at IS NULL'), postgresql_where=sa.text('deleted_at IS NULL'))

    op.create_table('transactional_template_revisions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('template_id', sa.Integer(), nullable=False),
    sa.Column('identity_id', sa.Integer(), nullable=True),
    sa.Column('essential', sa.Boolean(), nullable=False),
    sa.Column('subject', sa.String(length=300), nullable=False),
    sa.Column('preheader', sa.String(length=300), nullable=False),
    sa.Column('body_markdown', sa.Text(), nullable=False),
    sa.Column('html_template', sa.Text(), nullable=False),
    sa.Column('text_template', sa.Text(), nullable=False),
    sa.Column('from_name', sa.String(length=200), nullable=False),
    sa.Column('from_email', sa.String(length=320), nullable=False),
    sa.Column('postal_address', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['identity_id'], ['identities.id'], name=op.f('fk_transactional_template_revisions_identity_id_identities')),
    sa.ForeignKeyConstraint(['template_id'], ['transactional_templates.id'], name=op.f('fk_transactional_template_revisions_template_id_transactional_templates')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_transactional_template_revisions'))
    )
    with op.batch_alter_table('transactional_template_revisions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_transactional_template_revisions_template_id'), ['template_id'], unique=False)

    with op.batch_alter_table('transactional_messages', schema=None) as batch_op:
        batch_op.add_column(sa.Column('template_revision_id', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('idempotency_key', sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column('request_hash', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('content_sha256', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('content_removed_at', sa.DateTime(), nullable=True))
        batch_op.create_index('ix_transactional_content_kept', ['created_at'], unique=False, sqlite_where=sa.text('content_removed_at IS NULL'), postgresql_where=sa.text('content_removed_at IS NULL'))
        batch_op.create_index(batch_op.f('ix_transactional_messages_template_revision_id'), ['template_revision_id'], unique=False)
        batch_op.create_unique_constraint(batch_op.f('uq_transactional_messages_idempotency_key'), ['idempotency_key'])
        batch_op.create_foreign_key(batch_op.f('fk_transactional_messages_template_revision_id_transactional_template_revisions'), 'transactional_template_revisions', ['template_revision_id'], ['id'])



def downgrade():
    with op.batch_alter_table('transactional_messages', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_transactional_messages_template_revision_id_transactional_template_revisions'), type_='foreignkey')
        batch_op.drop_constraint(batch_op.f('uq_transactional_messages_idempotency_key'), type_='unique')
        batch_op.drop_index(batch_op.f('ix_transactional_messages_template_revision_id'))
        batch_op.drop_index('ix_transactional_content_kept', sqlite_where=sa.text('content_removed_at IS NULL'), postgresql_where=sa.text('content_removed_at IS NULL'))
        batch_op.drop_column('content_removed_at')
        batch_op.drop_column('content_sha256')
        batch_op.drop_column('request_hash')
        batch_op.drop_column('idempotency_key')
        batch_op.drop_column('template_revision_id')

    with op.batch_alter_table('transactional_template_revisions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_transactional_template_revisions_template_id'))

    op.drop_table('transactional_template_revisions')
    with op.batch_alter_table('transactional_templates', schema=None) as batch_op:
        batch_op.drop_index('uq_transactional_templates_live_name', sqlite_where=sa.text('deleted_at IS NULL'), postgresql_where=sa.text('deleted_at IS NULL'))

    op.drop_table('transactional_templates')
