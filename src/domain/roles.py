"""What an image is published for (docs/cli.md: ``--role client|serving``)."""

from __future__ import annotations

from typing import Literal

Role = Literal["client", "serving"]
ROLES: tuple[Role, ...] = ("client", "serving")
