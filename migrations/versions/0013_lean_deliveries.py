"""Lean deliveries (issue 19 point 4: storage that stays proportional)

- deliveries: no stored `message_id` (ours names its row, broadside.message_refs: derived, not
  stored and indexed); UNIQUE(subscriber_id, broadcast_id) replaces UNIQUE(broadcast_id,
  subscriber_id) and the index on subscriber_id it made redundant; the provider's id is
  indexed only where there is one.
- events: the delivery and automation-message indexes hold only the events that have one.
- site_settings.history_retention_days: how long settled broadcasts keep their step-by-step
  history (NULL: forever, the default).

Data: nothing is lost. The dropped Message-IDs are `<broadside.d<id>.b<broadcast>@<domain of
the revision's From>>` for every row written by this version's worker (jobs/recheck.py), which
broadside.message_refs derives again; existing `claimed` and `sent` events are kept as they are
(the timeline reads them and the row alike).

Revision ID: 0013
Revises: 0012
"""
from alembic import op
import sqlalchemy as sa


revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('deliveries', schema=None) as batch_op:
        batch_op.drop_index('ix_deliveries_message_id')
        batch_op.drop_index('ix_deliveries_subscriber_id')
        batch_op.drop_index('ix_deliveries_provider_message_id')
        batch_op.drop_constraint('uq_deliveries_broadcast_subscriber', type_='unique')
        batch_op.create_unique_constraint('uq_deliveries_subscriber_broadcast',
                                          ['subscriber_id', 'broadcast_id'])
        batch_op.drop_column('message_id')
    op.create_index('ix_deliveries_provider_message_id', 'deliveries', ['provider_message_id'],
                    unique=False, postgresql_where=sa.text('provider_message_id IS NOT NULL'),
                    sqlite_where=sa.text('provider_message_id IS NOT NULL'))
    op.drop_index('ix_events_delivery_id', table_name='events')
    op.drop_index('ix_events_automation_message_id', table_name='events')
    op.create_index('ix_events_delivery_id', 'events', ['delivery_id'], unique=False,
                    postgresql_where=sa.text('delivery_id IS NOT NULL'),
                    sqlite_where=sa.text('delivery_id IS NOT NULL'))
    op.create_index('ix_events_automation_message_id', 'events', ['automation_message_id'],
                    unique=False, postgresql_where=sa.text('automation_message_id IS NOT NULL'),
                    sqlite_where=sa.text('automation_message_id IS NOT NULL'))
    with op.batch_alter_table('site_settings', schema=None) as batch_op:
        batch_op.add_column(sa.Column('history_retention_days', sa.Integer(), nullable=True))
    if op.get_bind().dialect.name == 'postgresql':
        # Every send updates each row twice (claimed, then its outcome), and the status index
        # rules out HOT updates: reclaim the dead versions while the broadcast is still sending
        # (every ~10,000 of them), so the next claims reuse their space instead of growing the
        # table and its indexes (the default waits for 20% of the table: 200,000 dead rows).
        op.execute("ALTER TABLE deliveries SET (autovacuum_vacuum_scale_factor = 0.01, "
                   "autovacuum_vacuum_threshold = 10000)")


def downgrade():
    if op.get_bind().dialect.name == 'postgresql':
        op.execute("ALTER TABLE deliveries RESET (autovacuum_vacuum_scale_factor, "
                   "autovacuum_vacuum_threshold)")
    with op.batch_alter_table('site_settings', schema=None) as batch_op:
        batch_op.drop_column('history_retention_days')
    op.drop_index('ix_events_automation_message_id', table_name='events')
    op.drop_index('ix_events_delivery_id', table_name='events')
    op.create_index('ix_events_automation_message_id', 'events', ['automation_message_id'])
    op.create_index('ix_events_delivery_id', 'events', ['delivery_id'])
    op.drop_index('ix_deliveries_provider_message_id', table_name='deliveries')
    with op.batch_alter_table('deliveries', schema=None) as batch_op:
        batch_op.add_column(sa.Column('message_id', sa.String(length=255), nullable=True))
        batch_op.drop_constraint('uq_deliveries_subscriber_broadcast', type_='unique')
        batch_op.create_unique_constraint('uq_deliveries_broadcast_subscriber',
                                          ['broadcast_id', 'subscriber_id'])
        batch_op.create_index('ix_deliveries_subscriber_id', ['subscriber_id'], unique=False)
        batch_op.create_index('ix_deliveries_provider_message_id', ['provider_message_id'])
        batch_op.create_index('ix_deliveries_message_id', ['message_id'], unique=False)
    # The Message-IDs of the rows sent meanwhile, as the worker writes them (jobs/recheck.py).
    sqlite = op.get_bind().dialect.name == 'sqlite'
    domain = ("substr(r.from_email, instr(r.from_email, '@') + 1)" if sqlite
              else "split_part(r.from_email, '@', 2)")
    op.execute(
        "UPDATE deliveries SET message_id = '<broadside.d' || id || '.b' || broadcast_id || '@' || "
        f"COALESCE((SELECT {domain} FROM revisions r "
        "WHERE r.broadcast_id = deliveries.broadcast_id), 'localhost') || '>' "
        "WHERE status IN ('sent', 'failed', 'unknown')"
    )
