"""Attachments: files sent with a broadcast, an automation step or a transactional template.

A table of their own (name, the content type we decided, size, SHA-256, the bytes themselves,
who uploaded them), and on transactional_messages the ids a queued copy carries (a test send
of a draft has no revision to read them from).

Revision ID: 0036
Revises: 0035
"""
from alembic import op
import sqlalchemy as sa

# revision identifiers, used by Alembic.
revision = '0036'
down_revision = '0035'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'attachments',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('name', sa.String(length=200), nullable=False),
        sa.Column('content_type', sa.String(length=127), nullable=False),
        sa.Column('size', sa.Integer(), nullable=False),
        sa.Column('sha256', sa.String(length=64), nullable=False),
        sa.Column('data', sa.LargeBinary(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('uploaded_by', sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(['uploaded_by'], ['owners.id'],
                                name=op.f('fk_attachments_uploaded_by_owners'),
                                ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_attachments')),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table('attachments', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_attachments_sha256'), ['sha256'], unique=False)
    with op.batch_alter_table('transactional_messages', schema=None) as batch_op:
        batch_op.add_column(sa.Column('attachment_ids', sa.JSON(), nullable=True))


def downgrade():
    with op.batch_alter_table('transactional_messages', schema=None) as batch_op:
        batch_op.drop_column('attachment_ids')
    with op.batch_alter_table('attachments', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_attachments_sha256'))
    op.drop_table('attachments')
