"""The Prometheus rules an operator loads (deploy/prometheus/busbar.rules.yml) are valid
and each alert fires on the series that should fire it, and not on a healthy bus's:
promtool's own unit tests (busbar.rules.test.yml) run here, and every alert is tested
there and named in docs/operating.md. That the metrics they read are the ones busbar
serves is spec/integration/test_alerts.py's, against a real busbar web."""

from __future__ import annotations

import re
import subprocess

from spec.deploy.prometheus import DEPLOY, RULE_TESTS, RULES, rules, tool


def test_promtool_finds_the_rules_valid():
    done = subprocess.run(
        [tool("promtool"), "check", "rules", str(RULES)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_fires_as_its_unit_tests_say():
    done = subprocess.run(
        [tool("promtool"), "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent,
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    tested = set(re.findall(r"alertname: (\w+)", RULE_TESTS.read_text()))
    assert tested == {r["alert"] for r in rules() if "alert" in r}  # none untested


def test_every_alert_docs_operating_names_is_a_rule():
    page = (DEPLOY.parent / "docs" / "operating.md").read_text()
    listed = set(re.findall(r"`(Busbar[A-Za-z]+)`", page))
    assert listed == {r["alert"] for r in rules() if "alert" in r}
