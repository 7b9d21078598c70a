"""One configuration model for every entry point.

Precedence, highest first: command-line flags, ``AIRPATROL_*`` environment variables (nested with ``__``, e.g.
``AIRPATROL_PIPELINE__DETECTOR__CONF=0.3``), a YAML/JSON config file (``--config``), the defaults.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from edge.service.config import ServiceConfig
from tracking.config import PipelineConfig


class ConfigError(ValueError):
    pass


class _FileSource(PydanticBaseSettingsSource):
    data: dict[str, Any] = {}

    def get_field_value(self, field, field_name):  # pragma: no cover - not used by __call__
        return self.data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.data)


class AirPatrolSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AIRPATROL_", env_nested_delimiter="__", extra="forbid")

    pipeline: PipelineConfig = PipelineConfig()
    database_url: str | None = Field(None, description="SQLAlchemy URL; default: SQLite file in the user data folder")
    data_dir: str | None = Field(None, description="where runs, uploads and the default database live")
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    service: ServiceConfig = ServiceConfig()
    # Ground-station client (`airpatrol upload` / `airpatrol stream`); env AIRPATROL_SERVER_URL, AIRPATROL_DEVICE_TOKEN.
    server_url: str | None = Field(None, description="edge service the client commands talk to (http://host:8000)")
    device_token: SecretStr | None = Field(None, description="this device's API token (apt_...); shown masked")

    @classmethod
    def settings_customise_sources(
        cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
    ):
        return (init_settings, env_settings, _FileSource(settings_cls))


def read_config_file(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: config file not found")
    try:
        text = p.read_text(encoding="utf-8")
        data = json.loads(text) if p.suffix.lower() == ".json" else yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{p}: cannot parse config ({str(exc).splitlines()[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: config must be a mapping at the top level")
    return data


def _deep_update(base: dict, upd: dict) -> dict:
    out = dict(base)
    for k, v in upd.items():
        out[k] = _deep_update(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_settings(config_file: str | Path | None = None, overrides: dict[str, Any] | None = None) -> AirPatrolSettings:
    """Settings from defaults < file < environment < ``overrides`` (nested dict of CLI flags that were given)."""
    _FileSource.data = read_config_file(config_file) if config_file else {}
    try:
        base = AirPatrolSettings()
        if overrides:
            return AirPatrolSettings.model_validate(_deep_update(base.model_dump(), overrides))
        return base
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        src = f"{config_file}: " if config_file else ""
        raise ConfigError(f"{src}invalid setting {where}: {err['msg']}") from None
    finally:
        _FileSource.data = {}
