"""Fixes for the RDMA network checks."""

from __future__ import annotations

import json
import re

from dldoctor.checks.network import ROCE_MTU, low_mtu
from dldoctor.facts import Facts
from dldoctor.fixes.looking import names_in
from dldoctor.fixes.plan import Plan, RunCommand, WriteFile
from dldoctor.policy import Policy

PEERMEM_CONF = "/etc/modules-load.d/nvidia-peermem.conf"


def load_peermem(facts: Facts, policy: Policy) -> Plan:
    """nvidia_peermem loaded now and at every boot (systemd-modules-load reads
    modules-load.d on Debian, Ubuntu and the RHEL family alike)."""
    return Plan(
        "fix.network.load_peermem",
        "load nvidia_peermem, so NCCL can use GPUDirect RDMA",
        (
            WriteFile(
                PEERMEM_CONF, b"# written by dldoctor (fix.network.load_peermem)\nnvidia-peermem\n"
            ),
            RunCommand(
                ("modprobe", "nvidia-peermem"), undo_argv=("modprobe", "-r", "nvidia-peermem")
            ),
        ),
        resolves=("network.gpudirect",),
    )


MTU_FIX = "fix.network.roce_mtu"
NETPLAN = "/etc/netplan"
NETPLAN_MTU = f"{NETPLAN}/90-dldoctor-mtu.yaml"  # netplan merges its files in lexical order
KEYFILES = "/etc/NetworkManager/system-connections"
IFCFG = "/etc/sysconfig/network-scripts/ifcfg-{}"
ETHERNET = ("ethernet", "802-3-ethernet")  # a keyfile's section for it, and the alias


def roce_mtu(facts: Facts, policy: Policy) -> Plan:
    """The RoCE netdevs below ROCE_MTU raised to it now (`ip link`), and in the file that
    configures each at boot: netplan, a NetworkManager keyfile, or an ifcfg file."""
    low = low_mtu(facts)
    title = f"raise the MTU of the RoCE netdevs to {ROCE_MTU} (RoCE's 4096-byte active MTU)"
    if not low:
        note = f"no RoCE port's netdev is below MTU {ROCE_MTU}: nothing to change"
        return Plan(MTU_FIX, title, (), resolves=("network.roce",), notes=(note,))
    netplan_files, netplan_ids = _netplan(facts.host)
    steps: list = []
    entries: dict[tuple[str, str], None] = {}  # (kind, id) the new netplan file sets
    unnamed, ifcfgs, unconfigured, reload = [], [], [], False
    for netdev in low:
        keyfiles = _keyfiles_naming(facts.host, netdev)
        ifcfg = IFCFG.format(netdev)
        ifcfg_text = _text(facts.host, ifcfg)
        if netdev in netplan_ids or (netplan_files and not keyfiles and ifcfg_text is None):
            entries[netplan_ids.get(netdev, ("ethernets", netdev))] = None
            unnamed += [] if netdev in netplan_ids else [netdev]
        elif keyfiles:
            steps += [
                WriteFile(p, _with_line(t, "mtu", ROCE_MTU, ETHERNET), 0o600)
                for p, t in keyfiles.items()
            ]
            reload = True
        elif ifcfg_text is not None:
            steps.append(WriteFile(ifcfg, _with_line(ifcfg_text, "MTU", ROCE_MTU)))
            ifcfgs.append(ifcfg)
        else:
            unconfigured.append(netdev)
    notes = []
    if entries:
        steps.insert(0, WriteFile(NETPLAN_MTU, _netplan_file(entries), 0o600))
        later = [n for n in netplan_files if n > NETPLAN_MTU.rsplit("/", 1)[1]]
        notes.append(
            f"{NETPLAN_MTU} takes effect at the next boot or `netplan apply` (not "
            "run here: it can bounce links)"
            + (f"; {', '.join(later)} sort after it: what they set wins" if later else "")
        )
    if unnamed:
        notes.append(
            f"no netplan file names {', '.join(unnamed)}: the new entries are keyed by the "
            "interface name (`netplan get` shows whether another entry matches it too)"
        )
    if ifcfgs:
        notes.append(
            f"{', '.join(ifcfgs)}: read at the next boot (by NetworkManager, where it reads "
            "ifcfg files, at `nmcli connection reload` too)"
        )
    if unconfigured:
        notes.append(
            f"no netplan, NetworkManager keyfile or ifcfg file configures "
            f"{', '.join(unconfigured)}: the MTU set now is lost at the next reboot; set it "
            "where the interface is configured (systemd-networkd: MTUBytes= in [Link])"
        )
    if reload:
        # Re-read only: `nmcli connection up` would bounce the link.
        steps.append(RunCommand(("nmcli", "connection", "reload"), regenerate=True))
    steps += [
        RunCommand(
            ("ip", "link", "set", "dev", n, "mtu", str(ROCE_MTU)),
            undo_argv=("ip", "link", "set", "dev", n, "mtu", str(old)),
        )
        for n, old in low.items()
    ]
    notes += [
        f"the switch ports (every hop between the hosts) must carry MTU {ROCE_MTU} too: "
        "dldoctor cannot change them, and a NIC MTU above the switch's drops frames",
        "a new MTU interrupts the RDMA traffic on the port and running NCCL jobs fail: apply "
        "refuses while processes hold the GPUs (--force overrides it); no service is restarted",
    ]
    return Plan(
        MTU_FIX,
        title,
        tuple(steps),
        resolves=("network.roce",),
        notes=tuple(notes),
        disturbs_gpus=True,
        force_ok=True,
    )


def _text(host, path: str) -> str | None:
    """The file's text; bytes that are not UTF-8 kept (surrogateescape) for the way back."""
    answer = host.read(path)
    return answer.value.decode("utf-8", "surrogateescape") if answer.ok else None


def _netplan(host) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """The /etc/netplan/*.yaml names, and netdev -> (kind, id) of the entry naming it."""
    files = names_in(host, NETPLAN, ".yaml")
    ids: dict[str, tuple[str, str]] = {}
    for name in files:
        ids.update(netplan_names(_text(host, f"{NETPLAN}/{name}") or ""))
    return files, ids


def netplan_names(text: str) -> dict[str, tuple[str, str]]:
    """netdev -> (kind, id) of the netplan entries that name one: by `set-name`, by an exact
    `match: name:`, or by their id when they have no `match` (then the id is the name).
    A line reader of the block style netplan files are written in (no YAML library); a
    glob, a match by MAC alone and flow style (`{...}`) name nothing here."""
    stack: list[tuple[int, str]] = []
    entries: dict[tuple[str, str], dict[str, str]] = {}
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip()
        body = line.lstrip(" ")
        if not body or body.startswith(("#", "-")) or ":" not in body:
            continue
        indent = len(line) - len(body)
        key, _, value = body.partition(":")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key.strip().strip("\"'")))
        path = [k for _, k in stack]
        if len(path) < 3 or path[0] != "network":
            continue
        seen = entries.setdefault((path[1], path[2]), {})
        what = "/".join(path[3:])
        if what in ("match", "set-name", "match/name"):
            seen[what] = value.strip().strip("\"'")
    found: dict[str, tuple[str, str]] = {}
    for (kind, ident), seen in entries.items():
        name = seen.get("set-name") or seen.get("match/name", "")
        if "match" not in seen:
            name = name or ident
        if name and not any(c in name for c in "*?[{"):
            found[name] = (kind, ident)
    return found


def _netplan_file(entries) -> bytes:
    lines = [f"# written by dldoctor ({MTU_FIX})", "network:", "  version: 2"]
    for kind in dict.fromkeys(k for k, _ in entries):
        lines.append(f"  {kind}:")
        for ident in (i for k, i in entries if k == kind):
            key = ident if re.fullmatch(r"[\w.-]+", ident) else json.dumps(ident)
            lines += [f"    {key}:", f"      mtu: {ROCE_MTU}"]
    return ("\n".join(lines) + "\n").encode()


def _keyfiles_naming(host, netdev: str) -> dict[str, str]:
    """path -> text of the NetworkManager keyfiles whose [connection] is for `netdev`."""
    found = {}
    for name in names_in(host, KEYFILES, ".nmconnection"):
        path = f"{KEYFILES}/{name}"
        text = _text(host, path)
        if text is not None and _value(text, "interface-name", ("connection",)) == netdev:
            found[path] = text
    return found


def _sections(text: str, sections: tuple[str, ...] | None):
    """(index, line, key) of each `key=value` line of `text` in one of `sections` (None: a
    file without sections, such as ifcfg)."""
    section = None
    for i, line in enumerate(text.splitlines(True)):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1].strip()
        elif "=" in stripped and not stripped.startswith(("#", ";")):
            if sections is None or section in sections:
                yield i, line, stripped.split("=", 1)[0].strip()


def _value(text: str, key: str, sections: tuple[str, ...]) -> str | None:
    for _, line, k in _sections(text, sections):
        if k == key:
            return line.split("=", 1)[1].strip().strip('"')
    return None


def _with_line(text: str, key: str, value: int, sections: tuple[str, ...] | None = None) -> bytes:
    """`text` with `key=value`: each line of the key (in `sections`) replaced, else one
    added after the first section's header (or at the end, the header too where the file
    has none). Every other byte kept."""
    lines = text.splitlines(True)
    new = f"{key}={value}\n"
    hits = [i for i, _, k in _sections(text, sections) if k == key]
    for i in hits:  # its line ending kept (CRLF, or none on a last line)
        lines[i] = new.rstrip("\n") + lines[i][len(lines[i].rstrip("\r\n")) :]
    if not hits:
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        header = next(
            (
                i
                for i, ln in enumerate(lines)
                if sections and ln.strip() in [f"[{s}]" for s in sections]
            ),
            None,
        )
        if header is not None:
            lines.insert(header + 1, new)
        else:
            lines += [f"[{sections[0]}]\n"] if sections else []
            lines.append(new)
    return "".join(lines).encode("utf-8", "surrogateescape")
