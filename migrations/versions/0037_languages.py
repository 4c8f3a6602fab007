"""Languages: each person's page language, each reader's and each list's, the installation's
default for readers, the owner's texts per language, and a broadcast's or step's versions in
other languages (frozen with their revisions).

Revision ID: 0037
Revises: 0036
"""
from alembic import op
import sqlalchemy as sa

# revision identifiers, used by Alembic.
revision = '0037'
down_revision = '0036'
branch_labels = None
depends_on = None

COLUMNS = [
    ('owners', sa.Column('locale', sa.String(length=35), nullable=True)),
    ('subscribers', sa.Column('locale', sa.String(length=35), nullable=True)),
    ('mailing_lists', sa.Column('language', sa.String(length=35), nullable=True)),
    ('site_settings', sa.Column('default_language', sa.String(length=35), server_default='en',
                                nullable=False)),
    ('site_settings', sa.Column('localized_texts', sa.JSON(), nullable=True)),
    ('broadcasts', sa.Column('versions', sa.JSON(), nullable=True)),
    ('automation_steps', sa.Column('versions', sa.JSON(), nullable=True)),
    ('revisions', sa.Column('versions', sa.JSON(), nullable=True)),
    ('automation_revisions', sa.Column('versions', sa.JSON(), nullable=True)),
    # Shares the frozen columns (FrozenContent); one message for now (None).
    ('transactional_template_revisions', sa.Column('versions', sa.JSON(), nullable=True)),
]


def upgrade():
    # Nullable or with a default: no table is rewritten (a million subscribers stay put).
    for table, column in COLUMNS:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(column)
    # The languages readers have, read at Send: partial, readers without one add no entry.
    op.create_index('ix_subscribers_locale', 'subscribers', ['locale'], unique=False,
                    postgresql_where=sa.text('locale IS NOT NULL'),
                    sqlite_where=sa.text('locale IS NOT NULL'))


def downgrade():
    op.drop_index('ix_subscribers_locale', table_name='subscribers')
    for table, column in reversed(COLUMNS):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column(column.name)
