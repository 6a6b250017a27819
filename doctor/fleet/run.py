"""`dldoctor fleet run`: dldoctor on every node of a node set, through ClusterShell.

ClusterShell's Task runs the command: over ssh (its ssh worker, the default), or with
`--exec` as a local command per node (its exec worker, `%h` replaced by the node's name:
`kubectl exec %h -- dldoctor ...`, or the tests' fake nodes). Its fan-out bounds the nodes
at a time, its per-node timeout ends the ones that hang. Each node's stdout is written
into the sweep folder as it streams (at most a bounded part kept in memory), and what
became of every node goes into sweep.json; `fleet report` judges the contents.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import json
import os
import sys
import time

from dldoctor.fleet.nodes import (
    MAX_REPORT_BYTES,
    NODE_NAME,
    NOT_A_REPORT,
    SWEEP,
    SWEEP_FORMAT,
    TIMED_OUT,
    UNREACHABLE,
)

REMOTE = "dldoctor --check --json"
# A bundle crosses ClusterShell's line-based streams as base64 text; mktemp keeps it in a
# private folder on the node, removed whatever happens.
SNAPSHOT = (
    'd=$(mktemp -d) || exit 1; dldoctor snapshot --output "$d/node.tar.gz"{policy} >/dev/null '
    '&& base64 "$d/node.tar.gz"; rc=$?; rm -rf "$d"; exit $rc'
)
POLICY_ARG = " --policy /dev/stdin"
SSH_FAILED = 255  # ssh's own exit status: no connection, refused, no key
MAX_ANSWER_BYTES = {False: MAX_REPORT_BYTES, True: 4 * MAX_REPORT_BYTES}  # by --snapshot
MAX_POLICY_BYTES = 1024 * 1024
FLUSH_BYTES = 1024 * 1024  # a node's output is kept in memory up to this, then appended
STDERR_TAIL = 2048
CONNECT_TIMEOUT_S = 10.0
MAX_NODE_TIMEOUT_S = 86400.0  # a day


def remote_command(
    *, policy: bool, snapshot: bool, active: bool = False, force: bool = False
) -> str:
    """What runs on each node over ssh: dldoctor must be on its PATH. `active`, `force`:
    the node measures too (docs/active.md), GPUs in use included."""
    options = (POLICY_ARG if policy else "") + (" --active" if active else "")
    options += " --force" if force else ""
    if snapshot:
        return SNAPSHOT.format(policy=options)
    return REMOTE + options


def _nodes(args):
    from ClusterShell.NodeSet import NodeSet, NodeSetException
    from ClusterShell.NodeUtils import GroupResolverError, GroupSourceError

    from dldoctor.cli import UsageError

    try:
        nodes = NodeSet(args.nodes)
        if args.exclude:
            nodes.difference_update(NodeSet(args.exclude))
    except (NodeSetException, GroupResolverError, GroupSourceError) as exc:
        raise UsageError(f"-w/-x: {exc}") from None
    if not nodes:
        raise UsageError(f"-w {args.nodes}: no node in that node set")
    odd = [n for n in nodes if not NODE_NAME.fullmatch(n) or n.startswith(".")]
    if odd:  # a name is also a file name in the sweep folder
        raise UsageError(f"-w: {odd[0]!r} is not a host name")
    return nodes


def _policy(path: str | None) -> bytes | None:
    """The bytes of the policy the request read (a bad one was refused there, before any
    node runs)."""
    if path is None:
        return None
    from dldoctor.cli import InputError

    try:
        with open(path, "rb") as f:
            data = f.read(MAX_POLICY_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read policy {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_POLICY_BYTES:
        raise InputError(f"policy {path} is larger than {MAX_POLICY_BYTES >> 10} KiB")
    return data


def _folder(path: str | None) -> str:
    from dldoctor.cli import UsageError

    if path is None:
        path = "dldoctor-fleet-" + _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    try:
        os.makedirs(path, exist_ok=True)
        if os.listdir(path):
            raise UsageError(f"-o {path}: not empty (each sweep gets its own folder)")
    except OSError as exc:
        raise UsageError(f"-o {path}: {exc.strerror or exc}") from None
    return path


def _check_numbers(fanout: int, node_timeout: float) -> None:
    from dldoctor.cli import UsageError

    if fanout < 1:
        raise UsageError("--fanout must be at least 1")
    if not (0 < node_timeout <= MAX_NODE_TIMEOUT_S):  # worded as every --timeout's refusal
        raise UsageError(
            f"--timeout must be more than 0 and at most {MAX_NODE_TIMEOUT_S:g} seconds"
        )


def _check_exec(command: str | None) -> None:
    """A `%` ClusterShell cannot replace in `--exec` is refused before the sweep's folder
    is made (the worker would raise at the first node's start): with ClusterShell's own
    replacement, so that what is accepted is what it runs."""
    if command is None:
        return
    # Private, and the one private name imported here: ClusterShell 1.10 offers no public
    # way to check a pattern (ExecClient._build_cmd calls this at each node's start).
    from ClusterShell.Worker.Exec import _replace_cmd
    from ClusterShell.Worker.Worker import WorkerError

    from dldoctor.cli import UsageError

    try:
        _replace_cmd(command, "node", 0)
    except WorkerError as exc:
        raise UsageError(f"--exec: {exc} (%h is the node's name)") from None


def sweep(args, request, node_timeout: float) -> str:
    """Run the sweep of `args` (the `fleet run` arguments), sending the nodes the policy
    of `request`, each node timed out at `node_timeout` s; the folder it wrote."""
    from ClusterShell.Task import task_self

    _check_numbers(args.fanout, node_timeout)
    _check_exec(args.exec_command)
    nodes = _nodes(args)
    policy = _policy(request.policy_path)
    folder = _folder(args.output)
    local = args.exec_command is not None
    command = (
        args.exec_command
        if local
        else remote_command(
            policy=bool(policy), snapshot=args.snapshot, active=request.active, force=request.force
        )
    )
    started = time.time()
    progress = _Progress(len(nodes))
    collector = _collector(folder, MAX_ANSWER_BYTES[args.snapshot], progress)
    task = task_self()
    task.set_info("fanout", args.fanout)
    task.set_info("connect_timeout", min(CONNECT_TIMEOUT_S, node_timeout))
    if args.ssh_options:
        task.set_info("ssh_options", args.ssh_options)
    if local:
        task.set_default("local_worker", _exec_worker())
    # The handler keeps the output; ClusterShell's in-memory trees would hold every node's.
    task.set_default("stdout_msgtree", False)
    task.set_default("stderr_msgtree", False)
    worker = task.shell(
        command,
        nodes=str(nodes),
        handler=collector,
        timeout=node_timeout,
        stderr=True,
        stdin=policy is not None,
        remote=not local,
    )
    if policy is not None:
        worker.write(policy)
        worker.set_write_eof()
    try:
        with progress:
            task.resume()
    except BaseException:
        task.abort(kill=True)  # Ctrl-C or SIGTERM: no node's command outlives the sweep
        raise
    timed_out = set(task.iter_keys_timeout())
    outcomes = {node: collector.outcome(node, node in timed_out, node_timeout) for node in nodes}
    record = {
        "format": SWEEP_FORMAT,
        "format_version": 1,
        "nodeset": str(nodes),
        "command": command,
        "worker": "exec" if local else "ssh",
        "started_at": _dt.datetime.fromtimestamp(started, _dt.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        ),
        "duration_s": round(time.time() - started, 3),
        "fanout": args.fanout,
        "timeout_s": node_timeout,
        "nodes": outcomes,
    }
    from dldoctor.atomicfile import write_atomically

    data = (json.dumps(record, indent=1, ensure_ascii=True) + "\n").encode()
    write_atomically(os.path.join(folder, SWEEP), data, make_parents=False)
    print(f"dldoctor: {len(nodes)} node(s) swept into {folder}", file=sys.stderr)
    return folder


def _exec_worker():
    """ClusterShell's exec worker, whose timeout (and abort) kills each node's command with
    what it started: its own kills only the `/bin/sh -c` that runs `--exec`, and the
    command the shell started would live on."""
    from ClusterShell.Worker.Exec import ExecClient, ExecWorker

    from dldoctor.reaper import end_tree

    class NodeCommand(ExecClient):
        def _close(self, abort, timeout):
            if abort and self.popen.poll() is None:
                end_tree(self.popen.pid, reap=False)  # ClusterShell reaps its own
            super()._close(abort, timeout)

    class NodeCommands(ExecWorker):
        SHELL_CLASS = NodeCommand

    return NodeCommands


def _collector(folder: str, cap: int, progress: _Progress):
    from ClusterShell.Event import EventHandler

    class Collector(EventHandler):
        """Each node's stdout into `<node>.part` (in memory up to FLUSH_BYTES, appended
        past it: no file stays open while a node runs, so a thousand that hang hold no
        descriptor); the tail of its stderr; its exit status."""

        def __init__(self):
            self.pending: dict[str, list[bytes]] = {}
            self.size: dict[str, int] = {}
            self.stderr: dict[str, bytes] = {}
            self.rc: dict[str, int] = {}

        def ev_read(self, worker, node, sname, msg):
            if sname == worker.SNAME_STDERR:
                self.stderr[node] = (self.stderr.get(node, b"") + msg + b"\n")[-STDERR_TAIL:]
                return
            size = self.size.get(node, 0) + len(msg) + 1
            self.size[node] = size
            if size > cap:  # the rest is dropped: the node is "not a report"
                self.pending.pop(node, None)
                return
            chunks = self.pending.setdefault(node, [])
            chunks += (msg, b"\n")
            if sum(map(len, chunks)) > FLUSH_BYTES:
                self._flush(node)

        def _flush(self, node: str) -> None:
            with open(_part(folder, node), "ab") as f:
                f.write(b"".join(self.pending.pop(node, ())))

        def ev_hup(self, worker, node, rc):
            self.rc[node] = rc
            progress.advance()

        def outcome(self, node: str, timed_out: bool, timeout: float) -> dict:
            part = _part(folder, node)
            if node in self.pending:
                self._flush(node)
            rc, size = self.rc.get(node), self.size.get(node, 0)
            err = self.stderr.get(node, b"").decode("utf-8", "replace").strip()
            last = err.splitlines()[-1] if err else ""
            found = {"outcome": NOT_A_REPORT, "file": None, "exit_code": rc, "detail": ""}
            if timed_out:
                found.update(outcome=TIMED_OUT, detail=f"no answer within {timeout:g} s")
            elif size > cap:
                found["detail"] = f"more than {cap >> 20} MiB of output"
            elif size:
                found.update(outcome="answered", file=_keep(folder, node, part))
            elif rc == SSH_FAILED:
                found.update(outcome=UNREACHABLE, detail=last or f"exit {rc}")
            else:
                found["detail"] = f"no output (exit {rc})" + (f": {last}" if last else "")
            if found["file"] is None and os.path.exists(part):
                os.unlink(part)
            return found

    return Collector()


def _part(folder: str, node: str) -> str:
    return os.path.join(folder, f".{node}.part")


def _keep(folder: str, node: str, part: str) -> str:
    """The node's answer under its name: `<node>.json` (a report), `<node>.tar.gz` (the
    base64 bundle decoded), or `<node>.out` (anything else, kept to be looked at)."""
    from dldoctor.snapshots.archive import GZIP_MAGIC

    with open(part, "rb") as f:
        head = f.read(64).lstrip()
    name = f"{node}.out"
    if head.startswith(b"{"):
        name = f"{node}.json"
    elif head[:4] == base64.b64encode(GZIP_MAGIC + b"\x08")[:4]:
        with open(part, "rb") as f:
            text = b"".join(f.read().split())
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            data = b""
        if data.startswith(GZIP_MAGIC):
            with open(part, "wb") as f:
                f.write(data)
            name = f"{node}.tar.gz"
    os.rename(part, os.path.join(folder, name))
    return name


class _Progress:
    """A Rich progress bar on stderr when it is a terminal; nothing in a pipe or a file."""

    def __init__(self, total: int):
        self.bar = None
        if sys.stderr is not None and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self.bar = Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self.task = self.bar.add_task("dldoctor on the nodes", total=total)

    def __enter__(self):
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()

    def advance(self) -> None:
        if self.bar is not None:
            self.bar.advance(self.task)
