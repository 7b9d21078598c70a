"""Speed evidence as columns: a violation's sigma, speed - 2 sigma, time over the limit, rule and scale source; the
scale source of tracks and runs, a track's median sigma.

Before, a violation's sigma was looked up in ``track_speeds`` (same track and video time) and the rule and scale
source lived only in the run's ``summary_json``. Existing violations get their sigma and speed - 2 sigma from that
same ``track_speeds`` row; their rule and scale source stay NULL (what the run used is in its summary).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25 12:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("processing_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("scale_source", sa.String(length=16), nullable=True))
    with op.batch_alter_table("tracks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("median_sigma_kmh", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("scale_source", sa.String(length=16), nullable=True))
    with op.batch_alter_table("violations", schema=None) as batch_op:
        batch_op.add_column(sa.Column("sigma_kmh", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("lower_bound_kmh", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("over_limit_s", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("rule", sa.String(length=96), nullable=True))
        batch_op.add_column(sa.Column("scale_source", sa.String(length=16), nullable=True))
    # existing violations: the sigma of the speed row they were taken from (portable correlated subquery)
    op.execute(
        "UPDATE violations SET sigma_kmh = (SELECT MAX(ts.sigma_kmh) FROM track_speeds ts "
        "WHERE ts.track_id = violations.track_id AND ts.t_s = violations.t_s)"
    )
    op.execute("UPDATE violations SET lower_bound_kmh = speed_kmh - 2 * COALESCE(sigma_kmh, 0)")


def downgrade() -> None:
    with op.batch_alter_table("violations", schema=None) as batch_op:
        batch_op.drop_column("scale_source")
        batch_op.drop_column("rule")
        batch_op.drop_column("over_limit_s")
        batch_op.drop_column("lower_bound_kmh")
        batch_op.drop_column("sigma_kmh")
    with op.batch_alter_table("tracks", schema=None) as batch_op:
        batch_op.drop_column("scale_source")
        batch_op.drop_column("median_sigma_kmh")
    with op.batch_alter_table("processing_runs", schema=None) as batch_op:
        batch_op.drop_column("scale_source")
