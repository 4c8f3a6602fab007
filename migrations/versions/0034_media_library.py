"""The media library: images kept in the database (a `media` row each, its bytes per variant in
`media_files`, so listing never reads them), named by the SHA-256 of the uploaded file.

Revision ID: 0034
Revises: 0033
"""
from alembic import op
import sqlalchemy as sa

# revision identifiers, used by Alembic.
revision = '0034'
down_revision = '0033'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'media',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('sha256', sa.String(length=64), nullable=False),
        sa.Column('ext', sa.String(length=8), nullable=False),
        sa.Column('content_type', sa.String(length=32), nullable=False),
        sa.Column('width', sa.Integer(), nullable=False),
        sa.Column('height', sa.Integer(), nullable=False),
        sa.Column('alt', sa.Text(), nullable=False),
        sa.Column('original_name', sa.String(length=255), nullable=False),
        sa.Column('original_bytes', sa.Integer(), nullable=False),
        sa.Column('bytes_1x', sa.Integer(), nullable=False),
        sa.Column('bytes_2x', sa.Integer(), nullable=True),
        sa.Column('has_2x', sa.Boolean(), nullable=False),
        sa.Column('animated', sa.Boolean(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('uploaded_by', sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(['uploaded_by'], ['owners.id'], ondelete='SET NULL',
                                name=op.f('fk_media_uploaded_by_owners')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_media')),
        sa.UniqueConstraint('sha256', name=op.f('uq_media_sha256')),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table('media', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_media_uploaded_by'), ['uploaded_by'], unique=False)
    op.create_table(
        'media_files',
        sa.Column('media_id', sa.Integer(), nullable=False),
        sa.Column('variant', sa.String(length=4), nullable=False),
        sa.Column('data', sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(['media_id'], ['media.id'], ondelete='CASCADE',
                                name=op.f('fk_media_files_media_id_media')),
        sa.PrimaryKeyConstraint('media_id', 'variant', name=op.f('pk_media_files')),
    )


def downgrade():
    op.drop_table('media_files')
    with op.batch_alter_table('media', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_media_uploaded_by'))
    op.drop_table('media')
