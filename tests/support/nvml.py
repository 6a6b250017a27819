"""The NVML probe run over a fake pynvml, its answer parsed as a bundle would hold it."""

from __future__ import annotations

import json

from dldoctor.facts import gpu as g
from dldoctor.facts.nvidia import parse_nvml_probe
from dldoctor.nvml_probe import collect
from tests.support.fake_pynvml import FakeNvml


def probe_and_parse(fake: FakeNvml) -> tuple[dict, g.NvidiaStack]:
    data = collect(fake)
    # The answer must survive a bundle: JSON out and back.
    data = json.loads(json.dumps(data))
    return data, parse_nvml_probe(data)
