"""Record this machine, write the bundle, replay it: the same findings (issue [1/9] #5)."""

from __future__ import annotations

from dldoctor.diagnose import diagnose
from dldoctor.host import LiveHost, RecordingHost
from dldoctor.host.replay import ReplayHost
from dldoctor.policy import Policy
from dldoctor.registry import builtin_checks, ordered
from tests.support.cli import report_of, run_dldoctor


def comparable(report):
    # Evidence as a set: probes that run in parallel (statvfs of several mounts) are noted
    # in the order they answer, which a live run and its replay need not share.
    return [(f.id, f.status, f.summary, f.details, sorted(map(str, f.evidence)))
            for f in report.findings]  # fmt: skip


def test_record_write_replay_gives_identical_findings(tmp_path):
    specs = ordered(builtin_checks())
    recorder = RecordingHost(LiveHost())
    live = diagnose(recorder, Policy(), specs)
    bundle = recorder.write_bundle(str(tmp_path / "bundle"), report=live.to_dict())
    replayed = diagnose(ReplayHost(bundle), Policy(), specs)
    assert comparable(replayed) == comparable(live)
    assert replayed.host["hostname"] == live.host["hostname"]
    # The CLI replays the same bundle to the same verdicts.
    cli = report_of(run_dldoctor("--check", "--json", "--from", bundle))
    assert [(f["id"], f["status"], f["summary"]) for f in cli["findings"]] == [
        (f.id, f.status.value, f.summary) for f in live.findings
    ]
