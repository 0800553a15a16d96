import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# ../shared/cases beside the project (CI lays shared/ beside the clone); override with TRACEFENCE_CASES.
SHARED_CASES = Path(os.environ.get("TRACEFENCE_CASES", ROOT.parent / "shared" / "cases"))


@pytest.fixture
def config():
    from otel_tracefence.config import TraceFenceConfig

    return TraceFenceConfig()
