"""Third-party checks from the `dldoctor.checks` entry-point group, and switching them off."""

from __future__ import annotations

import os

from tests.support.cli import findings_of, report_of, run_dldoctor, verdicts
from tests.support.paths import HOSTS
from tests.support.plugins import install_fake_distribution

PLUGIN = """
from dldoctor.model import warned
from dldoctor.registry import check
from dldoctor.facts import system


@check("site.hostname", "Site naming", remediation="Rename the node.")
def hostname_convention(facts, policy):
    name = facts.get(system.hostname)
    return warned(f"{name} does not follow the site's naming")
"""


def run_with(tmp_path, *args, **env):
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "DLDOCTOR_NO_PLUGINS": "", **env}  # fmt: skip
    return run_dldoctor("--check", "--json", "--from", str(HOSTS / "ubuntu2204-healthy"), *args,
                        env=env)  # fmt: skip


def test_plugin_checks_run_and_can_be_switched_off(tmp_path):
    install_fake_distribution(tmp_path, "dldoctor-site", PLUGIN, "dldoctor_site_checks")
    report = report_of(run_with(tmp_path))
    finding = {f["id"]: f for f in report["findings"]}["site.hostname"]
    assert finding["status"] == "warn"
    assert finding["summary"] == "gpu-node-01 does not follow the site's naming"
    assert finding["source"] == "dldoctor-site"
    assert "site.hostname" not in verdicts(report_of(run_with(tmp_path, "--no-plugins")))
    assert "site.hostname" not in verdicts(report_of(run_with(tmp_path, DLDOCTOR_NO_PLUGINS="1")))


def test_a_broken_plugin_is_an_error_finding_not_a_crash(tmp_path):
    install_fake_distribution(tmp_path, "dldoctor-broken", "raise ImportError('no numpy')\n",
                              "dldoctor_broken_checks")  # fmt: skip
    proc = run_with(tmp_path)
    report = report_of(proc)
    errors = [f for f in report["findings"] if f["id"] == "plugins.load"]
    assert len(errors) == 1 and "ImportError: no numpy" in errors[0]["summary"]
    assert proc.returncode == 3  # the run could not do all it was asked to


def test_a_plugin_cannot_take_a_builtin_id(tmp_path):
    source = PLUGIN.replace('"site.hostname"', '"system.memory"')
    install_fake_distribution(tmp_path, "dldoctor-clash", source, "dldoctor_clash_checks")
    report = report_of(run_with(tmp_path))
    memory = [f for f in report["findings"] if f["id"] == "system.memory"]
    assert [f["source"] for f in memory] == ["builtin"]
    assert any(
        "already taken" in f["summary"] for f in report["findings"] if f["id"] == "plugins.load"
    )


def test_the_cheap_scan_sees_a_declared_group_and_only_then_skips(tmp_path, monkeypatch):
    from dldoctor.registry import may_have_plugins

    other = tmp_path / "other-1.0.dist-info"
    other.mkdir(parents=True)
    (other / "entry_points.txt").write_text("[console_scripts]\nother = other:main\n")
    monkeypatch.setattr("sys.path", [str(tmp_path), str(tmp_path / "absent")])
    assert not may_have_plugins()
    install_fake_distribution(tmp_path, "dldoctor-site", PLUGIN, "dldoctor_site_checks")
    assert may_have_plugins()


def test_the_cheap_scan_never_rules_out_what_it_cannot_read(tmp_path, monkeypatch):
    from dldoctor.registry import may_have_plugins

    archive = tmp_path / "plugins.zip"
    archive.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip archive on sys.path
    monkeypatch.setattr("sys.path", [str(archive)])
    assert may_have_plugins()
    (tmp_path / "old.egg").mkdir()
    monkeypatch.setattr("sys.path", [str(tmp_path)])
    assert may_have_plugins()


REQUIRING_PLUGIN = """
from dldoctor.checks.needs import nvidia_gpus
from dldoctor.facts import system
from dldoctor.model import passed, skipped
from dldoctor.registry import check


def site_node(facts):
    if not facts.get(system.hostname).startswith("gpu-"):
        return skipped("not a node of the GPU cluster")
    return None


@check("site.gpu_burn", "GPU burn-in", requires=nvidia_gpus)
def gpu_burn(facts, policy):
    raise AssertionError("ran without GPUs")


@check("site.rack", "Rack label", requires=(site_node,))
def rack(facts, policy):
    return passed("labelled")
"""


def test_a_plugin_check_can_require_what_builtin_checks_require(tmp_path):
    install_fake_distribution(tmp_path, "dldoctor-req", REQUIRING_PLUGIN, "dldoctor_req_checks")
    findings = {f["id"]: f for f in findings_of(report_of(run_with(tmp_path)))}
    burn = findings["site.gpu_burn"]  # the fixture host has no NVIDIA stack
    assert (burn["status"], burn["summary"]) == (
        "skip",
        "neither NVML (nvidia-ml-py) nor nvidia-smi is available",
    )
    assert {"op": "probe", "key": "nvml", "status": "missing"} in burn["evidence"]
    assert (findings["site.rack"]["status"], findings["site.rack"]["summary"]) == (
        "pass",
        "labelled",
    )
