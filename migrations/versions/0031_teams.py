"""Teams: people with roles, invitations, two-factor sign-in, sessions you can see, and the
audit log

- owners: role (everyone before this was an owner, and stays one), name, the TOTP secret, when
  it was confirmed, and the last time step accepted (a code is accepted once).
- invitations: single-use links to join with a role (only the token's SHA-256).
- recovery_codes: ten single-use codes per person, hashed.
- owner_sessions: the browser and network each session signed in from.
- events: the person or token that caused each (NULL: the worker, a reader, a provider).
- audit_log: one append-only row per change by a person or a token.
- site_settings: require two-factor sign-in for everyone; the session idle limit (hours).

Revision ID: 0031
Revises: 0030
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0031'
down_revision = '0030'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('audit_log',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('actor_person_id', sa.Integer(), nullable=True),
    sa.Column('actor_token_id', sa.Integer(), nullable=True),
    sa.Column('actor', sa.String(length=500), nullable=False),
    sa.Column('address', sa.String(length=64), nullable=False),
    sa.Column('action', sa.String(length=64), nullable=False),
    sa.Column('object_type', sa.String(length=32), nullable=False),
    sa.Column('object_id', sa.String(length=64), nullable=True),
    sa.Column('summary', sa.Text(), nullable=False),
    sa.Column('details', sa.JSON(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_audit_log'))
    )
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.create_index('ix_audit_log_action', ['action', 'id'], unique=False)
        batch_op.create_index('ix_audit_log_actor_person', ['actor_person_id', 'id'], unique=False)
        batch_op.create_index('ix_audit_log_created_at', ['created_at'], unique=False)
        batch_op.create_index('ix_audit_log_object', ['object_type', 'object_id', 'id'], unique=False)

    op.create_table('invitations',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('email', sa.String(length=320), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('invited_by', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('expires_at', sa.DateTime(), nullable=False),
    sa.Column('accepted_at', sa.DateTime(), nullable=True),
    sa.Column('revoked_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_invitations')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_invitations_token_hash'))
    )
    with op.batch_alter_table('invitations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_invitations_email'), ['email'], unique=False)

    op.create_table('recovery_codes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('owner_id', sa.Integer(), nullable=False),
    sa.Column('code_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('used_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['owner_id'], ['owners.id'], name=op.f('fk_recovery_codes_owner_id_owners'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_recovery_codes'))
    )
    with op.batch_alter_table('recovery_codes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_recovery_codes_owner_id'), ['owner_id'], unique=False)

    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.add_column(sa.Column('actor_person_id', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('actor_token_id', sa.Integer(), nullable=True))

    with op.batch_alter_table('owner_sessions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('user_agent', sa.String(length=300), server_default='', nullable=False))
        batch_op.add_column(sa.Column('network', sa.String(length=64), server_default='', nullable=False))

    with op.batch_alter_table('owners', schema=None) as batch_op:
        batch_op.add_column(sa.Column('role', sa.String(length=16), server_default='owner', nullable=False))
        batch_op.add_column(sa.Column('name', sa.String(length=200), server_default='', nullable=False))
        batch_op.add_column(sa.Column('totp_secret', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('totp_enabled_at', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('totp_last_step', sa.BigInteger(), nullable=True))
        batch_op.create_check_constraint(
            op.f('ck_owners_role'), "role IN ('owner', 'admin', 'sender', 'writer', 'viewer')")

    with op.batch_alter_table('site_settings', schema=None) as batch_op:
        batch_op.add_column(sa.Column('require_two_factor', sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.add_column(sa.Column('session_idle_hours', sa.Integer(), server_default='744', nullable=False))



def downgrade():
    with op.batch_alter_table('site_settings', schema=None) as batch_op:
        batch_op.drop_column('session_idle_hours')
        batch_op.drop_column('require_two_factor')

    with op.batch_alter_table('owners', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('ck_owners_role'), type_='check')
        batch_op.drop_column('totp_last_step')
        batch_op.drop_column('totp_enabled_at')
        batch_op.drop_column('totp_secret')
        batch_op.drop_column('name')
        batch_op.drop_column('role')

    with op.batch_alter_table('owner_sessions', schema=None) as batch_op:
        batch_op.drop_column('network')
        batch_op.drop_column('user_agent')

    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_column('actor_token_id')
        batch_op.drop_column('actor_person_id')

    with op.batch_alter_table('recovery_codes', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_recovery_codes_owner_id'))

    op.drop_table('recovery_codes')
    with op.batch_alter_table('invitations', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_invitations_email'))

    op.drop_table('invitations')
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.drop_index('ix_audit_log_object')
        batch_op.drop_index('ix_audit_log_created_at')
        batch_op.drop_index('ix_audit_log_actor_person')
        batch_op.drop_index('ix_audit_log_action')

    op.drop_table('audit_log')
