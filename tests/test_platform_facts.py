"""NUMA, CPU, resource-limit and shared-memory facts: parsers on real captures
(fixtures/corpus, see fixtures/SOURCES.md) and odd input, the facts on hand-built bundles,
and limits.process through LiveHost on this machine."""

from __future__ import annotations

import resource

import pytest

from dldoctor.facts import Facts
from dldoctor.facts import cpu as cpuf
from dldoctor.facts import limits as lf
from dldoctor.facts import numa as nf
from dldoctor.facts import shm as sf
from dldoctor.host import LiveHost
from dldoctor.host.base import ProbeFailed
from dldoctor.host.replay import ReplayHost
from tests.support.bundlebuilder import BundleBuilder
from tests.support.paths import FIXTURES

CORPUS = FIXTURES / "corpus"
NODES = CORPUS / "numactl/node_exporter-fixtures-sysfs-nodes"
KIB = 1024


def facts_of(b: BundleBuilder) -> Facts:
    return Facts(ReplayHost(str(b.root)))


# --- NUMA -----------------------------------------------------------------------------


@pytest.mark.parametrize("text, cpus", [
    ("0-3,8-11", (0, 1, 2, 3, 8, 9, 10, 11)),
    ("0-3,8-11\n", (0, 1, 2, 3, 8, 9, 10, 11)),
    ("", ()),
    ("\n", ()),
    ("5", (5,)),
    ("0,2,4-5", (0, 2, 4, 5)),
    ("4-5,0-1", (0, 1, 4, 5)),
])  # fmt: skip
def test_parse_cpulist(text, cpus):
    assert nf.parse_cpulist(text) == cpus
    assert nf.parse_cpulist_notes(text)[1] == []


@pytest.mark.parametrize("text, cpus, n_notes", [
    ("a-b,3", (3,), 1),
    ("3-1", (), 1),
    ("0-999999999", (), 1),  # no 8 GB tuple
    ("0-3:2", (), 1),  # the kernel's stride syntax is input-only; never in sysfs output
    ("\x00\xff garbage", (), 1),
])  # fmt: skip
def test_parse_cpulist_odd_input_is_noted(text, cpus, n_notes):
    got, notes = nf.parse_cpulist_notes(text)
    assert got == cpus and len(notes) == n_notes


def test_parse_node_meminfo_corpus():
    values, notes = nf.parse_node_meminfo(
        (NODES / "sys/devices/system/node/node0/meminfo").read_text()
    )
    assert values["MemTotal"] == 134182340 * KIB
    assert values["MemFree"] == 53030372 * KIB
    assert values["HugePages_Total"] == 0  # a count, no unit
    assert notes == []


def test_parse_node_meminfo_garbage():
    values, notes = nf.parse_node_meminfo("Node 0 MemTotal: 4 kB\nnonsense\nNode x Foo: 1 kB\n")
    assert values == {"MemTotal": 4096} and len(notes) == 2


def corpus_nodes_bundle(tmp_path) -> BundleBuilder:
    """The node_exporter sysfs nodes, copied into a bundle's files/ (the cpuN entries are
    plain files there: upstream's symlinks dangle)."""
    b = BundleBuilder(tmp_path / "b")
    for path in sorted(NODES.rglob("*")):
        if path.is_file():
            b.file("/" + str(path.relative_to(NODES)), path.read_bytes())
    # What a real /sys/devices/system/node holds beside the nodes: ignored.
    b.file("/sys/devices/system/node/online", "0-2\n")
    b.file("/sys/devices/system/node/has_cpu", "0-1\n")
    return b


def test_numa_topology_corpus(tmp_path):
    b = corpus_nodes_bundle(tmp_path)
    b.file("/proc/sys/kernel/numa_balancing", "1\n")
    b.file("/proc/self/environ", b"HOME=/root\0PATH=/usr/local/bin:relative:/usr/bin\0")
    b.file("/usr/bin/numactl", b"\x7fELF\x02\x01\x01")
    b.command(["numactl", "--show"], "policy: default\npreferred node: current\n")
    topo = facts_of(b).get(nf.numa_topology)
    assert [n.node for n in topo.nodes] == [0, 1, 2]
    assert [n.cpus for n in topo.nodes] == [(0, 1), (2, 3), ()]
    assert [n.cpulist for n in topo.nodes] == ["0-1", "2-3", ""]
    assert [n.memory_total_bytes for n in topo.nodes] == [
        134182340 * KIB, 134217728 * KIB, 134217728 * KIB]  # fmt: skip
    assert [n.node for n in topo.cpu_nodes] == [0, 1]  # node2 is memory-only
    assert topo.balancing == 1
    assert facts_of(b).get(nf.numactl).path == "/usr/bin/numactl"
    assert topo.notes == ()


def test_numa_nodes_sorted_numerically_and_numactl_absent(tmp_path):
    b = BundleBuilder(tmp_path / "b")
    for n in (0, 2, 10):
        b.file(f"/sys/devices/system/node/node{n}/cpulist", f"{n}\n")
        b.file(f"/sys/devices/system/node/node{n}/meminfo", f"Node {n} MemTotal: 1 kB\n")
    b.command(["numactl", "--show"], status="not_installed")
    topo = facts_of(b).get(nf.numa_topology)
    assert [n.node for n in topo.nodes] == [0, 2, 10]
    assert facts_of(b).get(nf.numactl).path == "" and topo.balancing is None
    assert topo.notes == ()


def test_a_hung_numactl_does_not_take_the_topology_with_it(tmp_path):
    b = BundleBuilder(tmp_path / "b")
    b.file("/sys/devices/system/node/node0/cpulist", "0-3\n")
    b.command(["numactl", "--show"], status="timeout", timeout_s=10)
    facts = facts_of(b)
    assert [n.node for n in facts.get(nf.numa_topology).nodes] == [0]
    with pytest.raises(ProbeFailed, match="numactl --show"):
        facts.get(nf.numactl)


def test_numa_numactl_runs_but_not_found_on_path(tmp_path):
    b = BundleBuilder(tmp_path / "b")
    b.file("/sys/devices/system/node/node0/cpulist", "0-3\n")
    b.command(["numactl", "--show"], "policy: default\n")
    topo = facts_of(b).get(nf.numa_topology)
    assert facts_of(b).get(nf.numactl).path == "numactl"
    assert topo.nodes[0].memory_total_bytes is None
    assert any("meminfo" in n for n in topo.notes)


def test_numa_no_sysfs_nodes_is_noted(tmp_path):
    b = BundleBuilder(tmp_path / "b")
    topo = facts_of(b).get(nf.numa_topology)
    assert topo.nodes == () and facts_of(b).get(nf.numactl).path == ""  # not in the bundle
    assert len(topo.notes) == 1 and "/sys/devices/system/node" in topo.notes[0]


def test_numa_listing_timeout_raises(tmp_path):
    b = BundleBuilder(tmp_path / "b").answer("list", "/sys/devices/system/node", status="timeout",
                                             timeout_s=5)  # fmt: skip
    with pytest.raises(ProbeFailed):
        facts_of(b).get(nf.numa_topology)


# --- CPU ------------------------------------------------------------------------------


def test_cpuinfo_corpus_intel_laptop():
    info = cpuf.parse_cpuinfo((CORPUS / "proc/procfs-cpuinfo.txt").read_text())
    assert info.model == "Intel(R) Core(TM) i7-8650U CPU @ 1.90GHz"
    assert info.vendor == "GenuineIntel"
    assert (info.sockets, info.cores, info.threads) == (1, 4, 8)
    assert {"avx2", "ht", "pdpe1gb", "fma"} <= info.flags
    assert "avx512f" not in info.flags
    assert len(info.flags) == 120
    assert info.notes == ()


# Hand-written in the real aarch64 format (Linux arch/arm64/kernel/cpuinfo.c, c_show):
# a Grace (Neoverse-V2) with no model name and no physical id.
AARCH64_GRACE = "".join(
    f"processor\t: {n}\n"
    "BogoMIPS\t: 2000.00\n"
    "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid "
    "asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat "
    "ilrcpc flagm ssbs sb paca pacg dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 "
    "flagm2 frint svei8mm svebf16 i8mm bf16 dgh bti\n"
    "CPU implementer\t: 0x41\n"
    "CPU architecture: 8\n"
    "CPU variant\t: 0x0\n"
    "CPU part\t: 0xd4f\n"
    "CPU revision\t: 0\n\n"
    for n in range(4)
)


def test_cpuinfo_aarch64_falls_back_to_part():
    info = cpuf.parse_cpuinfo(AARCH64_GRACE)
    assert (info.model, info.vendor) == ("Neoverse-V2", "ARM")
    assert (info.sockets, info.cores, info.threads) == (1, 4, 4)
    assert {"sve2", "bf16"} <= info.flags
    assert any("physical id" in n for n in info.notes)
    assert any("core id" in n for n in info.notes)


def test_cpuinfo_aarch64_unknown_part_uses_hardware():
    text = AARCH64_GRACE.replace("0xd4f", "0xfff") + "Hardware\t: Acme SoC\n"
    info = cpuf.parse_cpuinfo(text)
    assert info.model == "Acme SoC" and info.threads == 4
    assert any("0xfff" in n for n in info.notes)
    info = cpuf.parse_cpuinfo(AARCH64_GRACE.replace("0xd4f", "0xfff").replace("0x41", "0x99"))
    assert info.model == "CPU part 0xfff" and info.vendor == "implementer 0x99"


def test_cpuinfo_old_aarch64_kernel_without_blank_lines():
    # 3.x arm64 kernels: a "Processor" header, bare "processor : N" lines, then the rest.
    text = ("Processor\t: AArch64 Processor rev 1 (aarch64)\n"
            "processor\t: 0\nprocessor\t: 1\nprocessor\t: 2\n"
            "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32\n"
            "CPU implementer\t: 0x41\nCPU architecture: AArch64\nCPU variant\t: 0x0\n"
            "CPU part\t: 0xd07\nCPU revision\t: 1\n\nHardware\t: Acme board\n")  # fmt: skip
    info = cpuf.parse_cpuinfo(text)
    assert info.threads == 3 and info.model == "Cortex-A57" and "crc32" in info.flags


def test_cpuinfo_two_sockets():
    text = "".join(
        f"processor\t: {n}\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654\n"
        f"physical id\t: {n // 4}\ncore id\t\t: {n % 2}\nflags\t\t: fpu avx512f\n\n"
        for n in range(8)
    )
    info = cpuf.parse_cpuinfo(text)
    assert (info.sockets, info.cores, info.threads) == (2, 4, 8)
    assert info.notes == ()


@pytest.mark.parametrize(
    "text", ["", "garbage\n\x00\x01\nmore garbage", ":::\n=\n", "processor : x\n"]
)
def test_cpuinfo_garbage_is_noted_not_fatal(text):
    info = cpuf.parse_cpuinfo(text)
    assert (info.sockets, info.cores, info.threads) == (0, 0, 0)
    assert info.model == "" and info.notes


def test_cpu_info_fact(tmp_path):
    b = BundleBuilder(tmp_path / "b").file(
        "/proc/cpuinfo", (CORPUS / "proc/procfs-cpuinfo.txt").read_bytes()
    )
    assert facts_of(b).get(cpuf.cpu_info).threads == 8
    empty = facts_of(BundleBuilder(tmp_path / "e")).get(cpuf.cpu_info)
    assert empty.threads == 0 and empty.notes


CPU = "/sys/devices/system/cpu"


def test_cpu_frequency(tmp_path):
    b = BundleBuilder(tmp_path / "b")
    for n, governor in enumerate(["performance", "performance", "powersave", "performance"]):
        b.file(f"{CPU}/cpu{n}/cpufreq/scaling_governor", governor + "\n")
        b.file(f"{CPU}/cpu{n}/topology/core_id", f"{n}\n")
    b.file(f"{CPU}/cpu0/cpufreq/scaling_driver", "intel_pstate\n")
    b.file(f"{CPU}/cpufreq/policy0/scaling_governor", "performance\n")
    b.file(f"{CPU}/cpuidle/current_driver", "intel_idle\n")
    b.file(f"{CPU}/smt/control", "on\n")
    b.file(f"{CPU}/online", "0-3\n")
    freq = facts_of(b).get(cpuf.cpu_frequency)
    assert freq.governors == {"performance": 3, "powersave": 1}
    assert (freq.driver, freq.smt, freq.notes) == ("intel_pstate", "on", ())


def test_cpu_frequency_vm_without_cpufreq(tmp_path):
    b = BundleBuilder(tmp_path / "b")
    for n in range(4):
        b.file(f"{CPU}/cpu{n}/topology/core_id", f"{n}\n")
    b.file(f"{CPU}/cpuidle/current_driver", "none\n")
    b.file(f"{CPU}/smt/control", "notsupported\n")
    (b.root / "files" / CPU.lstrip("/") / "cpufreq").mkdir()
    freq = facts_of(b).get(cpuf.cpu_frequency)
    assert (freq.governors, freq.driver, freq.smt, freq.notes) == ({}, "", "notsupported", ())


def test_cpu_frequency_caps_at_1024_cpus(tmp_path):
    b = BundleBuilder(tmp_path / "b")
    b.answer("list", CPU, status="ok", entries=[f"cpu{n}" for n in range(1100)] + ["cpufreq"])
    for n in range(1100):
        b.file(f"{CPU}/cpu{n}/cpufreq/scaling_governor", "performance\n")
    freq = facts_of(b).get(cpuf.cpu_frequency)
    assert freq.governors == {"performance": 1024}
    assert freq.smt == ""  # no smt/control: kernels before 4.19
    assert len(freq.notes) == 1 and "1100" in freq.notes[0]


def test_cpu_frequency_partial_governors_and_odd_smt(tmp_path):
    b = BundleBuilder(tmp_path / "b")
    b.file(f"{CPU}/cpu0/cpufreq/scaling_governor", "schedutil\n")
    b.file(f"{CPU}/cpu0/cpufreq/scaling_driver", "cppc_cpufreq\n")
    b.file(f"{CPU}/cpu1/topology/core_id", "1\n")
    b.file(f"{CPU}/smt/control", "bogus\n")
    freq = facts_of(b).get(cpuf.cpu_frequency)
    assert freq.governors == {"schedutil": 1} and freq.driver == "cppc_cpufreq"
    assert freq.smt == "bogus" and len(freq.notes) == 2


def test_cpu_frequency_timeout_raises(tmp_path):
    b = BundleBuilder(tmp_path / "b").answer(
        "read", f"{CPU}/smt/control", status="timeout", timeout_s=5
    )
    with pytest.raises(ProbeFailed):
        facts_of(b).get(cpuf.cpu_frequency)


# --- resource limits ------------------------------------------------------------------

# /proc/<pid>/limits as Linux prints it (fs/proc/base.c, proc_pid_limits), trailing
# spaces included; captured from this project's development machine.
PROC_LIMITS = """\
Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max file size             unlimited            unlimited            bytes     
Max data size             unlimited            unlimited            bytes     
Max stack size            8388608              unlimited            bytes     
Max core file size        0                    unlimited            bytes     
Max resident set          unlimited            unlimited            bytes     
Max processes             96365                96365                processes 
Max open files            20000                20000                files     
Max locked memory         8388608              8388608              bytes     
Max address space         unlimited            unlimited            bytes     
Max file locks            unlimited            unlimited            locks     
Max pending signals       96365                96365                signals   
Max msgqueue size         819200               819200               bytes     
Max nice priority         0                    0                    
Max realtime priority     0                    0                    
Max realtime timeout      unlimited            unlimited            us        
"""  # noqa: W291


def test_parse_proc_limits():
    limits, notes = lf.parse_proc_limits(PROC_LIMITS)
    assert limits["memlock"] == (8388608, 8388608)
    assert limits["nofile"] == (20000, 20000)
    assert limits["stack"] == (8388608, None)
    assert limits["core"] == (0, None)
    assert limits["nice"] == (0, 0) and limits["rttime"] == (None, None)
    assert len(limits) == 16 and notes == []


def test_parse_proc_limits_odd_rows():
    text = ("Limit Soft Limit Hard Limit Units\nMax locked memory unlimited unlimited bytes\n"
            "Max future thing 5 6 widgets\nnonsense\nMax open files 1024 lots files\n\x00\n")  # fmt: skip
    limits, notes = lf.parse_proc_limits(text)
    assert limits == {"memlock": (None, None), "Max future thing": (5, 6)}
    assert len(notes) == 3


def test_limits_process_fact(tmp_path):
    b = BundleBuilder(tmp_path / "b").file("/proc/self/limits", PROC_LIMITS)
    lim = facts_of(b).get(lf.process_limits)
    assert lim.memlock == (8388608, 8388608) and lim.nofile == (20000, 20000)
    assert lim.notes == ()
    missing = facts_of(BundleBuilder(tmp_path / "e")).get(lf.process_limits)
    assert missing.memlock is None and missing.limits == {} and missing.notes


def _rlimit(value: int) -> int | None:
    return None if value == resource.RLIM_INFINITY else value


def test_limits_process_live_matches_getrlimit():
    lim = Facts(LiveHost()).get(lf.process_limits)
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    assert lim.memlock == (_rlimit(soft), _rlimit(hard))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert lim.nofile == (_rlimit(soft), _rlimit(hard))
    assert lim.notes == ()


# Hand-written in the real limits.conf(5) format (Debian's stock header, then entries as
# sites write them for GPU/RDMA nodes).
LIMITS_CONF = """\
# /etc/security/limits.conf
#
#Each line describes a limit for a user in the form:
#
#<domain>        <type>  <item>  <value>
#
#*               soft    core            0
#@student        -       maxlogins       4

*               soft    memlock         unlimited
*               hard    memlock         unlimited
@hpc            -       nofile          1048576
root            hard    nofile          -1   # as good as unlimited
ftp             hard    nproc           0

# End of file
"""


def test_parse_limits_conf():
    entries, notes = lf.parse_limits_conf(LIMITS_CONF, "/etc/security/limits.conf")
    got = [(e.domain, e.type, e.item, e.value, e.line) for e in entries]
    assert got == [
        ("*", "soft", "memlock", None, 10),
        ("*", "hard", "memlock", None, 11),
        ("@hpc", "-", "nofile", 1048576, 12),
        ("root", "hard", "nofile", None, 13),
        ("ftp", "hard", "nproc", 0, 14),
    ]
    assert entries[3].raw == "-1" and entries[0].file == "/etc/security/limits.conf"
    assert notes == []


def test_parse_limits_conf_odd_lines():
    text = ("*  soft  memlock  8192\n"
            "bad line\n"
            "*  medium  memlock  5\n"
            "*  soft  memlock  lots\n"
            "*  soft  warpdrive  5\n"
            "*  soft  memlock  5  extra\n"
            "@rt  -  nice  -10\n"
            "*  hard  nofile  -5\n"
            "\x00\xff\n")  # fmt: skip
    entries, notes = lf.parse_limits_conf(text)
    assert [(e.item, e.value, e.value_bytes) for e in entries] == [
        ("memlock", 8192, 8192 * KIB), ("nice", -10, -10)]  # fmt: skip
    assert len(notes) == 7 and notes[0].startswith("line 2:")


def test_limits_configured_fact(tmp_path):
    b = BundleBuilder(tmp_path / "b")
    b.file("/etc/security/limits.conf", LIMITS_CONF)
    b.file("/etc/security/limits.d/99-rdma.conf", "* soft memlock 65536\n* hard memlock 65536\n")
    b.file("/etc/security/limits.d/90-nproc.conf", "*  soft  nproc  4096\n")
    b.file("/etc/security/limits.d/README", "* soft memlock 1\n")  # not *.conf: pam skips it
    conf = facts_of(b).get(lf.configured_limits)
    assert conf.files == ("/etc/security/limits.conf", "/etc/security/limits.d/90-nproc.conf",
                          "/etc/security/limits.d/99-rdma.conf")  # fmt: skip
    assert [(e.item, e.value, e.file.rsplit("/", 1)[-1]) for e in conf.entries] == [
        ("memlock", None, "limits.conf"), ("memlock", None, "limits.conf"),
        ("nofile", 1048576, "limits.conf"), ("nofile", None, "limits.conf"),
        ("memlock", 65536, "99-rdma.conf"), ("memlock", 65536, "99-rdma.conf"),
    ]  # fmt: skip
    assert conf.entries[-1].value_bytes == 64 * 1024 * 1024 and conf.notes == ()
    none = facts_of(BundleBuilder(tmp_path / "e")).get(lf.configured_limits)
    assert (none.entries, none.files, none.notes) == ((), (), ())


DEFAULTS_ARGV = list(lf.SYSTEMD_DEFAULTS_ARGV)
UNITS_ARGV = list(lf.SYSTEMD_UNITS_ARGV)

# Hand-written in `systemctl show` format (systemd 252): type-specific properties (Limit*)
# come before the Unit ones (Id, LoadState); a unit that does not exist still gets a block.
UNITS_OUT = """\
LimitNOFILE=524288
LimitMEMLOCK=8388608
Id=slurmd.service
LoadState=not-found

LimitNOFILE=infinity
LimitMEMLOCK=infinity
Id=docker.service
LoadState=loaded

LimitNOFILE=1048576
LimitMEMLOCK=infinity
Id=containerd.service
LoadState=loaded

LimitNOFILE=524288
LimitMEMLOCK=8388608
Id=kubelet.service
LoadState=not-found
"""


def test_argvs_are_the_documented_ones():
    assert DEFAULTS_ARGV == ["systemctl", "show", "--property=DefaultLimitMEMLOCK",
                             "--property=DefaultLimitNOFILE"]  # fmt: skip
    assert UNITS_ARGV == ["systemctl", "show", "slurmd.service", "docker.service",
                          "containerd.service", "kubelet.service",
                          "--property=Id,LoadState,LimitMEMLOCK,LimitNOFILE"]  # fmt: skip


def test_limits_systemd(tmp_path):
    b = BundleBuilder(tmp_path / "b")
    b.command(DEFAULTS_ARGV, "DefaultLimitNOFILE=524288\nDefaultLimitMEMLOCK=8388608\n")
    b.command(UNITS_ARGV, UNITS_OUT)
    sd = facts_of(b).get(lf.systemd_limits)
    assert sd.available and sd.defaults == {"memlock": 8388608, "nofile": 524288}
    assert [(u.unit, u.limits) for u in sd.units] == [
        ("docker.service", {"memlock": None, "nofile": None}),
        ("containerd.service", {"memlock": None, "nofile": 1048576}),
    ]
    assert sd.notes == ()


def test_limits_systemd_infinity_and_odd_lines(tmp_path):
    b = BundleBuilder(tmp_path / "b")
    b.command(DEFAULTS_ARGV, "DefaultLimitMEMLOCK=infinity\nDefaultLimitNOFILE=lots\ngarbage\n")
    b.command(
        UNITS_ARGV,
        "LimitNOFILE=5\n\nId=docker.service\nLoadState=loaded\nLimitMEMLOCK=18446744073709551615\n",
    )
    sd = facts_of(b).get(lf.systemd_limits)
    assert sd.defaults == {"memlock": None}
    assert [(u.unit, u.limits) for u in sd.units] == [("docker.service", {"memlock": None})]
    assert len(sd.notes) == 3  # NOFILE=lots, the garbage line, the block with no Id


def test_limits_systemd_in_a_container(tmp_path):
    b = BundleBuilder(tmp_path / "b")
    said = ("System has not been booted with systemd as init system (PID 1). Can't operate.\n"
            "Failed to connect to bus: Host is down\n")  # fmt: skip
    b.command(DEFAULTS_ARGV, stderr=said, returncode=1)
    sd = facts_of(b).get(lf.systemd_limits)
    assert (sd.available, sd.defaults, sd.units) == (False, {}, ())
    assert len(sd.notes) == 1 and "not been booted with systemd" in sd.notes[0]


def test_limits_systemd_not_installed_and_timeout(tmp_path):
    b = BundleBuilder(tmp_path / "b").command(DEFAULTS_ARGV, status="not_installed")
    sd = facts_of(b).get(lf.systemd_limits)
    assert not sd.available and "not installed" in sd.notes[0]
    b = BundleBuilder(tmp_path / "t").command(DEFAULTS_ARGV, status="timeout", timeout_s=10)
    with pytest.raises(ProbeFailed):
        facts_of(b).get(lf.systemd_limits)


def test_limits_systemd_refused_is_a_failure_to_look(tmp_path):
    # Unlike "not installed" (no systemd here), the units may exist: not judged as absent.
    b = BundleBuilder(tmp_path / "b").command(DEFAULTS_ARGV)
    b.command(UNITS_ARGV, status="permission_denied")
    with pytest.raises(ProbeFailed, match="permission denied"):
        facts_of(b).get(lf.systemd_limits)


# --- /dev/shm and THP -----------------------------------------------------------------

STATVFS_64M = {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": 16384, "f_bfree": 16000,
               "f_bavail": 16000, "f_files": 1000, "f_ffree": 990, "f_favail": 990,
               "f_flag": 4102, "f_namemax": 255}  # fmt: skip
MOUNTINFO_DOCKER = (
    "512 498 0:52 / / rw,relatime master:301 - overlay overlay rw,lowerdir=/l,upperdir=/u\n"
    "514 512 0:56 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k\n"
)


def test_dev_shm_docker_default(tmp_path):
    b = BundleBuilder(tmp_path / "b").answer("statvfs", "/dev/shm", status="ok", value=STATVFS_64M)
    b.file("/proc/self/mountinfo", MOUNTINFO_DOCKER)
    shm = facts_of(b).get(sf.dev_shm)
    assert (shm.size_bytes, shm.free_bytes) == (64 * 1024 * 1024, 16000 * 4096)
    assert shm.mounted and shm.fstype == "tmpfs" and shm.notes == ()


def test_dev_shm_not_a_mount_point(tmp_path):
    b = BundleBuilder(tmp_path / "b").answer("statvfs", "/dev/shm", status="ok", value=STATVFS_64M)
    b.file("/proc/self/mountinfo", MOUNTINFO_DOCKER.splitlines()[0] + "\n")
    shm = facts_of(b).get(sf.dev_shm)
    assert shm.size_bytes == 64 * 1024 * 1024 and not shm.mounted
    assert len(shm.notes) == 1


def test_dev_shm_link_to_run_shm(tmp_path):
    b = BundleBuilder(tmp_path / "b").answer("statvfs", "/dev/shm", status="ok", value=STATVFS_64M)
    b.answer("link", "/dev/shm", status="ok", target="/run/shm")
    b.file("/proc/self/mountinfo", "30 22 0:25 / /run/shm rw - tmpfs tmpfs rw\n")
    assert facts_of(b).get(sf.dev_shm).mounted


def test_dev_shm_missing_and_odd(tmp_path):
    shm = facts_of(BundleBuilder(tmp_path / "b")).get(sf.dev_shm)
    assert (shm.size_bytes, shm.free_bytes, shm.mounted) == (None, None, False) and shm.notes
    b = BundleBuilder(tmp_path / "o").answer(
        "statvfs", "/dev/shm", status="ok", value={"f_bsize": 0}
    )
    shm = facts_of(b).get(sf.dev_shm)
    assert shm.size_bytes is None and shm.notes
    b = BundleBuilder(tmp_path / "p").answer("statvfs", "/dev/shm", status="permission_denied")
    shm = facts_of(b).get(sf.dev_shm)
    assert shm.size_bytes is None and "permission denied" in shm.notes[0]


def test_dev_shm_timeout_raises(tmp_path):
    b = BundleBuilder(tmp_path / "b").answer("statvfs", "/dev/shm", status="timeout", timeout_s=5)
    with pytest.raises(ProbeFailed):
        facts_of(b).get(sf.dev_shm)


@pytest.mark.parametrize("text, mode", [
    ("always [madvise] never\n", "madvise"),
    ("[always] madvise never", "always"),
    ("always defer defer+madvise [madvise] never\n", "madvise"),
    ("always defer [defer+madvise] madvise never\n", "defer+madvise"),
    ("always madvise never\n", ""),
    ("", ""),
    ("[", ""),
])  # fmt: skip
def test_parse_thp_mode(text, mode):
    assert sf.parse_thp_mode(text) == mode


def test_thp_fact(tmp_path):
    b = BundleBuilder(tmp_path / "b")
    b.file("/sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never\n")
    b.file(
        "/sys/kernel/mm/transparent_hugepage/defrag", "always defer defer+madvise [madvise] never\n"
    )
    thp = facts_of(b).get(sf.transparent_hugepages)
    assert (thp.enabled, thp.defrag, thp.notes) == ("always", "madvise", ())
    thp = facts_of(BundleBuilder(tmp_path / "e")).get(sf.transparent_hugepages)
    assert (thp.enabled, thp.defrag) == ("", "") and len(thp.notes) == 1


def test_thp_rhel6_path(tmp_path):
    b = BundleBuilder(tmp_path / "b")
    b.file("/sys/kernel/mm/redhat_transparent_hugepage/enabled", "[always] madvise never\n")
    b.file("/sys/kernel/mm/redhat_transparent_hugepage/defrag", "[always] madvise never\n")
    thp = facts_of(b).get(sf.transparent_hugepages)
    assert (thp.enabled, thp.defrag, thp.notes) == ("always", "always", ())
