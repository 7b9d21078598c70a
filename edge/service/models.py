"""The service's tables live in :mod:`db.service_models` (the schema, and its Alembic history, belong to ``db``)."""

from db.service_models import JOB_STATUSES, STREAM_KINDS, UPLOAD_STATUSES, JobRow, StreamRow, UploadRow

__all__ = ["JOB_STATUSES", "STREAM_KINDS", "UPLOAD_STATUSES", "JobRow", "StreamRow", "UploadRow"]
