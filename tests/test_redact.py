"""Redaction of bundles (snapshots/redact.py): nothing identifying survives, the shapes that
parsers need do, and a redacted bundle replays to the same findings."""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import re
import shutil
import stat

import pytest

from dldoctor.diagnose import diagnose
from dldoctor.host.replay import ReplayHost
from dldoctor.policy import Policy
from dldoctor.registry import builtin_checks, ordered
from dldoctor.snapshots.bundle import BundleReader, file_digests
from dldoctor.snapshots.redact import Redactor, redact_bundle, secret_name
from dldoctor.snapshots.take import report_members
from tests.support.bundlebuilder import BundleBuilder
from tests.support.paths import HOSTS
from tests.support.planted import FQDN, SHORT, USER, planted_host, planted_values
from tests.support.trees import bundle_contents

SCENARIOS = sorted(p.name for p in HOSTS.iterdir() if p.is_dir())


def findings(path, redactor: Redactor | None = None) -> dict[str, tuple[str, str]]:
    report = diagnose(ReplayHost(str(path)), Policy(), ordered(builtin_checks()))
    restore = redactor.restore if redactor else (lambda s: s)
    return {f.id: (f.status.value, restore(f.summary)) for f in report.findings}


def members(root) -> dict[str, bytes]:
    """Every member name -> its bytes (a link: its target)."""
    return {
        rel: v if kind == "file" else v.encode() for rel, (kind, v) in bundle_contents(root).items()
    }


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_redacted_fixture_host_replays_to_the_same_findings(tmp_path, scenario):
    copy = tmp_path / scenario
    shutil.copytree(HOSTS / scenario, copy, symlinks=True)
    report = diagnose(ReplayHost(str(copy)), Policy(), ordered(builtin_checks()))
    for rel, data in {"report.json": json.dumps(report.to_dict()).encode(),
                      **report_members(report)}.items():  # fmt: skip
        (copy / rel).write_bytes(data)  # as a snapshot writes them
    redactor = Redactor()
    redact_bundle(str(copy), redactor)
    before, after = findings(HOSTS / scenario), findings(copy, redactor)
    assert {k: v[0] for k, v in after.items()} == {k: v[0] for k, v in before.items()}
    assert after == before
    # The report inside says the same, but for pseudonyms of what its sources redacted too:
    # cuDNN 9.1.0.70 is no address, in the report as in the pip listing it came from.
    sources = "\n".join(data.decode("latin-1") for rel, data in members(copy).items()
                         if not rel.startswith("report."))  # fmt: skip
    inside = json.loads((copy / "report.json").read_text())["findings"]
    for finding in inside:
        assert redactor.restore(finding["summary"]) == before[finding["id"]][1]
        for pseudonym, original in redactor.shown.items():
            if pseudonym in finding["summary"]:
                assert not re.search(rf"(?<![\w.]){re.escape(original)}(?![\w])", sources), (
                    finding["summary"], original)  # fmt: skip
    for rel in ("report.md", "report.html"):
        versions = re.findall(r"cuDNN \d+\.\d+\.\d+\.\d+", report_members(report)[rel].decode())
        assert re.findall(r"cuDNN \d+\.\d+\.\d+\.\d+", (copy / rel).read_text()) == versions
    # The host's own name is gone from every member, names included.
    hostname = (HOSTS / scenario / "files/proc/sys/kernel/hostname").read_text().strip()
    for rel, data in members(copy).items():
        assert hostname.lower() not in rel.lower() + data.decode("latin-1").lower(), rel


def test_no_planted_value_survives_in_any_member_name_or_byte(tmp_path):
    root = planted_host(tmp_path / "planted")
    text = "\n".join(f"{k}\n{v.decode('latin-1')}" for k, v in members(root).items()).lower()
    assert all(v.lower() in text for v in planted_values()[:21])  # the plant took
    redact_bundle(str(root), Redactor())
    text = "\n".join(f"{k}\n{v.decode('latin-1')}" for k, v in members(root).items()).lower()
    left = [v for v in planted_values() if v.lower() in text]
    assert left == []
    # The content_b64 of an answer was redacted as the file it stands for: an environment,
    # whose variables no check reads keep their names only.
    answers = json.loads((root / "answers.json").read_text())
    raw = base64.b64decode(answers["read"]["/proc/1/environ"]["content_b64"])
    assert raw == b"HF_TOKEN=\0USER="


def test_redaction_keeps_what_replay_and_support_need(tmp_path):
    root = planted_host(tmp_path / "planted")
    r = Redactor()
    redact_bundle(str(root), r)
    ip_addr = (root / "commands/ip_addr/stdout").read_text()
    # Addresses keep their kind; broadcast and loopback stay.
    assert "brd ff:ff:ff:ff:ff:ff" in ip_addr
    found = {ipaddress.ip_interface(w).ip for w in re.findall(r"(?:inet6?|peer) (\S+)", ip_addr)}
    private = [a for a in found if a.version == 4 and a.is_private and not a.is_link_local]
    assert len(private) == 2 and any(a.is_link_local for a in found if a.version == 4)
    assert any(a.is_global for a in found if a.version == 4)
    assert any(a.version == 6 and a.is_link_local for a in found)
    assert "192.168.77.255" not in ip_addr  # a broadcast address names the subnet
    assert "127.0.0.1 localhost" in (root / "files/etc/hosts").read_text()
    # A MAC stays a MAC; a GUID stays xxxx:xxxx:xxxx:xxxx; a GPU UUID keeps its shape.
    mac = (root / "files/sys/class/net/eno1/address").read_text().strip()
    assert len(mac.split(":")) == 6 and all(len(o) == 2 for o in mac.split(":"))
    guid = (root / "files/sys/class/infiniband/mlx5_0/node_guid").read_text().strip()
    assert [len(g) for g in guid.split(":")] == [4, 4, 4, 4]
    ibstat = (root / "commands/ibstat/stdout").read_text()
    assert ibstat == f"Node GUID: 0x{guid.replace(':', '')}\n"  # one GUID, one pseudonym
    nvml = json.loads((root / "nvml.json").read_text())
    uuid = nvml["value"]["devices"][0]["fields"]["uuid"]["value"]
    assert uuid.startswith("GPU-") and [len(p) for p in uuid.split("-")] == [3, 8, 4, 4, 4, 12]
    nvsmi = (root / "commands/nvidia-smi_-q_-x/stdout").read_text()
    assert f"<uuid>{uuid}</uuid>" in nvsmi
    # PCI addresses, versions and models are kept.
    fields = nvml["value"]["devices"][0]["fields"]
    assert fields["pci_bus_id"]["value"] == "00000000:18:00.0"
    assert fields["name"]["value"] == "NVIDIA H100 80GB HBM3"
    assert nvml["value"]["system"]["driver_version"]["value"] == "550.54.15"
    # Names: the home folder is renamed like the paths that name it; the hostname file
    # keeps the FQDN's shape.
    assert list((root / "files/home").iterdir())[0].name == r.users.user(USER)
    assert (root / "files/etc/hostname").read_text() == r.hosts.host(FQDN) + "\n"
    assert (
        r.hosts.host(FQDN)
        == f"{r.hosts.host(SHORT)}.{r.hosts.domain('corp.planted-domain.example')}"
    )
    # What a check reads of the environment stays (PATH: the NUMA checks, nvcc); any other
    # variable keeps its name only.
    env = (root / "files/proc/self/environ").read_bytes().split(b"\0")
    assert b"PATH=/usr/bin:/bin" in env and b"LANG=" in env and b"HTTPS_PROXY=" in env
    assert env[-1] == b""  # the trailing NUL


def test_the_manifest_is_recomputed_and_verifies(tmp_path):
    root = planted_host(tmp_path / "planted")
    files = {rel: data for rel, data in members(root).items() if os.path.isfile(root / rel)
             and not os.path.islink(root / rel)}  # fmt: skip
    manifest = {"format": "dldoctor-bundle", "format_version": 1, "argv": ["dldoctor", "snapshot"],
                "note": f"taken on {SHORT}", "files": file_digests(files)}  # fmt: skip
    (root / "manifest.json").write_text(json.dumps(manifest))
    redact_bundle(str(root), Redactor())
    reader = BundleReader(str(root))
    assert reader.verify() == []
    names = set(reader.manifest["files"])
    assert names == {rel.replace(USER, "user-0001") for rel in files if rel != "manifest.json"}
    assert SHORT not in reader.manifest["note"]


def test_one_map_gives_the_same_pseudonyms_to_every_bundle(tmp_path):
    map_path = tmp_path / "private" / "map.json"
    map_path.parent.mkdir()
    first, second = planted_host(tmp_path / "a"), planted_host(tmp_path / "b")
    r = Redactor.load(str(map_path))  # no file yet: a new map
    redact_bundle(str(first), r)
    r.save(str(map_path))
    assert stat.S_IMODE(os.stat(map_path).st_mode) == 0o600
    saved = json.loads(map_path.read_text())
    assert saved["kinds"]["host"][SHORT.lower()] == "host-0001"
    # A fresh redactor from the saved map, on another copy: byte-identical result.
    redact_bundle(str(second), Redactor.load(str(map_path)))
    assert members(first) == members(second)
    # Redacting a redacted bundle again with the map changes nothing.
    again = Redactor.load(str(map_path))
    redact_bundle(str(second), again)
    assert members(first) == members(second)
    assert again.kinds == saved["kinds"]


@pytest.mark.parametrize(
    "text",
    [
        "NVIDIA driver 550.54.15, CUDA 12.4.1, nvidia-smi 535.104.05",
        "nvidia_cudnn_cu12-9.1.0.70.dist-info", "Requires-Dist: nvidia-cudnn-cu12==9.1.0.70",
        "Version: 9.1.0.70", "torch>=2.1.0.1", "VBIOS 96.00.74.00.1F", "96.00.74.00",
        "netmask 255.255.255.0 lo 127.0.0.1 any 0.0.0.0 ::1 mcast 224.0.0.1 ff02::1",
        "0000:3b:00.0 00000000:18:00.0 pci0000:00/0000:00:01.1", "lspci -d ::0604",
        "12:34:56 2026-11-30T04:21:46Z", "PWD=/root HOME=/root", "key=ps.index",
    ],
)  # fmt: skip
def test_versions_pci_addresses_and_harmless_values_are_kept(text):
    assert Redactor().text(text) == text


@pytest.mark.parametrize(
    "text, gone",
    [
        ("inet 10.1.2.3/24", "10.1.2.3"), ("MASTER_ADDR=8.8.8.8", "8.8.8.8"),
        ("peer 192.168.0.1.", "192.168.0.1"), ("fe80:0000:0000:0000:ba3f:d2ff:fe12:3456", "ba3f"),
        ("0000:0000:0000:0000:0000:ffff:c0a8:6401", "c0a8:6401"), ("ether aa:bb:cc:dd:ee:01", "aa:bb"),
        ("API_KEY=abc NCCL_AUTH=xyz", "abc"), ("https://u:p@h/", "u:p"), ("/home/bob/x", "bob"),
    ],
)  # fmt: skip
def test_addresses_secrets_and_homes_are_replaced(text, gone):
    assert gone not in Redactor().text(text)


def test_pseudonyms_keep_the_kind_facts_read():
    r = Redactor()
    gid = r.text("0000:0000:0000:0000:0000:ffff:c0a8:6401")  # RoCE v2 GID of 192.168.100.1
    mapped = ipaddress.IPv6Address(gid).ipv4_mapped
    assert len(gid) == 39 and mapped is not None and mapped.is_private
    assert str(mapped) == r.text("192.168.100.1")  # the same address, the same pseudonym
    link_local = r.text("fe80:0000:0000:0000:ba3f:d2ff:fe12:3456")
    assert ipaddress.IPv6Address(link_local).is_link_local and len(link_local) == 39
    assert ipaddress.IPv6Address(r.text("2001:4860::1")).is_global
    upper = r.text("GPU-5D2C7E11-6A9B-4C1D-8E3F-0A1B2C3D4E5F")
    assert upper.lower() == r.text("GPU-5d2c7e11-6a9b-4c1d-8e3f-0a1b2c3d4e5f").lower()
    assert len(r.kinds["uuid"]) == 1


@pytest.mark.parametrize(
    "name, secret",
    [("HF_TOKEN", True), ("AWS_SECRET_ACCESS_KEY", True), ("DB_PASSWORD", True),
     ("WANDB_API_KEY", True), ("NCCL_IB_AUTH", True), ("GITHUB_PAT", True), ("MY_COOKIE", True),
     ("PATH", False), ("PWD", False), ("CUDA_VISIBLE_DEVICES", False), ("HOME", False),
     ("KEYBOARD", False)],
)  # fmt: skip
def test_secret_names(name, secret):
    assert secret_name(name) is secret


def test_a_host_named_like_a_word_is_replaced_only_where_it_is_the_name(tmp_path):
    # Cloud images call both the host and its user "ubuntu"; /etc/os-release must survive.
    root = tmp_path / "ubuntu"
    shutil.copytree(HOSTS / "ubuntu2204-healthy", root, symlinks=True)
    b = BundleBuilder(root).file("/proc/sys/kernel/hostname", "ubuntu\n")
    b.file("/etc/passwd", "ubuntu:x:1000:1000::/home/ubuntu:/bin/bash\n")
    b.command(["journalctl", "-k"], "usb 1-1: SerialNumber: 0001\npci 0001:00:00.0: [10de:2330]\n")
    os_release = (root / "files/etc/os-release").read_text()
    assert "ID=ubuntu" in os_release
    before = findings(root)
    r = Redactor()
    redact_bundle(str(root), r)
    assert (root / "files/etc/os-release").read_text() == os_release
    assert (root / "files/proc/sys/kernel/hostname").read_text() == r.hosts.host("ubuntu") + "\n"
    assert (root / "files/etc/passwd").read_text() == (
        f"{r.users.user('ubuntu')}:x:1000:1000::/home/{r.users.user('ubuntu')}:/bin/bash\n"
    )
    # A short serial from free text is no word to replace: PCI domain 0001 stays.
    assert "pci 0001:00:00.0" in (root / "commands/journalctl_-k/stdout").read_text()
    assert findings(root, r) == before
