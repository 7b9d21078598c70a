"""Counting lines and zones, a stream's own calibration, the uploads-per-owner index.

- ``counting_lines``: the lines and zones drawn on a site's map (a task's, or a run's without a task). They lived in
  ``<data_dir>/counting_lines.json`` before, outside the database (not in backups, not shared between hosts).
- ``service_streams.calibration_json``: a stream's own scale, before in ``<data_dir>/stream_calibrations.json``.
- ``ix_service_uploads_owner_created_at``: the upload limits count one owner's recent uploads on every upload.

The JSON files are not read here (a migration has no data folder): ``airpatrol db upgrade`` and the start of the
service / dashboard import them once after this revision and rename them ``*.imported`` (``db/json_import.py``).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26 13:54:08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "counting_lines",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("public_id", sa.String(length=32), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("name", sa.String(length=80), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("geometry_geojson", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(length=96), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.CheckConstraint("kind IN ('line', 'zone')", name=op.f("ck_counting_lines_kind")),
        sa.CheckConstraint(
            "(task_id IS NOT NULL AND run_id IS NULL) OR (task_id IS NULL AND run_id IS NOT NULL)",
            name=op.f("ck_counting_lines_one_site"),
        ),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["processing_runs.id"],
            name=op.f("fk_counting_lines_run_id_processing_runs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name=op.f("fk_counting_lines_task_id_tasks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_counting_lines")),
        sa.UniqueConstraint("public_id", name=op.f("uq_counting_lines_public_id")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("counting_lines", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_counting_lines_run_id"), ["run_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_counting_lines_task_id"), ["task_id"], unique=False)

    # A service that created its own tables from the models (before 0002, see there) may have these already.
    inspector = sa.inspect(op.get_bind())
    if "calibration_json" not in {c["name"] for c in inspector.get_columns("service_streams")}:
        with op.batch_alter_table("service_streams", schema=None) as batch_op:
            batch_op.add_column(sa.Column("calibration_json", sa.JSON(), nullable=True))
    if "ix_service_uploads_owner_created_at" not in {i["name"] for i in inspector.get_indexes("service_uploads")}:
        with op.batch_alter_table("service_uploads", schema=None) as batch_op:
            batch_op.create_index(
                batch_op.f("ix_service_uploads_owner_created_at"), ["owner", "created_at"], unique=False
            )


def downgrade() -> None:
    with op.batch_alter_table("service_uploads", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_service_uploads_owner_created_at"))

    with op.batch_alter_table("service_streams", schema=None) as batch_op:
        batch_op.drop_column("calibration_json")

    with op.batch_alter_table("counting_lines", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_counting_lines_task_id"))
        batch_op.drop_index(batch_op.f("ix_counting_lines_run_id"))

    op.drop_table("counting_lines")
