"""The declarative ``Base`` every table subclasses, and the portability rules they share.

Its own module so that :mod:`db.models` and :mod:`db.service_models` both build on it without importing each other
(``db.models`` imports ``db.service_models`` so that one ``Base.metadata`` holds every table).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Integer, MetaData
from sqlalchemy.dialects import mysql
from sqlalchemy.orm import DeclarativeBase

# Microsecond timestamps on MariaDB (its DATETIME default drops fractions); SQLite stores ISO strings anyway.
DateTime6 = DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
# SQLite only auto-increments "INTEGER PRIMARY KEY"; MariaDB gets 64-bit ids for the big tables.
BigId = BigInteger().with_variant(Integer(), "sqlite")

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
MYSQL_TABLE = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_unicode_ci"}


def utcnow() -> datetime:
    """Naive UTC 'now' (the database stores naive UTC)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {datetime: DateTime6, dict[str, Any]: JSON}
