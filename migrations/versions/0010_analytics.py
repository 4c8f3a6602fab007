"""Reader analytics, privacy first

- broadcasts.tracking: off | aggregate | per_person (NULL on a draft: Settings' default,
  frozen at Send).
- mailing_lists.per_person_tracking: the owner's explicit yes to per-person rows for a list.
- site_settings.default_tracking: what new broadcasts start with ('off').
- analytics_links: a broadcast's tracked links with their click counts (no person).
- analytics_days: a broadcast's opens and clicks per day after sending (no person).
- analytics_people: per-person mode only: the first open or click of one delivery.

Revision ID: 0010
Revises: 0009
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('broadcasts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('tracking', sa.String(length=16), nullable=True))
    with op.batch_alter_table('mailing_lists', schema=None) as batch_op:
        batch_op.add_column(sa.Column('per_person_tracking', sa.Boolean(), server_default=sa.false(),
                                      nullable=False))
    with op.batch_alter_table('site_settings', schema=None) as batch_op:
        batch_op.add_column(sa.Column('default_tracking', sa.String(length=16), server_default='off',
                                      nullable=False))
    op.create_table('analytics_links',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('broadcast_id', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('url', sa.Text(), nullable=False),
    sa.Column('clicks', sa.Integer(), nullable=False),
    sa.Column('bot_clicks', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['broadcast_id'], ['broadcasts.id'], name=op.f('fk_analytics_links_broadcast_id_broadcasts'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_analytics_links')),
    sa.UniqueConstraint('broadcast_id', 'position', name=op.f('uq_analytics_links_broadcast_id'))
    )
    op.create_table('analytics_days',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('broadcast_id', sa.Integer(), nullable=False),
    sa.Column('day', sa.Integer(), nullable=False),
    sa.Column('opens', sa.Integer(), nullable=False),
    sa.Column('bot_opens', sa.Integer(), nullable=False),
    sa.Column('clicks', sa.Integer(), nullable=False),
    sa.Column('bot_clicks', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['broadcast_id'], ['broadcasts.id'], name=op.f('fk_analytics_days_broadcast_id_broadcasts'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_analytics_days')),
    sa.UniqueConstraint('broadcast_id', 'day', name=op.f('uq_analytics_days_broadcast_id'))
    )
    op.create_table('analytics_people',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('broadcast_id', sa.Integer(), nullable=False),
    sa.Column('delivery_id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.Text(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('first_at', sa.DateTime(), nullable=False),
    sa.CheckConstraint("kind IN ('open', 'click')", name=op.f('ck_analytics_people_kind')),
    sa.ForeignKeyConstraint(['broadcast_id'], ['broadcasts.id'], name=op.f('fk_analytics_people_broadcast_id_broadcasts'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['delivery_id'], ['deliveries.id'], name=op.f('fk_analytics_people_delivery_id_deliveries'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_analytics_people')),
    sa.UniqueConstraint('delivery_id', 'kind', 'position', name=op.f('uq_analytics_people_delivery_id'))
    )
    with op.batch_alter_table('analytics_people', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_analytics_people_broadcast_id'), ['broadcast_id'], unique=False)


def downgrade():
    with op.batch_alter_table('analytics_people', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_analytics_people_broadcast_id'))
    op.drop_table('analytics_people')
    op.drop_table('analytics_days')
    op.drop_table('analytics_links')
    with op.batch_alter_table('site_settings', schema=None) as batch_op:
        batch_op.drop_column('default_tracking')
    with op.batch_alter_table('mailing_lists', schema=None) as batch_op:
        batch_op.drop_column('per_person_tracking')
    with op.batch_alter_table('broadcasts', schema=None) as batch_op:
        batch_op.drop_column('tracking')
