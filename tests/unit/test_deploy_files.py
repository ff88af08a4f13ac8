"""deploy/compose.yaml and deploy/Containerfile agree with the Makefile that builds the image
(make image; its smoke test is tests/container, run by make image-test)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_compose_runs_the_image_make_builds_on_postgresql() -> None:
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    image = re.search(r"^IMAGE\s*\?=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M)
    assert image is not None
    server = compose["services"]["synapsedb"]
    assert server["image"] == image[1]
    assert server["environment"]["SYNAPSEDB_STORAGE"].startswith("postgresql://")
    assert "@postgres:5432/" in server["environment"]["SYNAPSEDB_STORAGE"]
    assert server["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "synapse-data:/data" in server["volumes"]
    assert compose["services"]["postgres"]["image"].startswith("docker.io/library/postgres:")


def test_the_containerfile_serves_from_the_data_volume() -> None:
    text = (ROOT / "deploy" / "Containerfile").read_text()
    assert 'ENTRYPOINT ["synapsedb"]' in text and 'CMD ["serve"]' in text
    assert "SYNAPSEDB_DATA=/data" in text and "VOLUME /data" in text
    assert "synapsedb models install" in text  # the model is in the image
