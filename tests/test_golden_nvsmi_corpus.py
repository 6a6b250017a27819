"""Every corpus `nvidia-smi -q -x` document, replayed as the only GPU source of a host,
gives the verdicts in golden/nvidia-smi-xml.json (DLDOCTOR_UPDATE_GOLDEN=1 rewrites it;
review the diff)."""

from __future__ import annotations

import json
import os

from dldoctor.diagnose import diagnose
from dldoctor.host.replay import ReplayHost
from dldoctor.policy import Policy
from dldoctor.registry import builtin_checks, ordered, select
from tests.support.bundlebuilder import BundleBuilder
from tests.support.paths import FIXTURES, TESTS

CORPUS = FIXTURES / "corpus/nvidia-smi-xml"
GOLDEN = TESTS / "golden/nvidia-smi-xml.json"


def verdict_table(tmp_path) -> dict[str, dict[str, str]]:
    specs = select(ordered(builtin_checks()), ["gpu"], [])
    table = {}
    for xml in sorted(CORPUS.glob("*.xml")):
        # No nvml.json in the bundle: NVML "missing", so the doctor falls back to nvidia-smi.
        b = BundleBuilder(tmp_path / xml.stem).command(["nvidia-smi", "-q", "-x"], xml.read_text())
        report = diagnose(ReplayHost(str(b.root)), Policy(), specs)
        table[xml.name] = {f.id: f"{f.status.value}: {f.summary}" for f in report.findings}
    return table


def test_corpus_verdicts_match_the_golden_table(tmp_path):
    table = verdict_table(tmp_path)
    assert len(table) == len(list(CORPUS.glob("*.xml"))) >= 9
    if os.environ.get("DLDOCTOR_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(table, indent=2, ensure_ascii=False) + "\n")
    assert table == json.loads(GOLDEN.read_text())
