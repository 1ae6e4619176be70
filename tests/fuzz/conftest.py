"""Fixtures for the fuzzers: the adversarial world, built once per session."""

from __future__ import annotations

import pytest

from tests.fuzz import world


@pytest.fixture(scope="session")
def world_template(tmp_path_factory: pytest.TempPathFactory) -> world.Template:
    return world.make_template(tmp_path_factory.mktemp("fuzz-world") / "template")
