"""Initial schema: users, devices, tasks, flights, telemetry, videos, runs, tracks, speeds, violations, field tests.

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-21 16:08:59.305916
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "devices",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("serial", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=True),
        sa.Column("name", sa.String(length=128), nullable=True),
        sa.Column("camera_preset", sa.String(length=64), nullable=True),
        sa.Column("notes", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.CheckConstraint("kind IN ('drone', 'controller', 'edge_node', 'other')", name=op.f("ck_devices_kind")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_devices")),
        sa.UniqueConstraint("serial", name=op.f("uq_devices_serial")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("username", sa.String(length=64), nullable=False),
        sa.Column("display_name", sa.String(length=128), nullable=True),
        sa.Column("email", sa.String(length=254), nullable=True),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("password_hash", sa.String(length=255), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.CheckConstraint("role IN ('admin', 'operator', 'viewer')", name=op.f("ck_users_role")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("username", name=op.f("uq_users_username")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    op.create_table(
        "device_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("device_id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=128), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.Column(
            "last_used_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column(
            "revoked_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.ForeignKeyConstraint(
            ["device_id"], ["devices.id"], name=op.f("fk_device_tokens_device_id_devices"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_device_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_device_tokens_token_hash")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("device_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_device_tokens_device_id"), ["device_id"], unique=False)

    op.create_table(
        "tasks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("area_geojson", sa.Text(), nullable=True),
        sa.Column("min_lat", sa.Double(), nullable=True),
        sa.Column("min_lon", sa.Double(), nullable=True),
        sa.Column("max_lat", sa.Double(), nullable=True),
        sa.Column("max_lon", sa.Double(), nullable=True),
        sa.Column("road_name", sa.String(length=200), nullable=True),
        sa.Column("road_geojson", sa.Text(), nullable=True),
        sa.Column("speed_limit_kmh", sa.Float(), nullable=True),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("created_by_id", sa.Integer(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.CheckConstraint("speed_limit_kmh IS NULL OR speed_limit_kmh > 0", name=op.f("ck_tasks_speed_limit")),
        sa.ForeignKeyConstraint(
            ["created_by_id"], ["users.id"], name=op.f("fk_tasks_created_by_id_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tasks")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    op.create_table(
        "field_tests",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("location", sa.String(length=200), nullable=True),
        sa.Column("task_id", sa.Integer(), nullable=True),
        sa.Column(
            "started_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column(
            "ended_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column("notes", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name=op.f("fk_field_tests_task_id_tasks"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_field_tests")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    op.create_table(
        "task_rounds",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=False),
        sa.Column("round_no", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column(
            "scheduled_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column(
            "started_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column(
            "ended_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column("notes", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "status IN ('planned', 'in_progress', 'done', 'cancelled')", name=op.f("ck_task_rounds_status")
        ),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name=op.f("fk_task_rounds_task_id_tasks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task_rounds")),
        sa.UniqueConstraint("task_id", "round_no", name=op.f("uq_task_rounds_task_id_round_no")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("task_rounds", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_task_rounds_task_id"), ["task_id"], unique=False)

    op.create_table(
        "field_test_checkins",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("field_test_id", sa.Integer(), nullable=False),
        sa.Column("device_id", sa.Integer(), nullable=True),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("person_name", sa.String(length=128), nullable=True),
        sa.Column(
            "checked_in_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.Column(
            "checked_out_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column("notes", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "checked_out_at IS NULL OR checked_out_at >= checked_in_at", name=op.f("ck_field_test_checkins_order")
        ),
        sa.CheckConstraint(
            "device_id IS NOT NULL OR user_id IS NOT NULL OR person_name IS NOT NULL",
            name=op.f("ck_field_test_checkins_who"),
        ),
        sa.ForeignKeyConstraint(
            ["device_id"], ["devices.id"], name=op.f("fk_field_test_checkins_device_id_devices"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["field_test_id"],
            ["field_tests.id"],
            name=op.f("fk_field_test_checkins_field_test_id_field_tests"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_field_test_checkins_user_id_users"), ondelete="RESTRICT"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_field_test_checkins")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("field_test_checkins", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_field_test_checkins_device_id"), ["device_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_field_test_checkins_field_test_id"), ["field_test_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_field_test_checkins_user_id"), ["user_id"], unique=False)

    op.create_table(
        "flights",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("device_id", sa.Integer(), nullable=True),
        sa.Column("pilot_id", sa.Integer(), nullable=True),
        sa.Column("task_round_id", sa.Integer(), nullable=True),
        sa.Column(
            "start_time",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column(
            "end_time",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column("clock", sa.String(length=8), nullable=True),
        sa.Column("home_lat", sa.Double(), nullable=True),
        sa.Column("home_lon", sa.Double(), nullable=True),
        sa.Column("home_alt_m", sa.Float(), nullable=True),
        sa.Column("source_file", sa.String(length=1024), nullable=True),
        sa.Column("source_format", sa.String(length=32), nullable=True),
        sa.Column("checksum", sa.String(length=64), nullable=True),
        sa.Column("sample_count", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=255), nullable=False),
        sa.Column("notes", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["device_id"], ["devices.id"], name=op.f("fk_flights_device_id_devices"), ondelete="RESTRICT"
        ),
        sa.ForeignKeyConstraint(
            ["pilot_id"], ["users.id"], name=op.f("fk_flights_pilot_id_users"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["task_round_id"],
            ["task_rounds.id"],
            name=op.f("fk_flights_task_round_id_task_rounds"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_flights")),
        sa.UniqueConstraint("checksum", name=op.f("uq_flights_checksum")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("flights", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_flights_device_id_start_time"), ["device_id", "start_time"], unique=False)
        batch_op.create_index(batch_op.f("ix_flights_start_time"), ["start_time"], unique=False)
        batch_op.create_index(batch_op.f("ix_flights_task_round_id"), ["task_round_id"], unique=False)

    op.create_table(
        "telemetry_samples",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("flight_id", sa.Integer(), nullable=False),
        sa.Column("t_s", sa.Double(), nullable=False),
        sa.Column(
            "time_utc",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column("lat", sa.Double(), nullable=True),
        sa.Column("lon", sa.Double(), nullable=True),
        sa.Column("rel_alt_m", sa.Float(), nullable=True),
        sa.Column("abs_alt_m", sa.Float(), nullable=True),
        sa.Column("heading_deg", sa.Float(), nullable=True),
        sa.Column("gimbal_pitch_deg", sa.Float(), nullable=True),
        sa.Column("gimbal_yaw_deg", sa.Float(), nullable=True),
        sa.Column("gimbal_roll_deg", sa.Float(), nullable=True),
        sa.Column("ground_speed_ms", sa.Float(), nullable=True),
        sa.Column("vertical_speed_ms", sa.Float(), nullable=True),
        sa.Column("battery_pct", sa.Float(), nullable=True),
        sa.Column("focal_len_mm", sa.Float(), nullable=True),
        sa.Column("frame_cnt", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["flight_id"], ["flights.id"], name=op.f("fk_telemetry_samples_flight_id_flights"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_telemetry_samples")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("telemetry_samples", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_telemetry_samples_flight_id_t_s"), ["flight_id", "t_s"], unique=False)

    op.create_table(
        "videos",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("flight_id", sa.Integer(), nullable=True),
        sa.Column("file_path", sa.String(length=1024), nullable=False),
        sa.Column("checksum", sa.String(length=64), nullable=True),
        sa.Column("duration_s", sa.Double(), nullable=True),
        sa.Column("fps", sa.Float(), nullable=True),
        sa.Column("width", sa.Integer(), nullable=True),
        sa.Column("height", sa.Integer(), nullable=True),
        sa.Column("frame_count", sa.Integer(), nullable=True),
        sa.Column("time_offset_s", sa.Double(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["flight_id"], ["flights.id"], name=op.f("fk_videos_flight_id_flights"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_videos")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("videos", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_videos_checksum"), ["checksum"], unique=False)
        batch_op.create_index(batch_op.f("ix_videos_flight_id"), ["flight_id"], unique=False)

    op.create_table(
        "processing_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("video_id", sa.Integer(), nullable=True),
        sa.Column("flight_id", sa.Integer(), nullable=True),
        sa.Column("task_round_id", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("baseline", sa.Boolean(), nullable=False),
        sa.Column("source", sa.String(length=1024), nullable=True),
        sa.Column("config_json", sa.JSON(), nullable=True),
        sa.Column("weights", sa.String(length=1024), nullable=True),
        sa.Column("device", sa.String(length=64), nullable=True),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("frames_done", sa.Integer(), nullable=False),
        sa.Column("frame_count", sa.Integer(), nullable=True),
        sa.Column("timings_json", sa.JSON(), nullable=True),
        sa.Column("summary_json", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=False,
        ),
        sa.Column(
            "started_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column(
            "heartbeat_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column(
            "finished_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'complete', 'failed', 'superseded')",
            name=op.f("ck_processing_runs_status"),
        ),
        sa.CheckConstraint("progress >= 0 AND progress <= 1", name=op.f("ck_processing_runs_progress")),
        sa.ForeignKeyConstraint(
            ["flight_id"], ["flights.id"], name=op.f("fk_processing_runs_flight_id_flights"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["task_round_id"],
            ["task_rounds.id"],
            name=op.f("fk_processing_runs_task_round_id_task_rounds"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["video_id"], ["videos.id"], name=op.f("fk_processing_runs_video_id_videos"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_processing_runs")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("processing_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_processing_runs_flight_id"), ["flight_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_processing_runs_task_round_id"), ["task_round_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_processing_runs_video_id_status"), ["video_id", "status"], unique=False)

    op.create_table(
        "tracks",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("track_no", sa.Integer(), nullable=False),
        sa.Column("class_name", sa.String(length=16), nullable=False),
        sa.Column("first_t", sa.Double(), nullable=False),
        sa.Column("last_t", sa.Double(), nullable=False),
        sa.Column("first_frame", sa.Integer(), nullable=False),
        sa.Column("last_frame", sa.Integer(), nullable=False),
        sa.Column("moving", sa.Boolean(), nullable=False),
        sa.Column("median_speed_kmh", sa.Float(), nullable=True),
        sa.Column("max_speed_kmh", sa.Float(), nullable=True),
        sa.Column("path_geojson", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["processing_runs.id"], name=op.f("fk_tracks_run_id_processing_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tracks")),
        sa.UniqueConstraint("run_id", "track_no", name=op.f("uq_tracks_run_id_track_no")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    op.create_table(
        "track_speeds",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("track_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("frame", sa.Integer(), nullable=False),
        sa.Column("t_s", sa.Double(), nullable=False),
        sa.Column("speed_kmh", sa.Float(), nullable=True),
        sa.Column("sigma_kmh", sa.Float(), nullable=True),
        sa.Column("lat", sa.Double(), nullable=True),
        sa.Column("lon", sa.Double(), nullable=True),
        sa.Column("flag", sa.String(length=32), nullable=True),
        sa.ForeignKeyConstraint(
            ["track_id"], ["tracks.id"], name=op.f("fk_track_speeds_track_id_tracks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_track_speeds")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("track_speeds", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_track_speeds_track_id_frame"), ["track_id", "frame"], unique=False)

    op.create_table(
        "violations",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("track_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("task_id", sa.Integer(), nullable=True),
        sa.Column("speed_kmh", sa.Float(), nullable=False),
        sa.Column("limit_kmh", sa.Float(), nullable=False),
        sa.Column(
            "occurred_at",
            sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mariadb").with_variant(mysql.DATETIME(fsp=6), "mysql"),
            nullable=True,
        ),
        sa.Column("time_is_estimate", sa.Boolean(), nullable=False),
        sa.Column("t_s", sa.Double(), nullable=False),
        sa.Column("lat", sa.Double(), nullable=True),
        sa.Column("lon", sa.Double(), nullable=True),
        sa.Column("cell", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["processing_runs.id"], name=op.f("fk_violations_run_id_processing_runs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tasks.id"], name=op.f("fk_violations_task_id_tasks"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["track_id"], ["tracks.id"], name=op.f("fk_violations_track_id_tracks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_violations")),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_unicode_ci",
        mysql_engine="InnoDB",
    )
    with op.batch_alter_table("violations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_violations_cell_occurred_at"), ["cell", "occurred_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_violations_occurred_at"), ["occurred_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_violations_run_id"), ["run_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_violations_task_id"), ["task_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_violations_track_id"), ["track_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("violations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_violations_track_id"))
        batch_op.drop_index(batch_op.f("ix_violations_task_id"))
        batch_op.drop_index(batch_op.f("ix_violations_run_id"))
        batch_op.drop_index(batch_op.f("ix_violations_occurred_at"))
        batch_op.drop_index(batch_op.f("ix_violations_cell_occurred_at"))

    op.drop_table("violations")
    with op.batch_alter_table("track_speeds", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_track_speeds_track_id_frame"))

    op.drop_table("track_speeds")
    op.drop_table("tracks")
    with op.batch_alter_table("processing_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_processing_runs_video_id_status"))
        batch_op.drop_index(batch_op.f("ix_processing_runs_task_round_id"))
        batch_op.drop_index(batch_op.f("ix_processing_runs_flight_id"))

    op.drop_table("processing_runs")
    with op.batch_alter_table("videos", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_videos_flight_id"))
        batch_op.drop_index(batch_op.f("ix_videos_checksum"))

    op.drop_table("videos")
    with op.batch_alter_table("telemetry_samples", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_telemetry_samples_flight_id_t_s"))

    op.drop_table("telemetry_samples")
    with op.batch_alter_table("flights", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_flights_task_round_id"))
        batch_op.drop_index(batch_op.f("ix_flights_start_time"))
        batch_op.drop_index(batch_op.f("ix_flights_device_id_start_time"))

    op.drop_table("flights")
    with op.batch_alter_table("field_test_checkins", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_field_test_checkins_user_id"))
        batch_op.drop_index(batch_op.f("ix_field_test_checkins_field_test_id"))
        batch_op.drop_index(batch_op.f("ix_field_test_checkins_device_id"))

    op.drop_table("field_test_checkins")
    with op.batch_alter_table("task_rounds", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_task_rounds_task_id"))

    op.drop_table("task_rounds")
    op.drop_table("field_tests")
    op.drop_table("tasks")
    with op.batch_alter_table("device_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_device_tokens_device_id"))

    op.drop_table("device_tokens")
    op.drop_table("users")
    op.drop_table("devices")
