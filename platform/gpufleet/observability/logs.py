"""JSON log lines (one object per line) carrying the request id the audit middleware sets.

`LOG_FORMAT=json` (the production default) makes every record one JSON object: time (UTC, ISO 8601),
level, logger, message, and -- from the acting context (gpufleet.audit.context) -- request_id, task and
task_id, so a log line, an AuditEvent and the `X-Request-Id` response header can be joined.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        from gpufleet.audit.context import current_actor

        actor = current_actor()
        line: dict[str, object] = {
            # The record's own timestamp (when it was logged), not gpufleet.clock's injectable "now".
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in ("request_id", "task", "task_id"):
            if value := getattr(actor, key, ""):
                line[key] = value
        request = getattr(record, "request", None)  # django.request records carry the request
        if "request_id" not in line and (request_id := getattr(request, "request_id", "")):
            line["request_id"] = request_id
        if actor.user_id:
            line["user_id"] = actor.user_id
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)
