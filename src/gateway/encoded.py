"""JSON answers the gateway encodes itself, in the thread that read what they hold: the bytes
FastAPI writes for the same value (compact, UTF-8 as is), without first validating the value
against the route's declared ``dict[str, Any]``, which only copies it."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import Response

MEDIA_TYPE = "application/json"


def json_answer(value: Any) -> Response:
    """``value`` as a 200 answer of ``application/json``."""
    body = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return Response(body.encode(), media_type=MEDIA_TYPE)
