"""The owner's message templates and reusable content blocks.

- message_templates: a starting point for a broadcast (name unique, description, subject,
  preheader, body with its format and compose mode, design changes over Settings as JSON,
  who made it: SET NULL when that person is removed). The three built-in templates are code,
  not rows (broadside/campaigns/content/builtin.py).
- content_blocks: a named piece of a body (name unique), expanded where a body names it.

Revision ID: 0035
Revises: 0034
"""
from alembic import op
import sqlalchemy as sa

# revision identifiers, used by Alembic.
revision = '0035'
down_revision = '0034'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('message_templates',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('description', sa.String(length=300), nullable=False),
    sa.Column('subject', sa.String(length=300), nullable=False),
    sa.Column('preheader', sa.String(length=300), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('body_format', sa.String(length=16), server_default='markdown', nullable=False),
    sa.Column('editor', sa.String(length=16), server_default='markdown', nullable=False),
    sa.Column('design_overrides', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('created_by', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['created_by'], ['owners.id'], name=op.f('fk_message_templates_created_by_owners'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_message_templates')),
    sa.UniqueConstraint('name', name='uq_message_templates_name'),
    sqlite_autoincrement=True
    )
    op.create_table('content_blocks',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=60), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('body_format', sa.String(length=16), server_default='markdown', nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_content_blocks')),
    sa.UniqueConstraint('name', name='uq_content_blocks_name'),
    sqlite_autoincrement=True
    )


def downgrade():
    op.drop_table('content_blocks')
    op.drop_table('message_templates')
