"""One process mesh per test module; services a case killed are started again before the next case."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.process_mesh import MeshShape, ProcessMesh


@pytest.fixture(scope="module")
async def mesh(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> AsyncIterator[ProcessMesh]:
    """The module's mesh; a module sets ``SHAPE = MeshShape(...)`` for another shape than the default."""
    shape = getattr(request.module, "SHAPE", MeshShape())
    processes = ProcessMesh(tmp_path_factory.mktemp("mesh"), shape)
    try:
        await processes.start()
        yield processes
    finally:
        await processes.close()


@pytest.fixture(autouse=True)
async def whole_mesh(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """After each case, every service of the module's mesh runs again (a case may have killed one)."""
    yield
    if "mesh" not in request.fixturenames:
        return
    processes: ProcessMesh = request.getfixturevalue("mesh")
    if not processes.redis.running:
        await processes.redis.start()
    for service in processes.services:
        if not service.running:
            await service.start()
