"""What ships in deploy/: the Prometheus alerting rules pass `promtool check rules` and their unit tests
(`promtool test rules`), the example Prometheus configuration loads them, the Grafana dashboard is
well formed (tests/system/test_deploy_metrics.py checks its metrics against running processes), and
the /readyz the units' orchestrators use means "claiming", and the systemd units pass `systemd-analyze
verify` and run commands email-outbox accepts."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from email_outbox.metrics_server import MetricsServer
from email_outbox.worker.metrics import Health
from email_outbox.worker.stats import WorkerStats

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


def test_the_dashboard_is_grafana_json_with_a_query_in_every_panel() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "email-outbox.json").read_text())
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels), "panel ids are unique"
    graphs = [p for p in panels if p["type"] != "row"]
    assert graphs and all(p["targets"] and all(t["expr"].strip() for t in p["targets"]) for p in graphs)
    assert all(p["datasource"]["uid"] == "${datasource}" for p in graphs), (
        "the data source is picked at import"
    )
    titles = " ".join(p["title"] for p in panels).lower()
    for topic in ("queue", "send rate", "enqueue to send", "outcomes", "breaker", "quota", "events"):
        assert topic in titles, topic


def test_readyz_fails_while_the_replica_does_not_claim_and_healthz_does_not() -> None:
    stats = WorkerStats()
    stats.last_db_success = stats.last_loop = time.monotonic()
    stopping = threading.Event()
    running = Health(stats, stale_after=30, provider_enabled=True, stopping=stopping)
    assert running.check()[0] and running.ready()[0]
    disabled = Health(stats, stale_after=30, provider_enabled=False, stopping=stopping)
    assert disabled.check()[0] and not disabled.ready()[0]
    stopping.set()
    assert running.check()[0] and running.ready() == (False, {**running.check()[1], "ok": False})
    stats.last_db_success = time.monotonic() - 60
    assert not running.check()[0] and not running.ready()[0]


def test_the_metrics_server_answers_readyz_from_its_own_check() -> None:
    server = MetricsServer(
        "127.0.0.1", 0, CollectorRegistry(), lambda: (True, {"ok": True}), lambda: (False, {"ok": False})
    )
    server.start()
    try:
        for path, expected in (("/healthz", 200), ("/readyz", 503)):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=5) as response:
                    status = response.status
            except urllib.error.HTTPError as exc:
                status = exc.code
            assert status == expected, path
    finally:
        server.stop()


# --- systemd units ----------------------------------------------------------------------------------
SYSTEMD = DEPLOY / "systemd"
INSTALLED = "/opt/email-outbox/bin/email-outbox"
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def _unit_copies(target: Path) -> list[Path]:
    """The units as an install would place them, with ExecStart aimed at this environment's
    email-outbox (verify checks the command exists) and the worker template as instance 9101."""
    command = str(Path(sys.executable).parent / "email-outbox")
    copies = []
    for unit in sorted(SYSTEMD.iterdir()):
        copy = target / unit.name.replace("@.", "@9101.")
        copy.write_text(unit.read_text().replace(INSTALLED, command))
        copies.append(copy)
    return copies


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="no systemd-analyze (Debian's systemd package has it)")
def test_systemd_units_pass_systemd_analyze_verify_without_a_warning(tmp_path: Path) -> None:
    assert SYSTEMD_ANALYZE is not None
    copies = _unit_copies(tmp_path)
    assert {c.name for c in copies} >= {
        "email-outbox-worker@9101.service",
        "email-outbox-workers.target",
        "email-outbox-events.service",
        "email-outbox-console.service",
    }
    result = subprocess.run(
        [SYSTEMD_ANALYZE, "verify", "--man=no", *map(str, copies)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    # An unknown key or a bad value is only a warning to systemd: any output fails the test.
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def _exec_start(unit: str) -> list[str]:
    (line,) = [line for line in (SYSTEMD / unit).read_text().splitlines() if line.startswith("ExecStart=")]
    words = shlex.split(line.removeprefix("ExecStart="))
    assert words[0] == INSTALLED
    return [w.replace("%i", "9101").replace("%H", "host") for w in words[1:]]


@pytest.mark.parametrize(
    "unit",
    [
        "email-outbox-worker@.service",
        "email-outbox-events.service",
        "email-outbox-console.service",
        "email-outbox-retention.service",
    ],
)
def test_each_units_command_is_one_email_outbox_accepts(unit: str) -> None:
    from email_outbox.cli.main import build_parser

    args = build_parser().parse_args(_exec_start(unit))
    assert args.dsn_file.startswith("${CREDENTIALS_DIRECTORY}/"), "the DSN comes from a credential file"
    assert getattr(args, "dsn", None) is None


def test_the_worker_unit_waits_longer_than_the_workers_stop_bound() -> None:
    from email_outbox.worker.config import load_config
    from email_outbox.worker.process import EXIT_ROWS_LEFT

    text = (SYSTEMD / "email-outbox-worker@.service").read_text()
    (stop,) = [int(line.split("=")[1]) for line in text.splitlines() if line.startswith("TimeoutStopSec=")]
    assert stop > load_config({"dsn": "mysql://u@h/db"}, {}).stop_bound_seconds
    assert f"SuccessExitStatus={EXIT_ROWS_LEFT}" in text, "a stop that left rows to the sweep is no failure"
    assert "--metrics-port %i" in text, "the instance names the replica's metrics port"


@needs_promtool
def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    """promtool parses each query as a recording rule's expression (Grafana's $__rate_interval as 5m)."""
    dashboard = json.loads((DEPLOY / "grafana" / "email-outbox.json").read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query_{n}", "expr": q.replace("$__rate_interval", "5m")}
                    for n, q in enumerate(queries)
                ],
            }
        ]
    }
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(json.dumps(rules))  # JSON is YAML
    result = promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(queries)} rules found" in result.stdout
