"""The dynamic group configs set with IncrementalAlterConfigs/AlterConfigs, kept durably.

Kafka keeps them in its metadata log, apart from the group's own records: a group's configs
exist whether or not the group does, and outlive its members. Here they are one JSON file,
``group-configs.json`` in the data dir, ``{"<org id>": {"<group id>": {"name": "value"}}}``,
rewritten atomically (temp file, fsync, rename, fsync of the directory) on every change. The
live group learns its new configs through its actor's mailbox (group_common/ops.py
GroupConfigOp), never from here.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from .fsutil import DamagedFile, fsync_dir

log = logging.getLogger(__name__)

FILE_NAME = "group-configs.json"
BROKER_CONFIGS_FILE = "broker-configs.json"  # the dynamic broker configs, in the same shape


class GroupConfigStore:
    def __init__(self, path: Path, configs: dict[tuple[int, str], dict[str, str]]) -> None:
        self._path = path
        self._configs = configs

    @classmethod
    def open(cls, data_dir: Path, file_name: str = FILE_NAME) -> GroupConfigStore:
        """The store in `file_name` (the dynamic broker configs are kept the same way, in
        their own file: gateway/apis/broker_configs.py)."""
        path = data_dir / file_name
        configs: dict[tuple[int, str], dict[str, str]] = {}
        if path.exists():
            try:
                stored = json.loads(path.read_text())
                for org, groups in stored.items():
                    for group_id, values in groups.items():
                        configs[(int(org), group_id)] = {str(k): str(v) for k, v in values.items()}
            except (ValueError, AttributeError, TypeError) as exc:
                raise DamagedFile(path, exc) from exc
        return cls(path, configs)

    def get(self, org_id: int, group_id: str) -> dict[str, str]:
        """The group's overrides (empty: it has none)."""
        return dict(self._configs.get((org_id, group_id), {}))

    def set(self, org_id: int, group_id: str, values: Mapping[str, str]) -> None:
        """Replace the group's overrides, durably before it returns (on an OSError nothing
        changes, in memory or on disk)."""
        configs = dict(self._configs)
        if values:
            configs[(org_id, group_id)] = dict(values)
        else:
            configs.pop((org_id, group_id), None)
        self._write(configs)
        self._configs = configs
        log.info("%s: %r of org %d now %s", self._path.name, group_id, org_id, dict(values))

    def _write(self, configs: dict[tuple[int, str], dict[str, str]]) -> None:
        stored: dict[str, dict[str, dict[str, str]]] = {}
        for (org, group_id), values in sorted(configs.items()):
            stored.setdefault(str(org), {})[group_id] = values
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(stored, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        fsync_dir(self._path.parent)
