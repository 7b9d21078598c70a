"""Traffic study approaches, kept per site (a task, or a run without one): ``study_approaches``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26 14:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "study_approaches",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("key", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=80), nullable=False),
        sa.Column("lon", sa.Double(), nullable=False),
        sa.Column("lat", sa.Double(), nullable=False),
        sa.Column("heading_deg", sa.Float(), nullable=False),
        sa.Column("radius_m", sa.Float(), nullable=False),
        sa.Column("updated_by_id", sa.Integer(), nullable=True),
        sa.Column(
            "updated_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "(task_id IS NOT NULL AND run_id IS NULL) OR (task_id IS NULL AND run_id IS NOT NULL)",
            name=op.f("ck_study_approaches_site"),
        ),
        sa.CheckConstraint("radius_m > 0", name=op.f("ck_study_approaches_radius")),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["processing_runs.id"],
            name=op.f("fk_study_approaches_run_id_processing_runs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name=op.f("fk_study_approaches_task_id_tasks"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["updated_by_id"], ["users.id"], name=op.f("fk_study_approaches_updated_by_id_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_study_approaches")),
        sa.UniqueConstraint("run_id", "key", name=op.f("uq_study_approaches_run_id_key")),
        sa.UniqueConstraint("task_id", "key", name=op.f("uq_study_approaches_task_id_key")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("study_approaches", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_study_approaches_run_id"), ["run_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_study_approaches_task_id"), ["task_id"], unique=False)


def downgrade() -> None:
    op.drop_table("study_approaches")
