"""A run's last processed frame index: ``processing_runs.last_frame``.

Which tracks count as vehicles (``db.vehicles.counted``) depends on whether a track was still tracked at the run's
end. That end was taken as ``frames_done - 1``, right for a recorded run (every frame from 0) but not for a live
stream's run: its frames are numbered from the stream's start and pacing keeps every k-th one, so ``frames_done - 1``
lies far before its last frame and every short track after it counted as a vehicle "at the end". Existing runs get
the later of ``frames_done - 1`` and their tracks' last frame (a live run's last tracked frame is the best left).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28 04:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("processing_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("last_frame", sa.Integer(), nullable=True))
    op.execute(
        "UPDATE processing_runs SET last_frame = "
        "(SELECT MAX(t.last_frame) FROM tracks t WHERE t.run_id = processing_runs.id)"
    )
    op.execute(
        "UPDATE processing_runs SET last_frame = frames_done - 1 "
        "WHERE frames_done > 0 AND (last_frame IS NULL OR last_frame < frames_done - 1)"
    )


def downgrade() -> None:
    with op.batch_alter_table("processing_runs", schema=None) as batch_op:
        batch_op.drop_column("last_frame")
