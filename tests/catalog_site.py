"""A site whose catalog the page tests read (tests/gateway/test_gateway_pages.py, tests/browser/):
a gateway lab (tests/gateway_lab.py) with the catalog public, and images published through it as
users publish them: a client image resolved from a tag, a serving image (vLLM), an image whose
inspection carries markup and script where the fact rules allow any character (paths), and a
private image only its group may see.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway_lab import PRIVATE_GROUP, GatewayLab, gateway_lab
from publish_support import CLIENT_FACTS
from slurm_image.domain.credentials import RegistryCredentials
from slurm_image.domain.inspection import validate_inspection
from slurm_image.domain.paths import AttemptLayout
from slurm_image.domain.request import make_request
from slurm_image.domain.requester import Requester
from slurm_image.domain.resolution import ResolvedFrom

REGISTRY = "registry.example.org"
TORCH_TAG = "2.4"
TORCH_DIGEST = "sha256:" + "1" * 64
TORCH = f"{REGISTRY}/ml/torch:{TORCH_TAG}@{TORCH_DIGEST}"
SERVE = f"{REGISTRY}/ml/serve:0.6@sha256:{'2' * 64}"
HOSTILE = f"{REGISTRY}/evil/facts:1@sha256:{'3' * 64}"
SECRET = f"{REGISTRY}/team/secret:1@sha256:{'4' * 64}"
LIVE = f"{REGISTRY}/ml/live:1@sha256:{'5' * 64}"

INJECTED_PIP = "/usr/bin/pip<img src=x onerror=window.__pwned=1;alert(1)>"
"""A console script's path as a distribution's RECORD may name it: markup in a text cell."""
INJECTED_PYTHON = "/usr/bin/python3</td><script>window.__pwned=2;alert(2)</script>"
"""An interpreter path that closes the cell and opens a script."""
INJECTED_LOCATION = "/opt/\"'><svg onload=window.__pwned=3;alert(3)>"
"""A shadowed copy's location that leaves a quoted attribute."""
INJECTED = (INJECTED_PIP, INJECTED_PYTHON, INJECTED_LOCATION)


def sqsh(label: str, size: int) -> bytes:
    """An artifact of ``size`` bytes, told apart by ``label``."""
    head = b"hsqs" + label.encode()
    return head + b"\x00" * (size - len(head))


def hostile_inspection(image: bytes) -> bytes:
    """An inspection record the rules accept whose paths carry markup and script."""
    facts: dict[str, Any] = copy.deepcopy(CLIENT_FACTS)
    facts["python"]["executable"] = INJECTED_PYTHON
    facts["installer"]["path"] = INJECTED_PIP
    facts["shadowed"] = [{"name": "pip", "version": "22.0", "location": INJECTED_LOCATION}]
    record = {
        "schema_version": 3,
        "inspector_version": "3.0.0",
        "role": "client",
        "sqsh_sha256": hashlib.sha256(image).hexdigest(),
        "machine": "x86_64",
        "facts": facts,
    }
    data = json.dumps(record).encode()
    validate_inspection(data, role="client", sqsh_sha256=record["sqsh_sha256"])  # allowed today
    return data


def publish(
    lab: GatewayLab,
    user: str,
    name: str,
    source: str,
    *,
    role: str = "client",
    image: bytes,
    inspection_record: bytes | None = None,
    **options: Any,
) -> str:
    """``user`` imports ``source`` as ``name`` through the gateway; its job succeeds with
    ``image``, and it is published."""
    client = lab.client(user)
    outcome = client.import_image(source, name=name, role=role, **options)
    lab.run_job(outcome.lifecycle_id, sqsh=image, inspection_record=inspection_record)
    client.wait([outcome.lifecycle_id], timeout_s=10)
    client.publish(outcome.lifecycle_id)
    return outcome.lifecycle_id


def publish_resolved(lab: GatewayLab, user: str, name: str, *, image: bytes) -> str:
    """``import --resolve`` of ``TORCH``'s tag, as the verbs make it once the registry has
    answered (the lab has no registry to ask)."""
    verbs = lab.local(user)
    resolved = ResolvedFrom(
        tag=f"{REGISTRY}/ml/torch:{TORCH_TAG}",
        digest=TORCH_DIGEST,
        resolved_at="2026-01-02T03:04:05.000000Z",
    )
    request = make_request(
        "import_oci",
        name=name,
        role="client",
        source=TORCH,
        architecture="x86_64",
        resolved_from=resolved,
        requester=Requester(user=user, uid=lab.uid(user)),
    )
    outcome = verbs.run(request)
    lab.run_job(outcome.lifecycle_id, sqsh=image)
    verbs.wait([outcome.lifecycle_id], timeout_s=10)
    verbs.publish(outcome.lifecycle_id)
    return outcome.lifecycle_id


def write_progress(lab: GatewayLab, lifecycle_id: str, phase: str, **counters: int) -> None:
    """The job's progress record, as the job replaces it while it goes."""
    record = {"format": 1, "phase": phase, "updated_at": int(time.time()), **counters}
    path = Path(AttemptLayout(str(lab.root), lifecycle_id).progress_record)
    path.write_text(json.dumps(record))


@dataclass
class CatalogSite:
    lab: GatewayLab
    paths: dict[str, str]
    """Each public alias's published artifact path."""


@contextmanager
def catalog_site() -> Iterator[CatalogSite]:
    """The lab with the catalog public and the images of the module docstring published."""
    with gateway_lab("public_catalog = true\nrequests_per_minute = 100000") as lab:
        publish_resolved(lab, "alice", "torch", image=sqsh("torch", 4096))
        publish(lab, "bob", "vllm-serve", SERVE, role="serving", image=sqsh("serve", 8192))
        hostile = sqsh("hostile", 2048)
        publish(
            lab,
            "carol",
            "hostile",
            HOSTILE,
            image=hostile,
            inspection_record=hostile_inspection(hostile),
        )
        login = RegistryCredentials(host=REGISTRY, login="alice", password="s3cret-pw")
        publish(
            lab,
            "alice",
            "secret",
            SECRET,
            image=sqsh("secret", 1024),
            group=PRIVATE_GROUP,
            credentials=login,
        )
        service = lab.local()
        paths = {
            name: str(service.catalog_show(name).record["path"])
            for name in ("torch", "vllm-serve", "hostile")
        }
        yield CatalogSite(lab, paths)
