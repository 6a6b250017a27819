"""nvidia-bug-report logs as input (docs/foreign-inputs.md, "nvidia-bug-report"): the
section parser, the Host it makes, the facts it feeds (driver, GPUs, Xid, PCIe, modules),
"not captured" as a skip, conversion into a bundle, and hostile logs."""

from __future__ import annotations

import gzip
import json
import os
import tarfile

import pytest

from dldoctor.facts import Facts
from dldoctor.facts.kmod import modules
from dldoctor.facts.lspci import LspciBus, parse_lspci
from dldoctor.facts.nvidia import nvidia
from dldoctor.facts.nvsmi_text import parse_nvidia_smi_text
from dldoctor.facts.pci import pci_devices
from dldoctor.facts.pcie import pcie_links
from dldoctor.facts.xid import xid_events
from dldoctor.host.base import AnswerStatus, NotCaptured
from dldoctor.host.bugreport import (
    BadLog,
    BugReportHost,
    command_words,
    open_bug_report,
    parse_bug_report,
    read_log,
    recognise,
)
from dldoctor.host.replay import ReplayHost
from dldoctor.policy import Policy
from dldoctor.registry import builtin_checks
from dldoctor.runner import run_check
from tests.support.bugreports import CORPUS, REAL, write_constructed, write_real
from tests.support.cli import findings_of, report_of, run_dldoctor
from tests.support.paths import HOSTS, TESTS

GOLDEN = TESTS / "golden" / "bugreports"
SMI_Q = sorted((CORPUS / "nvidia-smi-q").glob("*.txt"))


def real_text() -> bytes:
    return gzip.decompress(REAL.read_bytes())


@pytest.fixture(params=["real.log.gz", "real.log", "constructed.log.gz", "constructed.log"])
def log(request, tmp_path):
    """(name, path) of each fixture log, in both forms the script writes."""
    kind, _, form = request.param.partition(".")
    write = write_real if kind == "real" else write_constructed
    return kind, write(tmp_path, compressed=form.endswith("gz"))


# --- the section parser, on the real log -----------------------------------------------


def test_prologue_and_sections_of_a_real_log():
    report = parse_bug_report(real_text())
    assert (report.version, report.hostname, report.kernel_release) == (
        "20083567",
        "shield-616-2",
        "4.2.0-22-generic",
    )
    assert report.date == "Mon Dec 21 01:42:03 MST 2015"
    assert report.complete
    kinds = {s.name: s.kind for s in report.sections}
    # "*** /proc/driver/nvidia/./version" is the file /proc/driver/nvidia/version.
    assert kinds["/proc/driver/nvidia/version"] == "file"
    assert kinds["/proc/modules"] == "file"
    assert kinds["/proc/pci"] == "missing"  # "*** /proc/pci does not exist"
    assert kinds["dmesg"] == "command"  # "dmesg:"
    assert kinds['/usr/bin/lspci -d "10de:*" -v -xxx'] == "command"


def test_a_file_section_is_the_file_s_bytes():
    sections = {s.name: s for s in parse_bug_report(real_text()).sections}
    # Not the "*** ls:" line, and not the newline report_file() adds after the file.
    assert sections["/proc/version"].body == (
        b"Linux version 4.2.0-22-generic (buildd@lcy01-22) (gcc version 5.2.1 20151010 "
        b"(Ubuntu 5.2.1-22ubuntu2) ) #27-Ubuntu SMP Thu Dec 17 22:57:08 UTC 2015\n"
    )
    assert sections["/proc/modules"].body.startswith(b"binfmt_misc 20480 1 - Live ")


def test_commands_that_share_a_block_are_split():
    # report_command() puts `nvidia-smi -q` and `nvidia-smi -q -u` under one separator.
    sections = {s.name: s for s in parse_bug_report(real_text()).sections}
    query, units = sections["/usr/bin/nvidia-smi -q"], sections["/usr/bin/nvidia-smi -q -u"]
    assert b"Product Name                    : GeForce GTX TITAN X" in query.body
    assert b"Attached Units" not in query.body
    assert b"Attached Units                      : 0" in units.body
    assert units.line > query.line


def test_command_lines_become_the_argv_a_fact_asks():
    assert command_words('/usr/bin/lspci -d "10de:*" -v -xxx') == (
        "lspci", "-d", "10de:*", "-v", "-xxx",
    )  # fmt: skip
    assert command_words("/sbin/modinfo nvidia | grep vermagic")[:2] == ("modinfo", "nvidia")
    assert command_words('unbalanced "quote') == ()


def test_the_host_answers_what_the_log_holds_and_nothing_else():
    host = BugReportHost(parse_bug_report(real_text()))
    assert host.read("/proc/driver/nvidia/version").text.startswith(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  352.63"
    )
    assert host.read("/proc/pci").status == AnswerStatus.MISSING  # the log says it does not exist
    mdstat = host.read("/proc/mdstat")  # never looked at: not "missing on the host"
    assert (mdstat.status, mdstat.error) == (
        AnswerStatus.NOT_CAPTURED,
        "not in this nvidia-bug-report (/proc/mdstat, not captured)",
    )
    assert host.run(["nvidia-smi", "-q", "-x"]).status == AnswerStatus.NOT_CAPTURED
    assert host.run(["nvidia-smi", "-q"]).value.stdout.count(b"NVSMI LOG") == 1
    assert host.run(["uname", "-a"]).text.startswith("Linux shield-616-2 4.2.0-22-generic")
    assert host.read("/proc/sys/kernel/hostname").text == "shield-616-2\n"
    for answer in (host.listdir("/sys/bus/pci/devices"), host.readlink("/sys/bus/pci/devices/x"),
                   host.statvfs("/"), host.probe("nvml")):  # fmt: skip
        assert answer.status == AnswerStatus.NOT_CAPTURED
    assert host.describe() == (
        "nvidia-bug-report of shield-616-2, collected Mon Dec 21 01:42:03 MST 2015"
    )


def test_the_newer_spelling_of_a_command_answers_the_older_one(tmp_path):
    host = open_bug_report(str(write_constructed(tmp_path)))
    # The log has `nvidia-smi --query` and `nvlink --status`; facts ask `-q` and `-s`.
    assert host.run(["nvidia-smi", "-q"]).text.startswith("==============NVSMI LOG")
    assert "Link 17: 26.562 GB/s" in host.run(["nvidia-smi", "nvlink", "-s"]).text


# --- what the facts find in every fixture log --------------------------------------------

EXPECTED = {
    "real": {
        "driver": "352.63",
        "gpus": [("GeForce GTX TITAN X", "0000:06:00.0")],
        "xids": [],
        # lspci -v prints no link: it is the PCI Express capability of the hex dump.
        "links": {"0000:06:00.0": (2.5, 8.0, 16, 16)},
    },
    "constructed": {
        "driver": "590.48.01",
        "gpus": [("NVIDIA H100 80GB HBM3", "0000:00:09.0")],
        "xids": [(94, "0000:0f:00.0"), (64, "0000:0f:00.0")],
        "links": None,  # "Skipping: lspci output": not captured
    },
}


def test_driver_gpus_xid_and_pcie_of_every_fixture_log(log):
    kind, path = log
    expected = EXPECTED[kind]
    facts = Facts(open_bug_report(str(path)))
    stack = facts.get(nvidia)
    assert stack.usable and stack.source == "nvidia-smi"
    assert stack.driver_version == expected["driver"]
    assert [(g.name, g.pci_bus_id) for g in stack.gpus] == expected["gpus"]
    assert [(e.xid, e.pci_bus_id) for e in facts.get(xid_events).events] == expected["xids"]
    if expected["links"] is None:
        with pytest.raises(NotCaptured, match="`lspci`: not in this nvidia-bug-report"):
            facts.get(pcie_links)
        return
    links = {x.address: (x.current_gts, x.max_gts, x.current_width, x.max_width)
             for x in facts.get(pcie_links).links}  # fmt: skip
    assert links == expected["links"]


def test_the_module_version_comes_from_proc_without_sys_module():
    facts = Facts(open_bug_report(str(REAL)))
    mods = facts.get(modules)
    assert "nvidia" in mods.loaded and "nouveau" not in mods.loaded
    # /sys/module/nvidia/version is not in a bug report; /proc/driver/nvidia/version is.
    assert mods.nvidia_version == "352.63" == facts.get(nvidia).driver_version


def test_the_hex_decoded_link_agrees_with_nvidia_smi_in_the_same_log():
    """Two independent sections of one log: lspci's config space and nvidia-smi's maxima."""
    facts = Facts(open_bug_report(str(REAL)))
    gpu = facts.get(nvidia).gpus[0]
    link = facts.get(pcie_links).get(gpu.pci_bus_id)
    gen_rates = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0}
    assert (gen_rates[gpu.pcie_gen_max], gpu.pcie_width_max) == (link.max_gts, link.max_width)
    assert facts.get(pci_devices).gpus("10de")[0].driver == "nvidia"
    assert facts.get(pci_devices).read_in_full  # `lspci -nn` lists the whole bus


# --- the lspci and nvidia-smi -q parsers on real captures --------------------------------


def test_lspci_text_links_and_ports_of_a_real_hgx_capture():
    text = gzip.decompress((CORPUS / "lspci" / "gpud-dell-8xh100-lspci-vvv.txt.gz").read_bytes())
    devices, notes = parse_lspci(text.decode())
    assert notes == [] and len(devices) == 517
    by = {d.address: d for d in devices}
    gpus = [d for d in devices if d.vendor == "10de" and d.class_code == "0302"]
    assert len(gpus) == 8
    assert {(d.current_gts, d.max_gts, d.current_width, d.max_width, d.driver) for d in gpus} == {
        (32.0, 32.0, 16, 16, "nvidia")
    }
    switches = [d for d in devices if d.vendor == "10de" and d.class_code == "0680"]
    assert [d.driver for d in switches] == ["nvidia-nvswitch"] * 4
    # LnkSta "Speed 16GT/s (downgraded), Width x4 (ok)" under LnkCap 32GT/s x4.
    slow = [d for d in devices if d.current_gts == 16.0 and d.max_gts == 32.0 and d.max_width == 4]
    assert slow and all(d.link_from == "text" for d in slow)
    bus = LspciBus(tuple(devices), "lspci -vvv", complete=True)
    assert bus.upstream(by["0000:19:00.0"]) == ("0000:17:01.0", "0000:16:00.0", "0000:15:01.0")
    assert bus.upstream(by["0000:15:01.0"]) == ()  # a root port
    assert LspciBus(tuple(devices), "x", complete=False).upstream(by["0000:19:00.0"]) is None


def test_lspci_survives_cut_and_odd_blocks():
    text = gzip.decompress((CORPUS / "lspci" / "gpud-dell-8xh100-lspci-vvv.txt.gz").read_bytes())
    cut = text.decode()[: len(text) // 3]
    devices, _ = parse_lspci(cut + "\n00: zz zz\n0000:ff:00.0 3D controller: ")
    assert len(devices) > 100


@pytest.mark.parametrize("path", SMI_Q, ids=lambda p: p.name[:60])
def test_nvidia_smi_text_of_every_real_capture(path):
    text = path.read_text()
    stack = parse_nvidia_smi_text(text)
    assert stack.usable, stack.error_message
    lines = [line for line in text.splitlines() if line.startswith("GPU ")]
    assert [g.pci_bus_id for g in stack.gpus] == [line.split()[1][4:].lower() for line in lines]
    attached = next(line for line in text.splitlines() if line.startswith("Attached GPUs"))
    assert stack.attached_gpus == int(attached.split(":")[1]) == len(stack.gpus)
    version = next(line for line in text.splitlines() if line.startswith("Driver Version"))
    assert stack.driver_version == version.split(":")[1].split()[0]


def test_nvidia_smi_text_reads_what_the_checks_need():
    h100 = (
        CORPUS
        / "nvidia-smi-q"
        / "utkuozdemir-linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01-q-idle.txt"
    )
    (gpu,) = parse_nvidia_smi_text(h100.read_text()).gpus
    assert (gpu.name, gpu.architecture, gpu.memory_total_mib) == ("NVIDIA H100 80GB HBM3",
                                                                 "Hopper", 81559)  # fmt: skip
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current) == (5, 5, 16)
    assert (gpu.temperature_c, gpu.power_draw_w, gpu.power_limit_w) == (41, 69.85, 700.0)
    assert (gpu.ecc_current, gpu.ecc_aggregate_uncorrected, gpu.remap_pending) == (True, 0, False)
    assert gpu.clock_event_reasons == ("gpu_idle",)
    assert (gpu.virtualization_mode, gpu.persistence_mode, gpu.mig_current) == (
        "passthrough", True, False,
    )  # fmt: skip
    # Page retirement reads N/A on Hopper: not supported, not "no pages retired".
    assert gpu.retired_pages_dbe is None


def test_nvidia_smi_text_of_a_page_retirement_query_counts_pages():
    edited = next(p for p in SMI_Q if "retired-pages-edited" in p.name)
    stack = parse_nvidia_smi_text(edited.read_text())
    assert [g.retired_pages_dbe for g in stack.gpus] == [5, 61, 0, 0, 0, 45, 0, 56]


@pytest.mark.parametrize("text", ["", "garbage\n\x00\xff", "GPU 0000:01:00.0\n    Product Name : X",
                                  "    Driver Version : 1\n" * 3])  # fmt: skip
def test_nvidia_smi_text_that_is_not_one_is_an_unreadable_answer(text):
    stack = parse_nvidia_smi_text(text)
    assert not stack.usable and "nvidia-smi -q" in stack.error_message


def test_a_driver_that_did_not_answer_is_what_nvidia_smi_printed(tmp_path):
    said = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running."
    )
    text = "".join(write_constructed(tmp_path, compressed=False).read_text().partition(
        "/usr/bin/nvidia-smi --query\n\n")[:2]) + said + "\n\n"  # fmt: skip
    path = tmp_path / "failed.log"
    path.write_text(text)
    stack = Facts(open_bug_report(str(path))).get(nvidia)
    assert (stack.error, stack.error_message) == ("driver_not_loaded", said)


# --- not captured: a skip that says so ----------------------------------------------------


def _findings(path) -> list[dict]:
    proc = run_dldoctor("--check", "--json", "--from", str(path))
    assert proc.stderr == "", proc.stderr
    return findings_of(report_of(proc))


def test_every_outcome_resting_on_an_uncaptured_answer_is_a_skip_saying_so(log):
    _, path = log
    findings = _findings(path)
    judged = 0
    for f in findings:
        uncaptured = [e for e in f["evidence"] if e["status"] == AnswerStatus.NOT_CAPTURED]
        if uncaptured:
            assert f["status"] == "skip", f
            assert "not captured" in f["summary"], f
        judged += f["status"] in ("pass", "warn", "fail")
    assert judged >= 8  # the driver, GPU, Xid and (real log) PCIe checks did run
    by_id = {f["id"]: f for f in findings}
    assert by_id["storage.raid"]["summary"] == (
        "not in this nvidia-bug-report (/proc/mdstat, not captured)"
    )


def test_a_fact_that_replaced_an_uncaptured_answer_keeps_its_verdict():
    host = open_bug_report(str(REAL))
    spec = next(s for s in builtin_checks() if s.id == "gpu.driver.version")
    finding = run_check(spec, Facts(host), Policy())
    # NVML and `nvidia-smi -q -x` were not captured; `nvidia-smi -q` was, and answered.
    assert finding.status == "warn" and "352.63" in finding.summary
    assert [str(e) for e in finding.evidence] == ["run nvidia-smi -q"]


def test_bundles_and_live_hosts_never_answer_not_captured():
    # The golden files of every fixture host are unchanged by this status; a bundle that
    # lacks a file still means "missing on that host".
    findings = _findings(HOSTS / "ubuntu2204-healthy")
    assert all(e["status"] != AnswerStatus.NOT_CAPTURED for f in findings for e in f["evidence"])
    assert all("not captured" not in f["summary"] for f in findings)


# --- the CLI: report header, golden verdicts, conversion into a bundle --------------------


def test_the_report_header_names_the_source():
    proc = run_dldoctor("--check", "--from", str(REAL), "--color", "never")
    first = proc.stdout.splitlines()[0]
    assert "nvidia-bug-report of shield-616-2, collected Mon Dec 21 01:42:03 MST 2015" in first


@pytest.mark.parametrize("kind", ["real", "constructed"])
def test_verdicts_match_the_golden_file(kind, tmp_path):
    path = write_real(tmp_path) if kind == "real" else write_constructed(tmp_path)
    proc = run_dldoctor("--check", "--json", "--from", str(path))
    report = report_of(proc)
    found = {
        "exit_code": proc.returncode,
        "host": {k: report["host"][k] for k in ("hostname", "os", "kernel", "source")},
        "verdicts": {f["id"]: [f["status"], f["summary"]] for f in report["findings"]},
    }
    golden = GOLDEN / f"{kind}.json"
    if os.environ.get("DLDOCTOR_UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(json.dumps(found, indent=2, ensure_ascii=False) + "\n")
    assert found == json.loads(golden.read_text())


def test_snapshot_converts_a_log_into_a_redacted_bundle_that_replays_alike(tmp_path):
    bundle = tmp_path / "case.tar.gz"
    proc = run_dldoctor("snapshot", "--from", str(REAL), "-o", str(bundle))
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(bundle) as tar:
        contents = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())
    assert b"nvidia-smi" in contents  # the GPU answers are kept ...
    for private in (b"shield-616-2", b"GPU-465c200a-55e4-f8cd-421f-dba04acf20bf", b"0422715081539"):
        assert private not in contents  # ... the host name, GPU UUID and serial are not
    direct = {f["id"]: (f["status"], f["summary"]) for f in _findings(REAL)}
    replayed = {f["id"]: (f["status"], f["summary"]) for f in _findings(bundle)}
    assert {k: v[0] for k, v in replayed.items()} == {k: v[0] for k, v in direct.items()}
    assert replayed["gpu.driver.version"] == direct["gpu.driver.version"]


def test_a_converted_bundle_still_says_not_captured_for_what_no_one_asked(tmp_path):
    """A later dldoctor may ask a converted bundle something new: never "missing"."""
    folder = tmp_path / "case"
    proc = run_dldoctor("snapshot", "--dir", "--from", str(REAL), "-o", str(folder))
    assert proc.returncode == 0, proc.stderr
    assert json.loads((folder / "manifest.json").read_text())["absent"] == AnswerStatus.NOT_CAPTURED
    converted, ordinary = ReplayHost(str(folder)), ReplayHost(str(HOSTS / "ubuntu2204-healthy"))
    assert converted.read("/etc/never-asked").status == AnswerStatus.NOT_CAPTURED
    assert converted.run(["never-run"]).status == AnswerStatus.NOT_CAPTURED
    assert converted.read("/proc/modules").status == AnswerStatus.OK  # what the log held is kept
    assert ordinary.read("/etc/never-asked").status == AnswerStatus.MISSING
    again = tmp_path / "again"
    proc = run_dldoctor("snapshot", "--dir", "--from", str(HOSTS / "ubuntu2204-healthy"),
                        "-o", str(again))  # fmt: skip
    assert proc.returncode == 0 and "absent" not in json.loads(
        (again / "manifest.json").read_text()
    )


# --- hostile logs: one line, exit 4, never a traceback ------------------------------------


def _refused(path, *words: str) -> None:
    proc = run_dldoctor("--check", "--from", str(path))
    assert proc.returncode == 4, (proc.returncode, proc.stderr)
    assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for word in words:
        assert word in proc.stderr


def test_a_gzip_bomb_stops_at_the_cap(tmp_path):
    # 300 gzip members of 1 MiB of zeros each: 300 MiB inflated from about 300 KiB.
    member = gzip.compress(b"\0" * (1 << 20), compresslevel=9, mtime=0)
    bomb = tmp_path / "nvidia-bug-report.log.gz"
    bomb.write_bytes(member * 300)
    assert bomb.stat().st_size < 1 << 20
    _refused(bomb, "inflates past 256 MiB")


def test_a_truncated_log_is_refused(tmp_path):
    cut = tmp_path / "nvidia-bug-report.log.gz"
    cut.write_bytes(REAL.read_bytes()[:30_000])
    _refused(cut, "cut short")


@pytest.mark.parametrize(
    "data,words",
    [
        (bytes(range(256)) * 16, ["not an nvidia-bug-report log"]),
        (b"\x1f\x8b" + b"not deflate" * 100, ["not a valid gzip stream"]),
        (b"", ["not an nvidia-bug-report log"]),
    ],
    ids=["garbage", "garbage-with-gzip-magic", "empty"],
)
def test_garbage_is_refused(tmp_path, data, words):
    path = tmp_path / "nvidia-bug-report.log"
    path.write_bytes(data)
    _refused(path, *words)


def test_the_cap_holds_for_a_plain_log_too(tmp_path):
    path = tmp_path / "big.log"
    path.write_bytes(b"x" * 2048)
    with pytest.raises(BadLog, match="larger than"):
        read_log(str(path), cap=1024)
    assert len(read_log(str(path), cap=4096)) == 2048


def test_recognised_by_prologue_or_name_never_a_bundle(tmp_path):
    renamed = tmp_path / "case-1234"
    renamed.write_bytes(REAL.read_bytes())
    assert recognise(str(renamed))  # the prologue, whatever the name
    assert recognise(str(tmp_path / "x.log")) is False  # does not exist
    (tmp_path / "x.log").write_text("anything")
    assert recognise(str(tmp_path / "x.log"))
    assert not recognise(str(HOSTS / "ubuntu2204-healthy"))  # a bundle directory


def test_every_answer_of_a_parsed_log_is_one_of_the_host_statuses(tmp_path):
    host = open_bug_report(str(write_constructed(tmp_path)))
    statuses = {host.read(s.name).status for s in host.report.sections if s.kind != "command"}
    statuses |= {host.run(list(command_words(s.name))).status
                 for s in host.report.sections if s.kind == "command" and command_words(s.name)}  # fmt: skip
    assert statuses <= {AnswerStatus.OK, AnswerStatus.MISSING}


def test_the_app_shows_the_log_as_its_read_only_source():
    from dldoctor.registry import ordered
    from dldoctor.tui.session import Session

    host = open_bug_report(str(REAL))
    session = Session(lambda: host, Policy(), ordered(builtin_checks()), read_only=True,
                      label=str(REAL))  # fmt: skip
    session.start().join(timeout=30)
    view = session.host_view()
    assert (view.name, view.source) == ("shield-616-2", f"{REAL} (read-only)")
    assert "352.63" in view.driver


def test_a_log_the_script_did_not_finish_is_read_with_a_warning(tmp_path):
    text = gzip.decompress(REAL.read_bytes())
    cut = tmp_path / "nvidia-bug-report.log"
    cut.write_bytes(text[: text.index(b"*** /proc/cmdline")])  # hung after nvidia-settings
    proc = run_dldoctor("--check", "--json", "--from", str(cut))
    assert proc.stderr.splitlines() == [
        f"dldoctor: {cut}: no epilogue: the script did not finish (it hung, or the log is cut)"
    ]
    by_id = {f["id"]: f for f in report_of(proc)["findings"]}
    assert by_id["gpu.xid"]["status"] == "pass"  # dmesg came before the cut
    assert "not captured" in by_id["system.memory"]["summary"]  # /proc/meminfo after it
