"""The gateway's own refusals (401 ``unauthenticated``, 403 ``forbidden``) are in the store's
history from its first request (docs/design.md, "History"): on a workspace root ``serve`` starts
on for the first time, and on a store whose directories are gone under a running gateway."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway_lab import gateway_lab
from slurm_image.cli.arguments import Options
from slurm_image.composition.serve import build
from slurm_image.domain.store_layout import StoreLayout
from slurm_image.gateway.serve import Listener
from slurm_image.wire.exit_codes import EXIT_FORBIDDEN, EXIT_NOT_AUTHENTICATED
from slurm_image.wire.remote_error import RemoteError


def refusals(layout: StoreLayout) -> list[dict[str, Any]]:
    lines = []
    for month in sorted(Path(layout.history).glob("*.jsonl")):
        lines += [json.loads(line) for line in month.read_text().splitlines() if line]
    return [event for event in lines if event["event"] == "refused"]


def modes(layout: StoreLayout) -> list[int]:
    return [os.lstat(path).st_mode & 0o7777 for path in (layout.images, layout.history)]


async def anonymous_list(app: Any) -> int:
    """The status of a ``list`` asked over TCP without a credential."""
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        return (await client.get("/v1/aliases")).status_code


def test_serve_on_a_new_root_records_its_first_refusal(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir(mode=0o700)
    profile = tmp_path / "site.toml"
    profile.write_text(
        f'workspace_root = "{root}"\n'
        '[image_build]\npartition = "cpu"\ncpus_per_task = 1\nmemory = "1G"\n'
        'time_limit = "0:10:00"\n[submitter]\nkind = "fake"\n'
    )
    options = Options(profile=str(profile), cluster=None, json=False, quiet=False, verbose=False)
    _, app = build(
        options,
        munge_socket=str(tmp_path / "no-munged"),
        listeners=[Listener("http", host="127.0.0.1", port=9)],
        replay_file=str(tmp_path / "accepted-credentials"),
    )

    assert asyncio.run(anonymous_list(app)) == 401

    layout = StoreLayout(str(root))
    assert [(e["rule"], e["exit_code"]) for e in refusals(layout)] == [
        ("unauthenticated", EXIT_NOT_AUTHENTICATED)
    ]
    assert modes(layout) == [0o755, 0o755]


def test_a_store_gone_under_a_running_gateway_records_its_next_refusals() -> None:
    with gateway_lab('admins = ["carol"]') as lab:
        shutil.rmtree(lab.layout.images)  # nothing laid out: as a root never served before

        assert httpx.get(f"{lab.url}/v1/aliases").status_code == 401
        with pytest.raises(RemoteError) as refused:
            lab.client("dave").gc(older_than=timedelta(days=1))
        assert refused.value.exit_code == EXIT_FORBIDDEN

        assert [(e["rule"], e["exit_code"], e["user"]) for e in refusals(lab.layout)] == [
            ("unauthenticated", EXIT_NOT_AUTHENTICATED, lab.service),
            ("forbidden", EXIT_FORBIDDEN, "dave"),
        ]
        assert modes(lab.layout) == [0o755, 0o755]
