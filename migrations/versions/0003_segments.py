"""Segments, broadcasts to a segment, the frequency cap

- segments: a name and a rule tree (JSON), validated and compiled by broadside.segments.
- broadcasts.segment_id: a broadcast goes to a list or to a segment.
- broadcasts.skip_if_received_within_hours, site_settings.default_skip_if_received_within_hours:
  the frequency cap, checked at each person's turn.
- deliveries.list_id: the list whose subscription the send-time re-check reads and whose
  unsubscribe link the message carries (for a segment, one list the person is on). Rows
  written before this revision keep NULL, which means the broadcast's list.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "segments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("rules", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_segments")),
        sa.UniqueConstraint("name", name=op.f("uq_segments_name")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("broadcasts") as batch_op:
        batch_op.add_column(sa.Column("segment_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("skip_if_received_within_hours", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_broadcasts_segment_id"), ["segment_id"], unique=False)
        batch_op.create_foreign_key(batch_op.f("fk_broadcasts_segment_id_segments"), "segments",
                                    ["segment_id"], ["id"], ondelete="SET NULL")
    with op.batch_alter_table("deliveries") as batch_op:
        batch_op.add_column(sa.Column("list_id", sa.Integer(), nullable=True))
        batch_op.create_foreign_key(batch_op.f("fk_deliveries_list_id_mailing_lists"), "mailing_lists",
                                    ["list_id"], ["id"], ondelete="SET NULL")
    with op.batch_alter_table("site_settings") as batch_op:
        batch_op.add_column(sa.Column("default_skip_if_received_within_hours", sa.Integer(), nullable=True))


def downgrade():
    with op.batch_alter_table("site_settings") as batch_op:
        batch_op.drop_column("default_skip_if_received_within_hours")
    with op.batch_alter_table("deliveries") as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_deliveries_list_id_mailing_lists"), type_="foreignkey")
        batch_op.drop_column("list_id")
    with op.batch_alter_table("broadcasts") as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_broadcasts_segment_id_segments"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_broadcasts_segment_id"))
        batch_op.drop_column("skip_if_received_within_hours")
        batch_op.drop_column("segment_id")
    op.drop_table("segments")
