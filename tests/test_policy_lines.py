"""A policy error names the key and the line it is written on (doctor/tomllines.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dldoctor.policy import PolicyError, load_policy, toml_parser
from dldoctor.tomllines import basic_string, key_lines, line_of

tomllib = toml_parser()  # tomllib, or tomli on Python 3.10: what policy files are read with

DOCUMENT = '''# a site policy
gpu.expected_count = 8   # a dotted key at the top
[kernel]
min_version = "5.15"  # [not a table] x = 1
[os]
supported = [
  { id = "ubuntu", min_version = "22.04" },  # the first
  {id='rhel', min_version = "9"},
]
[[firmware.minimums]]
match = "a]b=c"
min_version = """two
lines with [fake] and x = 1 and \\""" inside
"""
[[firmware.minimums]]
match = 'C:\\lit'
min_version = "2"
[storage]
data_paths = ["/a", "/b",
   "/c"]
"quoted key" = 1
[[pci.expected_links]]
address = "0000:18:00.0"
width = 16
[[pci.expected_links]]
address = "0000:28:00.0"
width = 16
[timeouts]
when = 1979-05-27 07:32:00Z
x.y = {a = 1, b = {c = [1, 2]}}
'''


def test_every_construct_is_placed():
    tomllib.loads(DOCUMENT)  # the scanner's input is always a document tomllib accepted
    lines = key_lines(DOCUMENT)
    assert {k: lines[k] for k in (
        "gpu", "gpu.expected_count", "kernel", "kernel.min_version", "os.supported",
        "os.supported[0].min_version", "os.supported[1]", "os.supported[1].id",
        "firmware.minimums", "firmware.minimums[0]", "firmware.minimums[0].min_version",
        "firmware.minimums[1]", "firmware.minimums[1].match", "firmware.minimums[1].min_version",
        "storage.data_paths[2]", "storage.quoted key", "pci.expected_links[1].width",
        "timeouts.when", "timeouts.x.y.b.c[1]",
    )} == {
        "gpu": 2, "gpu.expected_count": 2, "kernel": 3, "kernel.min_version": 4,
        "os.supported": 6, "os.supported[0].min_version": 7, "os.supported[1]": 8,
        "os.supported[1].id": 8, "firmware.minimums": 10, "firmware.minimums[0]": 10,
        "firmware.minimums[0].min_version": 12, "firmware.minimums[1]": 15,
        "firmware.minimums[1].match": 16, "firmware.minimums[1].min_version": 17,
        "storage.data_paths[2]": 20, "storage.quoted key": 21,
        "pci.expected_links[1].width": 27, "timeouts.when": 29, "timeouts.x.y.b.c[1]": 30,
    }  # fmt: skip
    # Nothing inside a string or a comment was taken for a key or a table.
    assert "fake" not in lines and "x" not in lines and "not a table" not in lines


def test_crlf_line_ends():
    text = DOCUMENT.replace("\n", "\r\n")
    assert key_lines(text)["pci.expected_links[1].width"] == 27


def test_a_missing_key_falls_back_to_the_table_above():
    assert line_of(DOCUMENT, "pci.expected_links[1].nothing") == 25
    assert line_of(DOCUMENT, "nothing.at.all") is None


@given(st.text(max_size=300))
def test_line_of_never_raises(text):
    line = line_of(text, "a.b[0].c")
    assert line is None or line >= 1


def write(tmp_path, text: str) -> str:
    path = tmp_path / "policy.toml"
    path.write_bytes(text.encode())
    return str(path)


@pytest.mark.parametrize("text, line, message", [
    # unknown keys: in a table, at the top, in an array of tables, in an inline table
    ("[kernel]\nmin_version = '5.15'\n\n[gpu]\nexpected_cnt = 8\n", 5,
     "unknown key 'expected_cnt' at [gpu]"),
    ("# header\n\n[gpus]\ncount = 8\n", 3, "unknown key 'gpus' at top level"),
    ("[[firmware.minimums]]\nmatch = 'a'\nmin_version = '1'\n[[firmware.minimums]]\n"
     "match = 'b'\nminimum = '2'\n", 6, "unknown key 'minimum' at [firmware.minimums[1]]"),
    ("[os]\nsupported = [\n  {id = 'ubuntu', min_version = '22.04'},\n"
     "  {id = 'rhel', version = '9'},\n]\n", 4, "unknown key 'version' at [os.supported[1]]"),
    # wrong types
    ("[gpu]\n\nexpected_count = 'eight'\n", 3, "gpu.expected_count must be an int, not str"),
    ("[kernel]\nmin_version = 5.15\n", 2, "kernel.min_version must be a str, not float"),
    ("[storage]\nexpected_raid = 'md0'\n", 2, "storage.expected_raid must be a list"),
    ("gpu = 1\n", 1, "[gpu] must be a table"),
    # bad values
    ('[gpu]\nmin_driver = "550"\nexpected_driver = "latest"\n', 3,
     'gpu.expected_driver must be a version number such as "5.15", not \'latest\''),
    ("[[pci.expected_links]]\naddress = '0000:18:00.0'\nwidth = 16\n[[pci.expected_links]]\n"
     "address = '0000:28:00.0'\nwidth = 15\n", 6,
     "pci.expected_links[1].width must be a PCIe width (1, 2, 4, 8, 12, 16, 32), not 15"),
    ("[[storage.expected_mounts]]\nmount_point = 'data'\n", 2,
     "storage.expected_mounts[0].mount_point must be an absolute path, not 'data'"),
    ("[timeouts]\n\n\ncommand_s = 0\n", 4,
     "timeouts.command_s must be more than 0 and at most 3600 seconds"),
    ('storage.fail_free_percent = 150\n', 1, "storage.fail_free_percent must be a percentage"),
    # a required key left out: the line of its table
    ("[gpu]\n\n[[storage.expected_raid]]\nlevel = 'raid1'\n", 3,
     "storage.expected_raid[0] lacks the key 'name'"),
    # text that looks like TOML inside a string does not move the line
    ('[cpu]\nmodel = """\n[gpu]\nmin_cores = 1\n"""\nmin_cores = -4\n', 6,
     "cpu.min_cores must not be negative, not -4"),
    ("[gpu]\r\n\r\nexpected_count = -1\r\n", 3, "gpu.expected_count must not be negative"),
])  # fmt: skip
def test_policy_errors_name_key_and_line(tmp_path, text, line, message):
    path = write(tmp_path, text)
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    text = str(info.value)
    assert text.startswith(f"policy {path}, line {line}: ")
    assert message in text and "\n" not in text


def test_invalid_toml_keeps_tomllibs_own_line(tmp_path):
    path = write(tmp_path, "[gpu]\nexpected_count = 8\nmin_driver = \n")
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert str(info.value).startswith(f"policy {path} is not valid TOML: ")
    assert "line 3" in str(info.value)


# Random documents: tables, arrays of tables, dotted keys and inline tables, with blank
# lines and comments between them and strings holding any text; every key's line is
# where it was written.
NAME = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
VALUE = st.one_of(
    st.integers().map(str),
    st.text(max_size=20).map(basic_string),
    st.lists(st.text(max_size=5).map(basic_string), max_size=3).map(lambda v: f"[{', '.join(v)}]"),
)

FILLER = st.lists(st.sampled_from(["", "# [x] y = 1", "   ", '# a "comment"']), max_size=2)


@st.composite
def documents(draw):
    lines: list[str] = []
    expected: dict[str, int] = {}
    for table in draw(st.lists(NAME, min_size=1, max_size=4, unique=True)):
        many = draw(st.booleans())
        for n in range(draw(st.integers(1, 2)) if many else 1):
            lines += draw(FILLER)
            lines.append(f"[[{table}]]" if many else f"[{table}]")
            path = f"{table}[{n}]" if many else table
            expected[path] = len(lines)
            for key in draw(st.lists(NAME, min_size=1, max_size=3, unique=True)):
                lines += draw(FILLER)
                if draw(st.booleans()):
                    inner = draw(NAME)
                    lines.append(f"{key} = {{ {inner} = {draw(VALUE)} }}")
                    expected[f"{path}.{key}.{inner}"] = len(lines)
                else:
                    lines.append(f"{key}.leaf = {draw(VALUE)}  # {draw(NAME)} = 2")
                    expected[f"{path}.{key}.leaf"] = len(lines)
    return "\n".join(lines) + "\n", expected


@given(documents())
def test_random_documents_place_every_key(doc):
    text, expected = doc
    tomllib.loads(text)
    found = key_lines(text)
    assert {k: found.get(k) for k in expected} == expected


def test_pci_addresses_with_a_wide_domain_are_accepted(tmp_path):
    path = write(tmp_path, '[[pci.expected_links]]\naddress = "10000:01:00.0"\nwidth = 4\n')
    assert load_policy(path)[0].pci.expected_links[0].address == "10000:01:00.0"


# --- hostile policies: caught before tomllib, or after it, as one line (exit 4) ----------


@pytest.mark.parametrize("text, message", [
    ("[memory]\nmin_total_gib = " + "9" * 309 + "\n", "memory.min_total_gib must be a finite"),
    ("x = " + "[" * 600 + "]" * 600 + "\n", "nested more than 32 deep"),
    ("[cpu]\nmin_cores = " + "1" * 4400 + "\n", "4400 digits"),
    ("a" + ".a" * 50_000 + " = 1\n", "a dotted key of more than 32 parts"),
    ("[" + "a." * 50_000 + "a]\n", "a dotted key of more than 32 parts"),
    ("# x\n" * 300_000, "larger than 1 MiB"),
])  # fmt: skip
def test_a_hostile_policy_is_one_line_error(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert len(str(info.value)) < 400


def test_what_the_caps_let_through_is_read(tmp_path):
    # nesting, dots and brackets inside strings and comments are not the document's
    text = "[cpu]  # a.b.c.d " + "[" * 40 + '\nmodel = "' + "[." * 40 + '"\nmin_cores = 2\n'
    policy, _ = load_policy(write(tmp_path, text))
    assert policy.cpu.min_cores == 2 and policy.cpu.model == "[." * 40


def test_the_cli_answers_a_hostile_policy_with_exit_4(tmp_path):
    from tests.support.cli import run_dldoctor

    path = write(tmp_path, "[memory]\nmin_total_gib = " + "9" * 309 + "\n")
    proc = run_dldoctor("--check", "--json", "--policy", path)
    assert proc.returncode == 4 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "finite number" in proc.stderr


def test_key_lines_refuses_paths_many_times_the_document():
    # a long key in each element of a long array would note a quadratic number of characters
    text = "k" * 20_000 + " = [" + "1," * 20_000 + "]\n"
    with pytest.raises(ValueError):
        key_lines(text)
    assert line_of(text, "k" * 20_000) is None
    assert line_of("a = [1, 2]\nb = 3\n", "b") == 2
