"""How a message's body is written (Markdown or HTML, and the compose mode last chosen), the
plain-text part when the owner writes it, attachments, and a template's design over Settings.

The sources (broadcasts, automation steps, transactional templates) get body_format, editor,
text_body and attachment_ids; their frozen revisions get body_format and attachment_ids, so a
revision says how its body was read; broadcasts get design_overrides. Every existing row is
Markdown, as it was written.

Revision ID: 0033
Revises: 0032
"""
from alembic import op
import sqlalchemy as sa

# revision identifiers, used by Alembic.
revision = '0033'
down_revision = '0032'
branch_labels = None
depends_on = None

SOURCES = ('broadcasts', 'automation_steps', 'transactional_templates')
FROZEN = ('revisions', 'automation_revisions', 'transactional_template_revisions')


def _format():
    return sa.Column('body_format', sa.String(length=16), server_default='markdown',
                     nullable=False)


def upgrade():
    for table in SOURCES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(_format())
            batch_op.add_column(sa.Column('editor', sa.String(length=16),
                                          server_default='markdown', nullable=False))
            batch_op.add_column(sa.Column('text_body', sa.Text(), nullable=True))
            batch_op.add_column(sa.Column('attachment_ids', sa.JSON(), nullable=True))
    with op.batch_alter_table('broadcasts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('design_overrides', sa.JSON(), nullable=True))
    for table in FROZEN:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(_format())
            batch_op.add_column(sa.Column('attachment_ids', sa.JSON(), nullable=True))


def downgrade():
    for table in FROZEN:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column('attachment_ids')
            batch_op.drop_column('body_format')
    with op.batch_alter_table('broadcasts', schema=None) as batch_op:
        batch_op.drop_column('design_overrides')
    for table in SOURCES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column('attachment_ids')
            batch_op.drop_column('text_body')
            batch_op.drop_column('editor')
            batch_op.drop_column('body_format')
