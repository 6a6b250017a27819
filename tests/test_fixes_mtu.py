"""fix.network.roce_mtu under a temporary root copied from the roce-mtu-unset fixture host
(RoCE ports addressed in netplan, left at MTU 1500): previewed, applied with the commands
recorded, re-checked, undone byte for byte, for netplan (Ubuntu) and for ifcfg files and
NetworkManager keyfiles (RHEL); and refused through the real CLI while a process holds a
GPU, unless --force. A fake `ip` writes the MTU into the root's /sys/class/net/<netdev>/mtu,
where the kernel shows it and the MTU fact reads it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from dldoctor.facts import Facts
from dldoctor.fixes import builder
from dldoctor.fixes.network import NETPLAN_MTU, _with_line, netplan_names
from dldoctor.fixes.plan import FixError, Target, apply, undo
from dldoctor.fixes.verify import recheck, verdict
from dldoctor.host.live import LiveHost
from dldoctor.policy import Policy
from tests.support.cli import report_of, run_dldoctor
from tests.support.commands import fake_command
from tests.support.paths import HOSTS
from tests.support.recording import Recorder
from tests.support.trees import tree

HOST = HOSTS / "hgx-h100x8-roce-mtu-unset"
FIX = "fix.network.roce_mtu"
NETDEVS = ("ens1f0np0", "ens2f0np0")
SCRIPTS = "/etc/sysconfig/network-scripts"
KEYFILES = "/etc/NetworkManager/system-connections"

IFCFG_1 = """\
TYPE=Ethernet
BOOTPROTO=none
NAME=ens1f0np0
DEVICE=ens1f0np0
ONBOOT=yes
IPADDR=10.10.10.11
PREFIX=24
MTU=1500
"""
IFCFG_2 = IFCFG_1.replace("1f0", "2f0").replace(".11", ".12").replace("MTU=1500\n", "")

KEYFILE_1 = """\
[connection]
id=roce0
uuid=6b7c1c9e-4f0e-4c59-9a55-1d3c5b0a7e01
type=ethernet
interface-name=ens1f0np0

[ethernet]
mtu=1500

[ipv4]
address1=10.10.10.11/24
method=manual

[ipv6]
addr-gen-mode=eui64
method=ignore
"""
KEYFILE_2 = (
    KEYFILE_1.replace("roce0", "roce1")
    .replace("1f0", "2f0")
    .replace(".11", ".12")
    .replace("mtu=1500\n", "mac-address=B8:3F:D2:12:34:57\n")
)


def mtu(root, netdev: str) -> str:
    return (root / f"sys/class/net/{netdev}/mtu").read_text()


class FakeIp(Recorder):
    """Records every command; `ip link set dev X mtu N` also sets X's MTU as the kernel
    shows it, in the root's sysfs."""

    def __init__(self, root):
        super().__init__()
        self.root = root

    def __call__(self, argv):
        if argv[:4] == ["ip", "link", "set", "dev"] and argv[5] == "mtu":
            (self.root / f"sys/class/net/{argv[4]}/mtu").write_text(argv[6] + "\n")
        return super().__call__(argv)


def _root(tmp_path, layout: str):
    root = tmp_path / "root"
    shutil.copytree(HOST / "files", root, symlinks=True)
    if layout == "netplan":
        return root
    shutil.copy(HOSTS / "rhel72-legacy/files/etc/os-release", root / "etc/os-release")
    shutil.rmtree(root / "etc/netplan")
    if layout == "ifcfg":
        (root / SCRIPTS.lstrip("/")).mkdir(parents=True)
        (root / f"{SCRIPTS.lstrip('/')}/ifcfg-ens1f0np0").write_text(IFCFG_1)
        (root / f"{SCRIPTS.lstrip('/')}/ifcfg-ens2f0np0").write_text(IFCFG_2)
    elif layout == "keyfile":
        folder = root / KEYFILES.lstrip("/")
        folder.mkdir(parents=True)
        for name, text in (("roce0", KEYFILE_1), ("roce1", KEYFILE_2)):
            (folder / f"{name}.nmconnection").write_text(text)
            (folder / f"{name}.nmconnection").chmod(0o600)  # NetworkManager's rule
        (folder / "eno1.nmconnection").write_text("[connection]\ninterface-name=eno1\n")
    return root


def _ip(netdev: str, value: int) -> list[str]:
    return ["ip", "link", "set", "dev", netdev, "mtu", str(value)]


RAISE = [_ip("ens1f0np0", 4200), _ip("ens2f0np0", 4200)]
LOWER = [_ip("ens2f0np0", 1500), _ip("ens1f0np0", 1500)]  # undo: in reverse
RELOAD = ["nmcli", "connection", "reload"]

CHANGED = {
    "netplan": {
        NETPLAN_MTU: "# written by dldoctor (fix.network.roce_mtu)\nnetwork:\n  version: 2\n"
        "  ethernets:\n    ens1f0np0:\n      mtu: 4200\n    roce1:\n      mtu: 4200\n",
    },
    "ifcfg": {
        f"{SCRIPTS}/ifcfg-ens1f0np0": IFCFG_1.replace("MTU=1500", "MTU=4200"),
        f"{SCRIPTS}/ifcfg-ens2f0np0": IFCFG_2 + "MTU=4200\n",
    },
    "keyfile": {
        f"{KEYFILES}/roce0.nmconnection": KEYFILE_1.replace("mtu=1500", "mtu=4200"),
        f"{KEYFILES}/roce1.nmconnection": KEYFILE_2.replace(
            "[ethernet]\n", "[ethernet]\nmtu=4200\n"
        ),
    },
}


@pytest.mark.parametrize(
    "layout, ran_on_apply, ran_on_undo",
    [("netplan", RAISE, LOWER),
     ("ifcfg", RAISE, LOWER),
     ("keyfile", [RELOAD, *RAISE], [*LOWER, RELOAD])],  # the reload again after the files
)  # fmt: skip
def test_roce_mtu_previewed_applied_fixed_and_undone(tmp_path, layout, ran_on_apply, ran_on_undo):
    root = _root(tmp_path, layout)
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    runner = FakeIp(root)
    target = Target(str(root), runner)
    before = tree(root)
    text = plan.preview(target)
    assert tree(root) == before and runner.ran == []
    assert (
        "run ip link set dev ens1f0np0 mtu 4200  (undo: ip link set dev ens1f0np0 mtu 1500)" in text
    )
    assert "switch ports" in text and "dldoctor cannot change them" in text

    record = apply(plan, target)
    assert runner.ran == ran_on_apply
    for path, content in CHANGED[layout].items():
        assert (root / path.lstrip("/")).read_text() == content
    changed = {
        k for k, v in tree(root).items() if before.get(k) != v and "var/lib/dldoctor" not in k
    }
    assert changed == {p.lstrip("/") for p in CHANGED[layout]} | {
        f"sys/class/net/{n}/mtu" for n in NETDEVS
    }
    assert [mtu(root, n) for n in NETDEVS] == ["4200\n", "4200\n"]
    statuses = recheck(plan.resolves, LiveHost(str(root)), Policy())
    assert statuses == {"network.roce": "pass"}
    assert verdict(plan, statuses, rebooted=False) == "fixed"

    undo(record["id"], target)
    assert runner.ran == ran_on_apply + ran_on_undo
    assert {k: v for k, v in tree(root).items() if "var/lib/dldoctor" not in k} == before
    assert recheck(plan.resolves, LiveHost(str(root)), Policy()) == {"network.roce": "warn"}


def test_the_preview_says_when_the_file_takes_effect(tmp_path):
    notes = "\n".join(
        builder(FIX)(Facts(LiveHost(str(_root(tmp_path, "netplan")))), Policy()).notes
    )
    assert f"{NETPLAN_MTU} takes effect at the next boot or `netplan apply`" in notes
    assert "not run here: it can bounce links" in notes


def test_a_netplan_file_sorting_after_dldoctors_is_named(tmp_path):
    root = _root(tmp_path, "netplan")
    (root / "etc/netplan/99-late.yaml").write_text("network:\n  version: 2\n")
    notes = "\n".join(builder(FIX)(Facts(LiveHost(str(root))), Policy()).notes)
    assert "99-late.yaml sort after it: what they set wins" in notes


def test_where_nothing_configures_the_port_the_change_is_for_this_boot_only(tmp_path):
    root = _root(tmp_path, "none")
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    assert [s.argv for s in plan.steps] == [tuple(a) for a in RAISE]
    assert any(
        "configures ens1f0np0, ens2f0np0: the MTU set now is lost at the next reboot" in n
        for n in plan.notes
    )


def test_an_interface_netplan_does_not_name_gets_an_entry_by_its_name(tmp_path):
    root = _root(tmp_path, "netplan")
    (root / "etc/netplan/01-netcfg.yaml").write_text("network:\n  ethernets:\n    eno1: {}\n")
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    assert plan.steps[0].content.endswith(
        b"ens1f0np0:\n      mtu: 4200\n    ens2f0np0:\n      mtu: 4200\n"
    )
    assert any("no netplan file names ens1f0np0, ens2f0np0" in n for n in plan.notes)


def test_no_port_below_the_mtu_is_advice_only(tmp_path):
    root = _root(tmp_path, "netplan")
    for netdev in NETDEVS:
        (root / f"sys/class/net/{netdev}/mtu").write_text("9000\n")
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    assert plan.steps == () and "nothing to change" in plan.notes[0]
    with pytest.raises(FixError, match="nothing to apply here"):
        apply(plan, Target(str(root), Recorder()))


def test_netplan_names_an_interface_by_id_set_name_or_exact_match():
    text = (HOST / "files/etc/netplan/01-netcfg.yaml").read_text() + (
        "  bonds:\n    bond0:\n      interfaces: [ens1f0np0]\n"
    )
    assert netplan_names(text) == {
        "eno1": ("ethernets", "eno1"),
        "ens1f0np0": ("ethernets", "ens1f0np0"),
        "ens2f0np0": ("ethernets", "roce1"),
        "bond0": ("bonds", "bond0"),
    }
    other = """\
network:
    ethernets:
        rdma0:   # a comment
            match:
                name: "ens3f0np0"
        lan:
            match: {macaddress: "b8:3f:d2:00:00:01"}
        ens9:
            match:
                name: ens9*
            mtu: 9000
"""
    # The glob and the match by MAC name no interface: their ids are only labels.
    assert netplan_names(other) == {"ens3f0np0": ("ethernets", "rdma0")}
    assert netplan_names("") == {} and netplan_names("network: [\n  :::\n- x: y") == {}


@pytest.mark.parametrize(
    "text, sections, expected",
    [
        ("[ethernet]\nmtu=1500\n[wifi]\nmtu=1400\n", ("ethernet",), "[ethernet]\nmtu=4200\n[wifi]\nmtu=1400\n"),
        ("[connection]\nid=x\n", ("ethernet",), "[connection]\nid=x\n[ethernet]\nmtu=4200\n"),
        ("[connection]\nid=x", ("ethernet",), "[connection]\nid=x\n[ethernet]\nmtu=4200\n"),
        ("[802-3-ethernet]\r\nmtu=1500\r\n", ("ethernet", "802-3-ethernet"), "[802-3-ethernet]\r\nmtu=4200\r\n"),
        ("DEVICE=ib0\n# MTU=9000\nMTU=1500", None, "DEVICE=ib0\n# MTU=9000\nMTU=4200"),
    ],
)  # fmt: skip
def test_the_line_is_set_and_every_other_byte_kept(text, sections, expected):
    key = "MTU" if sections is None else "mtu"
    assert _with_line(text, key, 4200, sections) == expected.encode()


def test_a_keyfile_that_is_not_utf8_keeps_its_bytes(tmp_path):
    root = _root(tmp_path, "keyfile")
    keyfile = root / KEYFILES.lstrip("/") / "roce0.nmconnection"
    keyfile.write_bytes(b"# caf\xe9\n" + KEYFILE_1.encode())
    plan = builder(FIX)(Facts(LiveHost(str(root))), Policy())
    (step,) = [s for s in plan.steps if getattr(s, "path", "").endswith("roce0.nmconnection")]
    assert step.content == b"# caf\xe9\n" + KEYFILE_1.replace("mtu=1500", "mtu=4200").encode()
    assert step.mode == 0o600


def test_the_finding_offers_the_fix_only_for_a_low_mtu(tmp_path):
    for host, status in ((HOST, "warn"), (HOSTS / "hgx-h100x8-roce-mtu1500", "fail")):
        report = report_of(run_dldoctor("--check", "--json", "--from", str(host)))
        (finding,) = [f for f in report["findings"] if f["id"] == "network.roce"]
        assert finding["status"] == status and finding["fixes"] == [FIX]
    # No v2 GID, but the MTU is right: the MTU fix would change nothing the check wants.
    bundle = tmp_path / "bundle"
    shutil.copytree(HOSTS / "hgx-h100x8-roce-mtu1500", bundle, symlinks=True)
    for netdev in NETDEVS:
        (bundle / f"files/sys/class/net/{netdev}/mtu").write_text("4200\n")
    report = report_of(run_dldoctor("--check", "--json", "--from", str(bundle)))
    (finding,) = [f for f in report["findings"] if f["id"] == "network.roce"]
    assert finding["status"] == "fail" and finding["fixes"] == []


def test_the_cli_refuses_while_a_process_holds_a_gpu_and_applies_with_force(tmp_path):
    root = _root(tmp_path, "netplan")
    log = tmp_path / "ip.log"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake_command(
        bindir,
        "ip",
        f"""echo "$*" >> {log}
[ "$1 $2 $3 $5" = "link set dev mtu" ] || exit 1
printf '%s\\n' "$6" > {root}/sys/class/net/"$4"/mtu""",
    )
    env = {"PATH": f"{bindir}:{os.environ['PATH']}"}
    (root / "dev").mkdir()
    (root / "dev/nvidia0").write_bytes(b"")
    before = tree(root)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys,time; f=open(sys.argv[1]); print(1, flush=True); "
         "time.sleep(60)", str(root / "dev/nvidia0")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline() == "1\n"  # it has the device open
        refused = run_dldoctor("fix", FIX, "--apply", "--yes", "--root", str(root), env=env)
        assert refused.returncode != 0
        assert f"pid {holder.pid} (" in refused.stderr and "(or --force" in refused.stderr
        assert tree(root) == before and not log.exists()

        forced = run_dldoctor(
            "fix", FIX, "--apply", "--yes", "--force", "--root", str(root), env=env
        )
        assert forced.returncode == 0, forced.stderr
        assert "fixed (network.roce pass)" in forced.stdout
    finally:
        holder.kill()
        holder.communicate()
    assert log.read_text() == "link set dev ens1f0np0 mtu 4200\nlink set dev ens2f0np0 mtu 4200\n"
    assert (root / NETPLAN_MTU.lstrip("/")).read_text() == CHANGED["netplan"][NETPLAN_MTU]
    journal_id = run_dldoctor("fix", "--history", "--root", str(root)).stdout.split()[0]
    undone = run_dldoctor("fix", "--undo", journal_id, "--root", str(root), env=env)
    assert undone.returncode == 0, undone.stderr
    assert log.read_text().splitlines()[2:] == [
        "link set dev ens2f0np0 mtu 1500",
        "link set dev ens1f0np0 mtu 1500",
    ]
    assert {k: v for k, v in tree(root).items() if "var/lib/dldoctor" not in k} == before
