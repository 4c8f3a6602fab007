"""The index on subscribers.name goes: no query reads it (issue 19 point 1: the import)

Every query over a person's name asks for lower(name) (a segment's conditions), ILIKE
(PostgreSQL's subscriber search) or a case-insensitive LIKE on a column of the default
collation (SQLite's), and nothing sorts by name; a plain index on the name serves none of
them. It cost every new person an entry (a 200,000-row first import on PostgreSQL: 0.96x the
time without it), kept a re-import that renames people from PostgreSQL's HOT updates, and
took ~30 MB at a million people.

Revision ID: 0018
Revises: 0017
"""
from alembic import op


# revision identifiers, used by Alembic.
revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('subscribers', schema=None) as batch_op:
        batch_op.drop_index('ix_subscribers_name')


def downgrade():
    with op.batch_alter_table('subscribers', schema=None) as batch_op:
        batch_op.create_index('ix_subscribers_name', ['name'], unique=False)
