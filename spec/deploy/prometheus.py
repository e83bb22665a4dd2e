"""Debian's Prometheus and promtool for the rules' and dashboard's tests: found on PATH
(`make test` installs them as root), else the test fails with one line saying what to
install."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus" / "busbar.rules.yml"
RULE_TESTS = DEPLOY / "prometheus" / "busbar.rules.test.yml"
DASHBOARD = DEPLOY / "grafana" / "busbar.json"
INSTALL = "install Debian's prometheus (apt-get install prometheus; `make test` does it as root)"


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not on PATH: {INSTALL}", pytrace=False)
    return found


def rules() -> list[dict]:
    """Every rule of every group."""
    return [
        rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]
    ]
