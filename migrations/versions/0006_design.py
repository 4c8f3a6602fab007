"""Settings -> Design: the email layout's look, the logo, and the sign-up texts

- site_settings.brand_colour, email_width, email_font, footer_text: the email layout's look
  (defaults: today's layout, so existing installations see no change until they choose).
- site_settings.logo_file, logo_width, logo_height, logo_url: the logo stored under the
  instance path (NULL: no logo).
- site_settings.signup_texts: the owner's words for the double opt-in email and the sign-up
  pages (NULL: the defaults).

Revision ID: 0006
Revises: 0005
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('site_settings', schema=None) as batch_op:
        batch_op.add_column(sa.Column('brand_colour', sa.String(length=7), server_default='#1f5fbf', nullable=False))
        batch_op.add_column(sa.Column('email_width', sa.Integer(), server_default='600', nullable=False))
        batch_op.add_column(sa.Column('email_font', sa.String(length=20), server_default='system', nullable=False))
        batch_op.add_column(sa.Column('footer_text', sa.Text(), server_default='', nullable=False))
        batch_op.add_column(sa.Column('logo_file', sa.String(length=80), nullable=True))
        batch_op.add_column(sa.Column('logo_width', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('logo_height', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('logo_url', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('signup_texts', sa.JSON(), nullable=True))


def downgrade():
    with op.batch_alter_table('site_settings', schema=None) as batch_op:
        batch_op.drop_column('signup_texts')
        batch_op.drop_column('logo_url')
        batch_op.drop_column('logo_height')
        batch_op.drop_column('logo_width')
        batch_op.drop_column('logo_file')
        batch_op.drop_column('footer_text')
        batch_op.drop_column('email_font')
        batch_op.drop_column('email_width')
        batch_op.drop_column('brand_colour')
