"""What ships in deploy/: the Prometheus alerting rules pass `promtool check rules` and their unit tests
(`promtool test rules`), and the example Prometheus configuration loads them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PROMETHEUS = DEPLOY / "prometheus"
PROMTOOL = shutil.which("promtool")

needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="no promtool: Debian's prometheus package has it (make system-deps installs it)"
)


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=PROMETHEUS, capture_output=True, text=True, timeout=120)


@needs_promtool
def test_alerting_rules_pass_promtool_check() -> None:
    result = promtool("check", "rules", "email-outbox-alerts.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@needs_promtool
def test_each_alerting_rule_passes_its_unit_tests() -> None:
    result = promtool("test", "rules", "email-outbox-alerts.test.yml")
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_every_alert_has_a_unit_test_that_fires_it() -> None:
    rules = (PROMETHEUS / "email-outbox-alerts.yml").read_text()
    tests = (PROMETHEUS / "email-outbox-alerts.test.yml").read_text()
    alerts = {
        line.split(":", 1)[1].strip() for line in rules.splitlines() if line.strip().startswith("- alert:")
    }
    assert len(alerts) >= 10
    fired = set()
    blocks = tests.split("alertname: ")[1:]
    for block in blocks:
        name, _, rest = block.partition("\n")
        if "exp_labels" in rest.split("alertname: ")[0]:
            fired.add(name.strip())
    assert alerts - fired == set(), "alerts no unit test sees firing"


@needs_promtool
def test_example_prometheus_configuration_loads_the_rules() -> None:
    result = promtool("check", "config", "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 rule files found" in result.stdout
