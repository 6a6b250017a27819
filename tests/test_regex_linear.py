"""Every regular expression dldoctor runs over host text takes linear time.

A backtracking regex holds the interpreter lock, so no deadline thread can stop it: one
quadratic pattern on one long line of a hostile host stalled a replay for minutes. The
linter times each pattern (compiled at module level, or a literal passed to `re.*`
inline) on adversarial inputs of 10k and 100k characters built from the pattern's own
characters, called the way the code calls it, and fails when the time grows faster than
linearly. The regressions below are the inputs that hung a replay before.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import string
import time
from pathlib import Path

import pytest

from dldoctor.facts import cudalibs, frameworks, mdraid, pythonenv, shm, toolkit

SMALL, LARGE = 10_000, 100_000
# Linear growth is 10x from SMALL to LARGE, quadratic 100x: 30x leaves room for noise.
MAX_RATIO = 30
MAX_LARGE_S = 0.5  # a linear scan of 100k characters takes milliseconds
FLOOR_S = 2e-4  # below this a timing is noise: the ratio is taken against it
METHODS = ("search", "match", "fullmatch", "findall", "finditer", "sub", "split")
_META = set("\\^$.|?*+()[]{}")


def _sources() -> dict[str, str]:
    names = []
    for package in ("dldoctor", "dldoctor.checks", "dldoctor.fixes", "dldoctor.snapshots"):
        path = importlib.import_module(package).__path__
        names += [package] + [i.name for i in pkgutil.walk_packages(path, package + ".")]
    return {
        name: Path(importlib.import_module(name).__file__).read_text()
        for name in dict.fromkeys(names)
        if not name.endswith("__main__")  # importing it runs the program
    }


SOURCES = _sources()
ALL_SOURCE = "\n".join(SOURCES.values())


def _module_patterns() -> dict[str, tuple[re.Pattern, set[str]]]:
    """Compiled patterns at module level (and inside module-level tuples/lists), each with
    the methods the code calls on it (all of them when its use is not by name)."""
    found: dict[str, tuple[re.Pattern, set[str]]] = {}
    for modname in SOURCES:
        for name, value in vars(importlib.import_module(modname)).items():
            items = value if isinstance(value, (tuple, list)) else (value,)
            for item in items:
                for pattern in item if isinstance(item, tuple) else (item,):
                    if not isinstance(pattern, re.Pattern):
                        continue
                    used = set(re.findall(rf"\b{re.escape(name)}\.(\w+)\(", ALL_SOURCE))
                    methods = used & set(METHODS) or {"search"}
                    key = f"{modname}.{name}:{pattern.pattern[:40]}"
                    found.setdefault(key, (pattern, methods))
    return found


def _inline_patterns() -> dict[str, tuple[re.Pattern, set[str]]]:
    """`re.search(r"...", text)` and the like with a literal pattern (and literal flags)."""
    found: dict[str, tuple[re.Pattern, set[str]]] = {}
    for modname, source in SOURCES.items():
        for node in ast.walk(ast.parse(source)):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "re"
                and node.func.attr in METHODS
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                continue
            flags = 0
            for keyword in node.keywords:
                if keyword.arg == "flags":
                    flags = _literal_flags(keyword.value)
            if node.func.attr in ("search", "match", "fullmatch") and len(node.args) > 2:
                flags = _literal_flags(node.args[2])
            pattern = re.compile(node.args[0].value, flags)
            key = f"{modname}:{node.lineno}:{pattern.pattern[:40]}"
            found[key] = (pattern, {node.func.attr})
    return found


def _literal_flags(node: ast.expr) -> int:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return getattr(re, node.attr)
    if isinstance(node, ast.BinOp):
        return _literal_flags(node.left) | _literal_flags(node.right)
    return 0


PATTERNS = {**_module_patterns(), **_inline_patterns()}


def _sample_lines() -> list[str]:
    """Real host lines (the fixture captures and bundles), to pump into attacks."""
    lines: dict[str, None] = {}
    for path in sorted(Path(__file__).parent.joinpath("fixtures").rglob("*")):
        if path.is_file() and path.stat().st_size < 65536:
            text = path.read_bytes().decode("utf-8", "replace")
            lines.update((line, None) for line in text.splitlines() if 4 < len(line) < 200)
    return list(lines)[:40_000]


SAMPLE_LINES = _sample_lines()


def _samples(pattern: re.Pattern, method: str) -> list[str]:
    """Up to two real lines the pattern accepts, called as the code calls it."""
    call = getattr(
        pattern, "search" if method in ("findall", "finditer", "sub", "split") else method
    )
    return [line for line in SAMPLE_LINES if call(line)][:2]


def _attacks(pattern: re.Pattern, n: int, method: str = "search") -> list[str]:
    """Long runs of what the pattern matches, each broken at its end so a match fails, and
    real lines it accepts pumped with a long run (the classic way to find a slow regex)."""
    attacks = []
    for line in _samples(pattern, method):
        space = line.find(" ", 1)
        attacks += [line + " " * n + "\x01", line + line[-1] * n + "\x01"]
        if space > 0:
            attacks.append(line[:space] + " " * n + line[space:] + "\x01")
    source = pattern.pattern
    chars = {c for c in source if c not in _META and c in string.printable and c != "\n"}
    chars |= set(" \t0a(")
    words = set(re.findall(r"[A-Za-z_][A-Za-z_ ]{1,30}", source))
    attacks += [c * n for c in sorted(chars)]
    attacks += [c * n + "\x01" for c in " 0a"]
    attacks += ["(" + " " * n + ")x", "a (" + " " * n + ")x", "0 " * (n // 2), "0." * (n // 2)]
    attacks += ["a " * (n // 2) + "\x01", "[" + "0" * n, "0" * n + " \x01"]
    for word in sorted(words):
        attacks += [word + " " * n + "\x01", word + ": " + " " * n + "x"]
        attacks.append((word + " ") * (n // (len(word) + 1)))
    return attacks


def _call(pattern: re.Pattern, method: str, text: str) -> None:
    if method == "finditer":
        for _ in pattern.finditer(text):
            pass
    elif method == "sub":
        pattern.sub("", text)
    else:
        getattr(pattern, method)(text)


def _best(pattern: re.Pattern, method: str, text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        # This thread's CPU time, not the wall clock: a run that loses the core to another
        # process (a loaded CI machine) is not counted as the pattern's time.
        start = time.thread_time()
        _call(pattern, method, text)
        best = min(best, time.thread_time() - start)
    return best


def test_the_linter_finds_the_patterns():
    # the collection itself could silently find nothing: name some it must hold
    keys = " ".join(PATTERNS)
    for expected in ("pythonenv._REQUIREMENT", "mdraid._BLOCKS", "toolkit._DEFINE", "nvlink.SXM",
                     "redact.shapes.SHAPES", "redact.secrets.SECRET_TOKENS",
                     "redact.secrets.KEY_SHAPES"):  # fmt: skip
        assert expected in keys
    assert sum(":" in k and k.split(":")[1].isdigit() for k in PATTERNS) > 20  # inline ones


def test_the_linter_catches_a_quadratic_pattern():
    # the measure must tell a quadratic pattern (the old Requires-Dist one) from a linear one
    old = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*([^;]*?)\s*(?:;(.*))?")
    assert _worst_ratio(old, {"fullmatch"}, small=1_000, large=4_000) > 8
    assert _worst_ratio(pythonenv._REQUIREMENT, {"fullmatch"}, small=1_000, large=4_000) < 8


def _worst_ratio(pattern: re.Pattern, methods: set[str], small: int, large: int) -> float:
    worst = 0.0
    for method in sorted(methods):
        for a_small, a_large in zip(
            _attacks(pattern, small), _attacks(pattern, large), strict=True
        ):
            t_small = max(_best(pattern, method, a_small, 3), FLOOR_S / 10)
            worst = max(worst, _best(pattern, method, a_large, 1) / t_small)
    return worst


@pytest.mark.parametrize("key", sorted(PATTERNS))
def test_pattern_is_linear(key):
    pattern, methods = PATTERNS[key]
    for method in sorted(methods):
        # screen every attack at SMALL once; time the slowest few at both sizes
        small = _attacks(pattern, SMALL, method)
        timed = sorted(
            ((_best(pattern, method, text, 1), i) for i, text in enumerate(small)), reverse=True
        )
        assert timed[0][0] < MAX_LARGE_S / 10, f"{method} takes {timed[0][0]:.3f}s on 10k"
        large = _attacks(pattern, LARGE, method)
        for _, i in timed[:3]:
            # best of several: one run of either size can lose a time slice on a busy CI
            t_small = max(_best(pattern, method, small[i], 5), FLOOR_S)
            t_large = _best(pattern, method, large[i], 4)
            assert t_large < MAX_LARGE_S and t_large / t_small < MAX_RATIO, (
                f"{method} on {large[i][:20]!r}...: {t_small:.5f}s at 10k, {t_large:.5f}s at 100k"
            )


# --- the inputs that hung a replay -------------------------------------------------------

HANG_S = 2.0  # each took 20 s to minutes before; this is a hang test, not a benchmark


def _timed(parse, text):
    # CPU time of this thread: a parse is CPU work, and another process's load is not counted.
    start = time.thread_time()
    result = parse(text)
    assert time.thread_time() - start < HANG_S
    return result


def test_requires_dist_of_spaces():  # 158 s
    text = "Name: a\nVersion: 1\nRequires-Dist: a (" + " " * 100_000 + ")x\n"
    meta = _timed(pythonenv.parse_metadata, text)
    assert [r.name for r in meta.requires] == ["a"] and meta.requires[0].spec.endswith(")x")


def test_torch_version_py_long_line():  # 56 s
    text = "__version__ = '2.4.0+cu121'\ncuda = '12.1'" + " " * 100_000 + "; debug = False\n"
    build = _timed(frameworks.parse_torch_version_py, text)
    assert (build.version, build.cuda, build.notes) == ("2.4.0+cu121", "12.1", ())


def test_torch_version_py_is_never_executed():
    build = frameworks.parse_torch_version_py("__version__ = __import__('os').getcwd()\n")
    assert build.version == "" and build.cuda is None


def test_cuda_header_define_of_spaces():  # 58 s
    text = "#define CUDA_VERSION 12040" + " " * 100_000 + "x\n#define CUDA_VERSION 13000\n"
    assert _timed(lambda t: toolkit.define(t, "CUDA_VERSION"), text).startswith("12040 ")
    assert toolkit.define("# define CUDA_VERSION 12040 // 12.4\n", "CUDA_VERSION") == "12040"
    assert toolkit.define("#define CUDA_VERSION\t12040 /* x */\r\n", "CUDA_VERSION") == "12040"


def test_mdstat_line_of_zeros():  # 54 s
    text = "Personalities : [raid1]\nmd0 : active raid1 sda[0]\n      " + "0" * 80_000 + "\n"
    mdstat = _timed(mdraid.parse_mdstat, text)
    assert mdstat.arrays[0].name == "md0" and mdstat.arrays[0].notes


def test_mdstat_personalities_of_brackets():
    mdstat = _timed(mdraid.parse_mdstat, "Personalities : " + "[" * 100_000 + "\n")
    assert mdstat.personalities == ()
    assert shm.parse_thp_mode("[" * 100_000 + "[madvise] never") == "madvise"


def test_ldconfig_line_of_spaces():  # 50 s
    line = "\tlibcudart.so.12 (libc6,x86-64) => /usr/lib/libcudart.so.12" + " " * 100_000 + "x"
    libs, notes = _timed(cudalibs.parse_ldconfig, line + "\n")
    assert list(libs) == ["libcudart.so.12"] and libs["libcudart.so.12"][0].endswith(" x")
    libs, _ = cudalibs.parse_ldconfig("\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/libcuda.so.1  \n")
    assert libs == {"libcuda.so.1": ("/usr/lib/libcuda.so.1",)}


def test_mdadm_detail_line_of_spaces():  # 21 s
    text = "/dev/md0:\n     Raid Level : raid1\nA" + " " * 100_000 + "x\n"
    detail = _timed(mdraid.parse_mdadm_detail, text)
    assert detail.level == "raid1" and detail.notes
    kv = mdraid.parse_mdadm_detail("/dev/md0:\n  State :clean\n  Raid Devices\t: 2\n")
    assert kv.raid_devices == 2 and kv.state == ""


def test_nvlink_gpu_line_of_spaces():
    from dldoctor.facts.nvlink import parse_nvlink_status

    text = (
        "GPU 0: NVIDIA H100 80GB HBM3" + " " * 100_000 + "x (UUID: GPU-1)\n\t Link 0: 26.562 GB/s\n"
    )
    statuses, _ = _timed(parse_nvlink_status, text)
    assert len(statuses) == 1


def test_ibv_devinfo_and_port_state_of_spaces():
    from dldoctor.facts.rdma import parse_ibv_devinfo, parse_state

    text = "hca_id:\tmlx5_0\n\tfw_ver:\t\t\t28.39.1002\nA" + " " * 100_000 + "x\n"
    assert _timed(parse_ibv_devinfo, text).fw_ver == {"mlx5_0": "28.39.1002"}

    assert _timed(parse_state, "4:" + " " * 100_000 + "ACTIVE x") == (4, "ACTIVE x")
    assert parse_state("4: ACTIVE\n") == (4, "ACTIVE")


def test_nvcc_wrapper_of_slashes():
    script = "#!/bin/sh\nexec " + "/" * 100_000 + "x\n"
    assert _timed(toolkit.nvcc_script_target, script) == ""
    wrapper = '#!/bin/sh\nexec /usr/local/cuda-13.0/bin/nvcc "$@"\n'
    assert toolkit.nvcc_script_target(wrapper) == "/usr/local/cuda-13.0/bin/nvcc"
    assert toolkit.nvcc_script_target("#!/bin/sh\n/a/bin/nvcc.real x:/b/bin/nvcc\n") == (
        "/b/bin/nvcc"
    )


def test_framework_dict_of_spaces():
    text = "build_info = {'cuda_version': '" + " " * 100_000 + "x\n"
    assert _timed(lambda t: frameworks._dict_str(t, "cuda_version"), text) is None


# --- the inputs the fuzz run of issue 13 found escaping or super-linear --------------------


def test_sxid_event_of_50000_continuation_lines():  # cut off by the deadline
    from dldoctor.facts.sxid import parse_sxid

    head = "[ 1.0] nvidia-nvswitch2: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 30 LTSSM\n"
    more = "[ 1.0] nvidia-nvswitch2: SXid (PCI:0000:05:00.0): 20034, Severity 5 Engine instance 3\n"
    # about 1 s of line parsing; joined per line it was 100 GB of copying
    start = time.thread_time()
    events, _ = parse_sxid(head + more * 50_000)
    assert time.thread_time() - start < 5 * HANG_S
    assert len(events) == 1 and events[0].raw.count("\n") == 50_000 and events[0].link == 30


def test_os_release_line_of_a_megabyte():  # 20-34 s (shlex, a character at a time)
    from dldoctor.facts.system import parse_os_release

    release = _timed(parse_os_release, 'ID=ubuntu\nPRETTY_NAME="' + "a b" * 350_000 + '"\n')
    assert release.id == "ubuntu" and len(release.pretty_name) == 1_050_000
    assert _timed(parse_os_release, "NAME='" + "x" * 1_000_000 + "\n").notes


def test_bug_report_command_line_of_a_megabyte():
    from dldoctor.host.bugreport import command_words
    from dldoctor.shellwords import split

    assert _timed(command_words, '/usr/bin/lspci -d "' + "1" * 1_000_000 + '" -v') == ()
    assert command_words('/usr/bin/lspci -d "10de:*" -v') == ("lspci", "-d", "10de:*", "-v")
    # the splitter itself (sos's reader calls it too) on the megabyte line
    words = _timed(split, '/usr/bin/lspci -d "' + "1" * 1_000_000 + '" -v')
    assert words[0] == "/usr/bin/lspci" and len(words[2]) == 1_000_000
    assert _timed(command_words, 'lspci "' + "a" * 1_000) == ()  # unbalanced: no command


def test_deepspeed_info_of_1_6_mb():  # 4.7 s: the whole file parsed as Python
    text = "x = 1\n" * 250_000 + "version='0.17.6'\ntorch_info = {'cuda_version': '12.4'}\n"
    build = _timed(frameworks.parse_deepspeed_info, text)
    assert (build.version, build.cuda) == ("0.17.6", "12.4")
    assert _timed(frameworks.parse_deepspeed_info, "version = f()\n" * 120_000).version == ""


def test_toml_helpers_on_long_text():
    import tracemalloc

    from dldoctor.tomllines import basic_string, line_of

    # a character at a time: 4 s on 4 MB
    assert len(_timed(basic_string, "\x01a" * 2_000_000)) == 14_000_002
    # a long key in each element of an array: its paths noted 200 MB for 200 kB of text
    text = "a.a = [1]\n" + "k" * 100_000 + " = [" + "1," * 2000 + "]\n"
    tracemalloc.start()
    try:
        assert _timed(lambda t: line_of(t, "a.a"), text) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * len(text) + (1 << 20)
    assert line_of("a.a = [1]\nb = 2\n", "b") == 2
