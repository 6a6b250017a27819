"""System parsers on real captures (fixtures/corpus, see fixtures/SOURCES.md) and the
system checks on hand-built facts."""

from __future__ import annotations

import pytest

from dldoctor.checks import system as checks
from dldoctor.facts import Facts
from dldoctor.facts import system as sf
from dldoctor.facts.mountinfo import fstype_on, parse_mountinfo
from dldoctor.model import Status
from dldoctor.policy import MemoryPolicy, Policy
from tests.support.paths import FIXTURES

CORPUS = FIXTURES / "corpus"


def test_os_release_rhel_corpus():
    rel = sf.parse_os_release((CORPUS / "os-release/insights-rhel-7.2-server.txt").read_text())
    assert (rel.id, rel.id_like, rel.version_id) == ("rhel", ("fedora",), "7.2")
    assert rel.name == "Red Hat Enterprise Linux Server"
    # Its PRETTY_NAME is a SKU label without the version: the display adds it.
    assert rel.display == "Red Hat Enterprise Linux Server 7.2 (Employee SKU)"
    assert rel.notes == ()


def test_os_release_fedora_corpus_unquoted_values():
    rel = sf.parse_os_release((CORPUS / "os-release/insights-fedora.txt").read_text())
    assert (rel.id, rel.version_id, rel.display) == ("fedora", "24", "Fedora 24 (Server Edition)")


def test_os_release_garbage_is_noted_not_fatal():
    rel = sf.parse_os_release('ID=ubuntu\nthis is not a pair\nVERSION_ID="22.04\n')
    assert rel.id == "ubuntu" and rel.version_id == "22.04"
    assert len(rel.notes) == 2


def test_meminfo_corpus():
    values, notes = sf.parse_meminfo((CORPUS / "proc/procfs-meminfo.txt").read_text())
    assert values["MemTotal"] == 15666184 * 1024
    assert values["HugePages_Total"] == 0 and values["Hugepagesize"] == 2048 * 1024
    assert "MemAvailable" not in values and notes == []


def test_meminfo_odd_lines():
    values, notes = sf.parse_meminfo("MemTotal: 10 kB\nBogus line\nX: 5 parsecs\n")
    assert values == {"MemTotal": 10240} and len(notes) == 2


@pytest.mark.parametrize("text, runtime", [
    ("12:memory:/docker/3f2a9c\n", "docker"),
    ("0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-ab.scope\n", "kubernetes"),
    ("1:name=systemd:/machine.slice/libpod-12ab.scope\n", "podman"),
    ("0::/init.scope\n", ""),
    ("", ""),
])  # fmt: skip
def test_runtime_from_cgroup(text, runtime):
    assert sf.runtime_from_cgroup(text) == runtime


def test_mountinfo_root_fstype_last_mount_wins():
    text = ("22 1 259:2 / / rw - ext4 /dev/sda1 rw\n"
            "90 22 0:52 / / rw - overlay overlay rw,lowerdir=/a\n"
            "91 90 0:21 / /proc rw - proc proc rw\n")  # fmt: skip
    assert fstype_on(parse_mountinfo(text), "/") == "overlay"
    assert fstype_on(parse_mountinfo("garbage\n"), "/") is None


@pytest.mark.parametrize("text, expected", [
    ("glibc 2.35\n", ("glibc", "2.35")),
    ("glibc 2.17", ("glibc", "2.17")),
    ("weird", ("", "")),
])  # fmt: skip
def test_getconf_libc(text, expected):
    libc = sf.parse_getconf_libc(text)
    assert (libc.name, libc.version) == expected


def run(check_fn, values, policy=None):
    return check_fn(Facts.given(values), policy or Policy())


def osrel(id, version, pretty=""):
    return sf.OsRelease(id=id, version_id=version, pretty_name=pretty or f"{id} {version}")


@pytest.mark.parametrize("rel, status", [
    (osrel("ubuntu", "22.04"), Status.PASS),
    (osrel("ubuntu", "24.04"), Status.PASS),
    (osrel("ubuntu", "20.04"), Status.WARN),
    (osrel("rocky", "9.3"), Status.PASS),
    (osrel("rhel", "7.9"), Status.WARN),
    (osrel("debian", "11"), Status.WARN),
    (osrel("fedora", "40"), Status.WARN),
    (sf.OsRelease(id="debian", pretty_name="Debian GNU/Linux trixie/sid"), Status.WARN),
    (sf.OsRelease(), Status.WARN),
])  # fmt: skip
def test_os_release_check(rel, status):
    assert run(checks.os_release, {sf.os_release: rel}).status == status


def test_os_remediation_names_what_the_policy_in_force_supports():
    from dldoctor.policy import OsPolicy, SupportedOs

    site = Policy(os=OsPolicy((SupportedOs("sles", "15.5"), SupportedOs("ubuntu", "24.04"))))
    for rel in (osrel("rhel", "9.3"), osrel("ubuntu", "22.04")):
        outcome = checks.os_release(Facts.given({sf.os_release: rel}), site)
        assert outcome.status == Status.WARN
        assert "(sles ≥ 15.5, ubuntu ≥ 24.04)" in outcome.remediation
        assert "RHEL" not in outcome.remediation and "22.04" not in outcome.remediation


def test_an_unreadable_os_release_asks_for_the_file_not_for_another_release():
    outcome = checks.os_release(Facts.given({sf.os_release: sf.OsRelease()}), Policy())
    assert outcome.status == Status.WARN
    assert "/etc/os-release" in outcome.remediation and "Move" not in outcome.remediation


@pytest.mark.parametrize("release, status", [
    ("5.15.0-105-generic", Status.PASS),
    ("6.8.0-45-generic", Status.PASS),
    ("5.4.0-150-generic", Status.WARN),
    ("4.18.0-513.24.1.el8_9.x86_64", Status.PASS),  # RHEL 8: judged by the OS release
    ("", Status.SKIP),
    ("weird", Status.WARN),
])  # fmt: skip
def test_kernel_check(release, status):
    from dldoctor.versions import version_tuple

    k = sf.Kernel(release, version_tuple(release))
    assert run(checks.kernel_version, {sf.kernel: k}).status == status


def mem(total_gib, avail_gib=1):
    g = 1024**3
    return sf.Memory(int(total_gib * g) if total_gib is not None else None, int(avail_gib * g),
                     0, 0, 0, 2048 * 1024)  # fmt: skip


def test_memory_check_summary_and_policy_floor():
    outcome = run(checks.system_memory, {sf.memory: mem(512, 500)})
    assert outcome.status == Status.PASS
    assert outcome.summary == "512.0 GiB RAM, 500.0 GiB available; no swap"
    floor = Policy(memory=MemoryPolicy(min_total_gib=1024))
    assert run(checks.system_memory, {sf.memory: mem(512)}, floor).status == Status.FAIL
    assert run(checks.system_memory, {sf.memory: mem(0)}).status == Status.FAIL
    assert run(checks.system_memory, {sf.memory: mem(None)}).status == Status.SKIP


def test_python_check_judges_both_interpreters():
    def py(version, path_version):
        return sf.Python(version, "/venv/bin/python", True, "/usr/bin/python3", path_version)

    assert run(checks.python_version, {sf.python: py("3.11.7", "3.11.7")}).status == Status.PASS
    # RHEL 8's platform python3 is 3.6: a note, as long as the environment's Python is new.
    platform = run(checks.python_version, {sf.python: py("3.11.7", "3.6.8")})
    assert platform.status == Status.PASS
    assert any("older than 3.10" in d for d in platform.details)
    old = run(checks.python_version, {sf.python: py("3.9.18", "3.11.7")})
    assert old.status == Status.WARN and "3.9.18" in old.summary
    # Only PATH's python3 known (a hand-written bundle): that one is judged.
    assert run(checks.python_version, {sf.python: py("", "3.8.10")}).status == Status.WARN
    assert run(checks.python_version, {sf.python: py("", None)}).status == Status.SKIP


@pytest.mark.parametrize("libc, status", [
    (sf.Libc("glibc", "2.35"), Status.PASS),
    (sf.Libc("glibc", "2.17"), Status.WARN),
    (sf.Libc("", "", ("not glibc",)), Status.WARN),
    (sf.Libc("", "", answered=False), Status.SKIP),
])  # fmt: skip
def test_libc_check(libc, status):
    assert run(checks.libc_version, {sf.libc: libc}).status == status


@pytest.mark.parametrize("c, summary", [
    (sf.Container(True, "docker"), "in a docker container"),
    (sf.Container(False, "", virtualization="virtual machine"), "not in a container (virtual machine)"),
    (sf.Container(None, ""), "possibly in a container: the signs disagree"),
])  # fmt: skip
def test_container_check_is_information(c, summary):
    outcome = run(checks.container, {sf.container: c})
    assert (outcome.status, outcome.summary) == (Status.PASS, summary)


@pytest.mark.parametrize("dockerenv, root, expected", [
    (True, "ext4", (False, "")),      # a VM or host whose image was built with Docker
    (True, "overlay", (True, "docker")),
    (False, "overlay", (None, "")),   # overlay root alone: live systems use it too
    (False, "xfs", (False, "")),
])  # fmt: skip
def test_container_signs_from_a_bundle(tmp_path, dockerenv, root, expected):
    from dldoctor.host.replay import ReplayHost
    from tests.support.bundlebuilder import BundleBuilder

    b = BundleBuilder(tmp_path / "b").file(
        "/proc/self/mountinfo", f"1 0 0:1 / / rw - {root} x rw\n"
    )
    if dockerenv:
        b.file("/.dockerenv", "")
    c = Facts(ReplayHost(str(b.root))).get(sf.container)
    assert (c.in_container, c.runtime) == expected


def test_a_failed_mountinfo_or_cpuinfo_read_is_unread_not_bare_metal(tmp_path):
    from dldoctor.host.replay import ReplayHost
    from tests.support.bundlebuilder import BundleBuilder
    from tests.support.faults import FaultyHost

    b = BundleBuilder(tmp_path / "b").file("/proc/cpuinfo", "flags\t\t: fpu hypervisor\n")
    b.file("/proc/self/mountinfo", "1 0 0:1 / / rw - overlay x rw\n")
    seen = Facts(ReplayHost(str(b.root))).get(sf.container)
    assert (seen.virtualization, seen.root_fstype, seen.unread) == (
        "virtual machine",
        "overlay",
        (),
    )

    wanted = ("/proc/cpuinfo", "/proc/self/mountinfo")
    host = FaultyHost(ReplayHost(str(b.root)), "timeout", lambda op, key: key in wanted)
    blind = Facts(host).get(sf.container)
    assert (blind.virtualization, blind.root_fstype) == ("", "")
    assert [u.split(" did not")[0] for u in blind.unread] == [
        "read /proc/self/mountinfo",
        "read /proc/cpuinfo",
    ]


def test_the_kernel_command_line_is_read_once_and_a_failed_read_is_no_blacklist(tmp_path):
    from dldoctor.facts.acs import iommu
    from dldoctor.facts.kmod import nouveau_blacklist
    from dldoctor.host.base import ProbeFailed
    from dldoctor.host.replay import ReplayHost
    from tests.support.bundlebuilder import BundleBuilder
    from tests.support.faults import FaultyHost

    b = BundleBuilder(tmp_path / "b").file("/proc/cmdline", "ro modprobe.blacklist=nouveau\n")
    asked: list[str] = []
    counting = FaultyHost(ReplayHost(str(b.root)), "timeout", lambda op, key: asked.append(key))
    facts = Facts(counting)
    assert facts.get(nouveau_blacklist).cmdline == ("modprobe.blacklist=nouveau",)
    facts.get(iommu)
    assert asked.count("/proc/cmdline") == 1

    host = FaultyHost(ReplayHost(str(b.root)), "timeout", lambda op, key: key == "/proc/cmdline")
    with pytest.raises(ProbeFailed):  # not "not blacklisted": the command line is unknown
        Facts(host).get(nouveau_blacklist)
    b.file("/etc/modprobe.d/nouveau.conf", "blacklist nouveau\n")
    host = FaultyHost(ReplayHost(str(b.root)), "timeout", lambda op, key: key == "/proc/cmdline")
    assert Facts(host).get(nouveau_blacklist).blacklisted  # the file settles it
