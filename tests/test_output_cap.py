"""A tool that prints without end costs a bounded amount of memory and time.

`dldoctor --check --json` runs with a fake `nvidia-smi` (NVML made absent, so that it is
the driver's source) or a fake `lspci` first on PATH that prints `yes` for ever, on stdout
or on stderr. The run must end within the command timeout + 2 s, with a peak RSS of at
most 100 MiB (its VmHWM, polled while it runs), leave no process
behind, and name the truncation in the finding that used the command.
"""

from __future__ import annotations

import json

import pytest

from dldoctor.host.base import MAX_STDERR_BYTES, stdout_cap
from tests.support.commands import fake_command
from tests.support.marks import DEADLINES
from tests.support.measuring import measured
from tests.support.paths import HOSTS

pytestmark = DEADLINES

ROOT = HOSTS / "hgx-h100x8-healthy" / "files"
TIMEOUT = 2
CHECKS = {"nvidia-smi": "gpu.driver.loaded", "lspci": "pci.acs"}


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
@pytest.mark.parametrize("tool", sorted(CHECKS))
def test_a_tool_printing_without_end_is_cut_and_named(tmp_path, tool, stream):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake_command(bindir, tool, "exec yes" + (" >&2" if stream == "stderr" else ""))
    code, elapsed, peak_mib, out, _ = measured(
        tmp_path, "--check", "--json", "--timeout", str(TIMEOUT), "--root", str(ROOT),
        bindir=bindir,
    )  # fmt: skip
    assert peak_mib <= 100, f"peak RSS {peak_mib:.0f} MiB"
    assert code in (1, 3), code  # a report: failed or incomplete
    cap = stdout_cap([tool]) if stream == "stdout" else MAX_STDERR_BYTES
    finding = {f["id"]: f for f in json.loads(out)["findings"]}[CHECKS[tool]]
    said = " ".join([finding["summary"], *finding["details"]])
    # Stopped at the cap while it printed: at the timeout it would say "did not answer".
    assert finding["status"] == "error", finding
    assert "did not answer" not in said, said
    assert f"`{tool} " in said and f"output truncated at {cap} bytes of {stream}" in said, said
