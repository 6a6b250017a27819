"""A fake node of a `dldoctor fleet run --exec` sweep: `python tests/support/fleet_node.py NODE`.

$FLEET_PLAN names a JSON file mapping each node to what it does: replay a fixture bundle
through the real dldoctor (`{"bundle": PATH}`, the policy on stdin passed on when
`"policy": true`, a bundle printed in base64 instead of a report with `"snapshot": true`),
print again the report a real run printed, with its exit status (`{"report": PATH}`: a node
identical to one that ran, for sweeps whose size is the point, not each node's run),
fail as ssh does when the host is down (`"unreachable"`), hang (`"hang"`), or print
something that is not a report (`"garbage"`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time


def main(node: str) -> int:
    with open(os.environ["FLEET_PLAN"]) as f:
        plan = json.load(f)[node]
    if plan == "unreachable":
        print(f"ssh: connect to host {node} port 22: No route to host", file=sys.stderr)
        return 255
    if plan == "hang":  # its pid in $FLEET_HANG_PID, to see that it was killed
        if os.environ.get("FLEET_HANG_PID"):
            with open(os.environ["FLEET_HANG_PID"], "w") as f:
                f.write(str(os.getpid()))
        time.sleep(600)
        return 0
    if plan == "garbage":
        print("<html><body>502 Bad Gateway</body></html>")
        return 0
    if "report" in plan:
        with open(plan["report"], encoding="utf-8") as f:
            text = f.read()
        sys.stdout.write(text)
        return json.loads(text)["summary"]["exit_code"]
    dldoctor = [sys.executable, "-m", "dldoctor"]
    policy = ["--policy", "/dev/stdin"] if plan.get("policy") else []
    if not plan.get("snapshot"):
        os.execv(
            sys.executable, [*dldoctor, "--check", "--json", "--from", plan["bundle"], *policy]
        )
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "node.tar.gz")
        argv = [*dldoctor, "snapshot", "--no-redact", "--from", plan["bundle"], "-o", out, *policy]
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        return subprocess.run(["base64", out]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
