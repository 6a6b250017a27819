"""A one-node Slurm cluster on this machine, in one temporary folder: munged, slurmctld and
slurmd in the foreground, as children, on their own socket and loopback ports.

Everything a daemon writes (state, spool, pid and log files, munge's key, socket and seed)
is under the folder; `stop()` ends every daemon and whatever is still running from the
folder (a health check slurmd started). Used by tests/test_slurm.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = {"munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd"}
CLIENTS = {"sinfo": "slurm-client", "scontrol": "slurm-client"}


class NotStarted(Exception):
    """The daemons could not be brought up here: the message says which and why."""


def missing_programs() -> list[str]:
    """'slurmd (Debian package slurmd)' for each program not installed."""
    found = {name: shutil.which(name) or _sbin(name) for name in {**DAEMONS, **CLIENTS}}
    return [
        f"{n} (Debian package {pkg})" for n, pkg in {**DAEMONS, **CLIENTS}.items() if not found[n]
    ]


def _sbin(name: str) -> str | None:
    path = Path("/usr/sbin") / name
    return str(path) if os.access(path, os.X_OK) else None


def _program(name: str) -> str:
    return shutil.which(name) or _sbin(name) or name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_hardware() -> str:
    """The CPU layout slurmd finds (`slurmd -C`): a node configured with more than it has
    registers as invalid and is drained by Slurm itself."""
    out = subprocess.run([_program("slurmd"), "-C"], capture_output=True, text=True, timeout=30)
    first = out.stdout.splitlines()[0] if out.stdout else ""
    keys = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore")
    fields = dict(f.split("=", 1) for f in first.split() if "=" in f)
    if not all(k in fields for k in keys):
        raise NotStarted(f"`slurmd -C` printed no node line: {out.stdout!r} {out.stderr!r}")
    return " ".join(f"{k}={fields[k]}" for k in keys)


class Cluster:
    def __init__(self, folder: Path, health_check: Path, interval: int = 5):
        self.dir = folder
        self.dir.chmod(0o755)  # munged wants the socket's folders searchable by everyone
        self.node = socket.gethostname().split(".")[0]
        self.conf = folder / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs: dict[str, subprocess.Popen] = {}
        self.health_check = health_check
        self.interval = interval

    # --- set-up ---------------------------------------------------------------------

    def write_config(self) -> None:
        d = self.dir
        for sub in ("state", "spool"):
            (d / sub).mkdir(exist_ok=True)
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)  # munged refuses a key others can read
        (d / "plugstack.conf").write_text("")  # not the system's /etc/slurm/plugstack.conf
        lines = [
            "ClusterName=dldoctortest",
            f"SlurmctldHost={self.node}(127.0.0.1)",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={d / 'munge.sock'}",
            f"StateSaveLocation={d / 'state'}",
            f"SlurmdSpoolDir={d / 'spool'}",
            f"SlurmctldPidFile={d / 'slurmctld.pid'}",
            f"SlurmdPidFile={d / 'slurmd.pid'}",
            f"SlurmctldLogFile={d / 'slurmctld.log'}",
            f"SlurmdLogFile={d / 'slurmd.log'}",
            f"PlugStackConfig={d / 'plugstack.conf'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "ReturnToService=2",
            f"HealthCheckProgram={self.health_check}",
            f"HealthCheckInterval={self.interval}",
            "HealthCheckNodeState=ANY",
            f"NodeName={self.node} NodeAddr=127.0.0.1 {_node_hardware()} State=UNKNOWN",
            f"PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n")

    def start(self, ready_within: float = 60.0) -> None:
        """Start the three daemons; NotStarted if the node is not idle in time."""
        d = self.dir
        self._spawn(
            "munged",
            [_program("munged"), "--foreground", f"--socket={d / 'munge.sock'}",
             f"--key-file={d / 'munge.key'}", f"--pid-file={d / 'munged.pid'}",
             f"--seed-file={d / 'munged.seed'}", f"--log-file={d / 'munged.log'}"],
        )  # fmt: skip
        self._wait_for(lambda: (d / "munge.sock").exists(), 15, "munged made no socket")
        self._spawn("slurmctld", [_program("slurmctld"), "-D", "-i"])
        self._wait_for(lambda: self.sinfo("%T") is not None, 20, "slurmctld does not answer")
        self._spawn("slurmd", [_program("slurmd"), "-D", "-N", self.node])
        self._wait_for(lambda: self.sinfo("%T") == "idle", ready_within, "the node never went idle")

    def _spawn(self, name: str, argv: list[str]) -> None:
        out = open(self.dir / f"{name}.out", "wb")  # the child keeps its own copy
        with out:
            # Their own session: stop() signals the whole group (slurmctld's slurmscriptd).
            self.procs[name] = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self.env, cwd=self.dir, start_new_session=True,
            )  # fmt: skip

    def _wait_for(self, ready, within: float, what: str) -> None:
        until = time.monotonic() + within
        while time.monotonic() < until:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise NotStarted(f"{name} exited {proc.returncode}: {self.tail(name)}")
            if ready():
                return
            time.sleep(0.2)
        raise NotStarted(f"{what} within {within:g} s: {self.tail(list(self.procs)[-1])}")

    def tail(self, name: str, lines: int = 5) -> str:
        text = ""
        for suffix in (".out", ".log"):
            path = self.dir / f"{name}{suffix}"
            if path.exists():
                text += path.read_text(errors="replace")
        return " | ".join(text.strip().splitlines()[-lines:]) or "(no output)"

    # --- clients --------------------------------------------------------------------

    def sinfo(self, fmt: str) -> str | None:
        """`sinfo -h -N -n NODE -o FMT` for the node; None when the controller did not answer."""
        argv = [_program("sinfo"), "-h", "-N", "-n", self.node, "-o", fmt]
        try:
            out = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=10)
        except subprocess.TimeoutExpired:
            return None
        return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None

    def scontrol(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [_program("scontrol"), *args], capture_output=True, text=True, env=self.env, timeout=10
        )

    # --- tear-down ------------------------------------------------------------------

    def stop(self) -> list[str]:
        """End every daemon (TERM, then KILL) and every process still running from the
        folder; the ones that had to be killed, for the test to report."""
        killed = []
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                killed.append(name)
                _signal_group(proc, signal.SIGKILL)
                proc.wait(timeout=5)
            _signal_group(proc, signal.SIGKILL)  # what it left in its group
        for pid, cmd in self.running_from_folder():
            killed.append(cmd)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return killed

    def running_from_folder(self) -> list[tuple[int, str]]:
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except (OSError, UnicodeDecodeError):
                continue
            if str(self.dir) in cmd:
                found.append((int(entry), cmd.strip()))
        return found


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except OSError:
        pass
