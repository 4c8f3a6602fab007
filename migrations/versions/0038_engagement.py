"""Engagement: readers' time zones, a list with no tracking at all, resending to those who did
not open, A/B tests (the split recorded on each delivery), sending at each reader's own hour,
and automations triggered by a feed's new items.

Revision ID: 0038
Revises: 0037
"""
from alembic import op
import sqlalchemy as sa

# revision identifiers, used by Alembic.
revision = '0038'
down_revision = '0037'
branch_labels = None
depends_on = None

COLUMNS = [
    ('subscribers', sa.Column('timezone', sa.String(length=64), nullable=True)),
    ('mailing_lists', sa.Column('no_tracking', sa.Boolean(), server_default=sa.false(),
                                nullable=False)),
    ('site_settings', sa.Column('resend_after_hours', sa.Integer(), server_default='24',
                                nullable=False)),
    ('broadcasts', sa.Column('ab_test', sa.JSON(), nullable=True)),
    ('broadcasts', sa.Column('ab_seed', sa.BigInteger(), nullable=True)),
    ('broadcasts', sa.Column('ab_wait_until', sa.DateTime(), nullable=True)),
    ('broadcasts', sa.Column('ab_winner', sa.Integer(), nullable=True)),
    ('broadcasts', sa.Column('ab_decided_at', sa.DateTime(), nullable=True)),
    ('broadcasts', sa.Column('ab_result', sa.JSON(), nullable=True)),
    ('broadcasts', sa.Column('send_at_local', sa.String(length=5), nullable=True)),
    ('broadcasts', sa.Column('local_due', sa.JSON(), nullable=True)),
    ('broadcasts', sa.Column('waiting_until', sa.DateTime(), nullable=True)),
    ('revisions', sa.Column('variants', sa.JSON(), nullable=True)),
    # Nullable, no default: a million deliveries are not rewritten.
    ('deliveries', sa.Column('variant', sa.Integer(), nullable=True)),
]

OLD_TRIGGERS = "trigger_type IN ('joined_list', 'segment')"
NEW_TRIGGERS = "trigger_type IN ('joined_list', 'segment', 'feed')"


def upgrade():
    for table, column in COLUMNS:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(column)
    with op.batch_alter_table('broadcasts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('resend_of_id', sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f('ix_broadcasts_resend_of_id'), ['resend_of_id'],
                              unique=False)
        batch_op.create_foreign_key(batch_op.f('fk_broadcasts_resend_of_id_broadcasts'),
                                    'broadcasts', ['resend_of_id'], ['id'], ondelete='SET NULL')
    op.create_index('ix_subscribers_timezone', 'subscribers', ['timezone'], unique=False,
                    postgresql_where=sa.text('timezone IS NOT NULL'),
                    sqlite_where=sa.text('timezone IS NOT NULL'))
    with op.batch_alter_table('automations', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('ck_automations_trigger_type'), type_='check')
        batch_op.create_check_constraint(op.f('ck_automations_trigger_type'), NEW_TRIGGERS)
    op.create_table(
        'feeds',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('automation_id', sa.Integer(), nullable=False),
        sa.Column('url', sa.Text(), nullable=False),
        sa.Column('mode', sa.String(length=8), nullable=False),
        sa.Column('every', sa.String(length=8), nullable=True),
        sa.Column('at', sa.String(length=5), nullable=True),
        sa.Column('weekday', sa.Integer(), nullable=True),
        sa.Column('etag', sa.String(length=255), nullable=True),
        sa.Column('last_modified', sa.String(length=64), nullable=True),
        sa.Column('primed_at', sa.DateTime(), nullable=True),
        sa.Column('polled_at', sa.DateTime(), nullable=True),
        sa.Column('next_poll_at', sa.DateTime(), nullable=True),
        sa.Column('next_digest_at', sa.DateTime(), nullable=True),
        sa.Column('error', sa.Text(), nullable=True),
        sa.Column('error_at', sa.DateTime(), nullable=True),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.CheckConstraint("mode IN ('each', 'digest')", name=op.f('ck_feeds_mode')),
        sa.CheckConstraint("every IS NULL OR every IN ('daily', 'weekly')",
                           name=op.f('ck_feeds_every')),
        sa.ForeignKeyConstraint(['automation_id'], ['automations.id'],
                                name=op.f('fk_feeds_automation_id_automations'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_feeds')),
        sa.UniqueConstraint('automation_id', name=op.f('uq_feeds_automation_id')),
    )
    op.create_table(
        'feed_items',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('feed_id', sa.Integer(), nullable=False),
        sa.Column('key', sa.String(length=64), nullable=False),
        sa.Column('title', sa.Text(), nullable=False),
        sa.Column('link', sa.Text(), nullable=False),
        sa.Column('summary_html', sa.Text(), nullable=False),
        sa.Column('published_at', sa.DateTime(), nullable=True),
        sa.Column('seen_at', sa.DateTime(), nullable=False),
        sa.Column('baseline', sa.Boolean(), nullable=False),
        sa.Column('broadcast_id', sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(['broadcast_id'], ['broadcasts.id'],
                                name=op.f('fk_feed_items_broadcast_id_broadcasts'),
                                ondelete='SET NULL'),
        sa.ForeignKeyConstraint(['feed_id'], ['feeds.id'],
                                name=op.f('fk_feed_items_feed_id_feeds'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_feed_items')),
        sa.UniqueConstraint('feed_id', 'key', name='uq_feed_items_key'),
    )
    op.create_index('ix_feed_items_unsent', 'feed_items', ['feed_id', 'broadcast_id'],
                    unique=False)


def downgrade():
    op.drop_index('ix_feed_items_unsent', table_name='feed_items')
    op.drop_table('feed_items')
    op.drop_table('feeds')
    # A feed automation cannot be kept by the older schema: it goes with its feed. Its steps,
    # their revisions and its events go too, as ON DELETE CASCADE would take them: on SQLite
    # migrations run with foreign keys off (migrations/env.py), so nothing cascades by itself.
    feed = "SELECT id FROM automations WHERE trigger_type = 'feed'"
    op.execute(f"DELETE FROM events WHERE automation_id IN ({feed})")
    op.execute("DELETE FROM automation_revisions WHERE step_id IN "
               f"(SELECT id FROM automation_steps WHERE automation_id IN ({feed}))")
    op.execute(f"DELETE FROM automation_steps WHERE automation_id IN ({feed})")
    op.execute("DELETE FROM automations WHERE trigger_type = 'feed'")
    with op.batch_alter_table('automations', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('ck_automations_trigger_type'), type_='check')
        batch_op.create_check_constraint(op.f('ck_automations_trigger_type'), OLD_TRIGGERS)
    op.drop_index('ix_subscribers_timezone', table_name='subscribers')
    with op.batch_alter_table('broadcasts', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_broadcasts_resend_of_id_broadcasts'),
                                 type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_broadcasts_resend_of_id'))
        batch_op.drop_column('resend_of_id')
    for table, column in reversed(COLUMNS):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column(column.name)
