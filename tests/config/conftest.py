from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from toolkit.paths import preset_path


@pytest.fixture
def base() -> dict[str, Any]:
    """A fresh copy of the p5-training preset (valid: no findings)."""
    return copy.deepcopy(yaml.safe_load(preset_path("p5-training").read_text()))
