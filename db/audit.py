"""The audit log: administrative actions (users, devices, tokens, deletes), written in the same transaction as the
action itself, so an entry exists exactly when the change does. Read by admins on the dashboard's Users page."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import AuditEntry


def audit(
    session: Session, actor: str, action: str, target: str | None = None, client: str | None = None, **detail: Any
) -> None:
    """Add an entry to ``session``'s transaction (the caller commits it with the change it describes)."""
    session.add(
        AuditEntry(
            actor=actor[:96],
            action=action[:64],
            target=None if target is None else str(target)[:255],
            client=None if client is None else client[:64],
            detail=detail or None,
        )
    )


def recent(session: Session, limit: int = 200) -> list[AuditEntry]:
    return list(session.scalars(select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit)))
