"""Every error the product raises has one base and one shape; the CLI's table reads it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from slurm_image.application.errors import ApplicationError, VerificationFailed
from slurm_image.domain.errors import DomainError, InvalidProfile, SlurmImageError
from slurm_image.ports.credentials import CredentialsFileError
from slurm_image.ports.filesystem import FilesystemError
from slurm_image.ports.hasher import HashError
from slurm_image.ports.lock import LockTimeout
from slurm_image.ports.submitter import SchedulerRejected, SubmitterError
from slurm_image.ports.workspace import WorkspaceError
from slurm_image.wire.errors import EXIT_CODES, describe, exit_code_for

ROOTS = [
    DomainError,
    ApplicationError,
    WorkspaceError,
    SubmitterError,
    HashError,
    CredentialsFileError,
    LockTimeout,
    FilesystemError,
]


def _product_errors() -> set[type[BaseException]]:
    """Every exception class the domain, ports and application layers define."""
    found: set[type[BaseException]] = set()
    for layer in ("domain", "ports", "application"):
        package = importlib.import_module(f"slurm_image.{layer}")
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"slurm_image.{layer}.{info.name}")
            for _, value in inspect.getmembers(module, inspect.isclass):
                if issubclass(value, BaseException) and value.__module__ == module.__name__:
                    found.add(value)
    return found


def test_every_error_of_the_inner_layers_has_the_one_base() -> None:
    errors = _product_errors()
    assert set(ROOTS) <= errors
    assert [kind.__qualname__ for kind in errors if not issubclass(kind, SlurmImageError)] == []


@pytest.mark.parametrize("root", ROOTS, ids=lambda kind: kind.__name__)
def test_each_layer_root_is_built_from_field_rule_and_value_by_keyword(
    root: type[SlurmImageError],
) -> None:
    error = root(field="submitter.kind", rule="must be one of: fake", value="x")
    assert (error.field, error.rule, error.value) == ("submitter.kind", "must be one of: fake", "x")
    assert str(error) == "submitter.kind: must be one of: fake"
    with pytest.raises(TypeError):
        root("submitter.kind", "must be one of: fake")  # type: ignore[misc]


def test_use_case_errors_live_in_one_module() -> None:
    modules = {kind.__module__ for kind in _product_errors() if issubclass(kind, ApplicationError)}
    assert modules == {"slurm_image.application.errors"}


def test_the_cli_names_field_and_rule_of_any_layer_alike() -> None:
    scheduler = SchedulerRejected(field="partition", rule="no such partition:  gpu")
    assert describe(scheduler) == "partition: no such partition: gpu"
    assert describe(VerificationFailed(field="/ws/a", rule="changed")) == "/ws/a: changed"
    assert describe(RuntimeError("boom")) == "boom"


def test_the_exit_table_holds_only_product_errors_and_maps_by_type() -> None:
    assert all(issubclass(kind, SlurmImageError) for kind, _ in EXIT_CODES)
    assert exit_code_for(InvalidProfile(field="profile", rule="missing")) == 2
    assert exit_code_for(SchedulerRejected(field="submitter", rule="down")) == 3
    assert exit_code_for(RuntimeError("boom")) == 1
