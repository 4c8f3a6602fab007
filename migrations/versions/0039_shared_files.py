"""Files every host needs, in the database: the logo's bytes (`brand_files`, by the
content-addressed name its URL carries) and an uploaded CSV waiting for its import
(`import_chunks`, about 1 MB a row, ordered by `seq`, gone with the import's run or its row).

A logo stored before this revision is a file under the instance folder's `brand/`; the
logo route takes it into `brand_files` the first time it is asked for (the file stays).
An import queued before it has its file under `imports/`; it is not carried over: if the worker
finds no bytes for it when it starts, it fails with "upload the file again".
The downgrade writes every stored logo back under `brand/` before dropping the tables.

Revision ID: 0039
Revises: 0038
"""
from pathlib import Path

from alembic import op
import sqlalchemy as sa
from flask import current_app

# revision identifiers, used by Alembic.
revision = '0039'
down_revision = '0038'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'brand_files',
        sa.Column('name', sa.String(length=40), nullable=False),
        sa.Column('content_type', sa.String(length=32), nullable=False),
        sa.Column('data', sa.LargeBinary(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint('name', name=op.f('pk_brand_files')),
    )
    op.create_table(
        'import_chunks',
        sa.Column('import_id', sa.Integer(), nullable=False),
        sa.Column('seq', sa.Integer(), autoincrement=False, nullable=False),
        sa.Column('data', sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(['import_id'], ['imports.id'], ondelete='CASCADE',
                                name=op.f('fk_import_chunks_import_id_imports')),
        sa.PrimaryKeyConstraint('import_id', 'seq', name=op.f('pk_import_chunks')),
    )


def downgrade():
    # The logos go back to where the older code looks for them (never lose a logo).
    folder = Path(current_app.instance_path) / 'brand'
    rows = op.get_bind().execute(sa.text('SELECT name, data FROM brand_files')).all()
    if rows:
        folder.mkdir(parents=True, exist_ok=True)
    for name, data in rows:
        if not (folder / name).is_file():
            (folder / name).write_bytes(bytes(data))
    op.drop_table('import_chunks')
    op.drop_table('brand_files')
