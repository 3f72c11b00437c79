"""``/proc/cmdline``: the kernel boot parameters, one row per parameter.

Raw input (one line)::

    BOOT_IMAGE=/vmlinuz-6.1.0-18-amd64 root=UUID=0b6c ro quiet isolcpus=2-7 nohz_full=2-7 transparent_hugepage=never

Output table ``host_setting`` (one row per parameter, in command-line order)::

    category "cmdline", subject null,
    name     the parameter name with ``-`` written ``_`` (the kernel treats them alike:
             ``nohz-full`` and ``nohz_full`` are one parameter); ``BOOT_IMAGE`` kept as is
    value    the text after the first ``=`` with surrounding double quotes removed
             (``root=UUID=0b6c`` -> ``UUID=0b6c``); "" for ``name=``; null for a bare flag
             (``quiet``, ``ro``, ``nomodule``), so a rule can tell "given empty" from "given alone"
    choices  null

Arguments after a lone ``--`` go to init, not the kernel: they are counted in a note and not
kept. Double-quoted values may hold blanks (``dyndbg="file foo.c +p"``). ``records`` is the
number of parameters. Lines after the first non-blank one are warned about and skipped.

>>> from dbdiag.parsers.base import ParseContext
>>> out = parse("BOOT_IMAGE=/vmlinuz ro quiet nohz-full=2-7\\n", ParseContext(source="cmdline.txt"))
>>> out.tables["host_setting"].select("name", "value").rows()
[('BOOT_IMAGE', '/vmlinuz'), ('ro', None), ('quiet', None), ('nohz_full', '2-7')]
"""

from __future__ import annotations

import re

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.host_setting import TABLE, frame
from dbdiag.parsers.kit.warning_caps import cap_skipped_lines
from dbdiag.patterns import lazy_compile

_TOKEN_RE = lazy_compile(r'(?:[^\s"]|"[^"]*"?)+')
_NAME_RE = lazy_compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
# Parameters common enough on real servers that two of them make a line a kernel command line.
_KNOWN_FLAGS = frozenset({
    "ro", "rw", "quiet", "splash", "nomodule", "nomodeset", "noapic", "nosmp", "single", "debug",
    "nokaslr", "nopti", "noibrs", "noibpb", "nosmt", "noefi", "earlyprintk", "rhgb", "nohz",
})
_KNOWN_KEYS = frozenset({
    "BOOT_IMAGE", "root", "rootfstype", "rootflags", "rootwait", "init", "rdinit", "console", "crashkernel",
    "isolcpus", "nohz_full", "rcu_nocbs", "rcu_nocb_poll", "irqaffinity", "numa_balancing", "transparent_hugepage",
    "hugepages", "hugepagesz", "default_hugepagesz", "intel_iommu", "amd_iommu", "iommu", "mitigations",
    "panic", "resume", "selinux", "apparmor", "security", "audit", "elevator", "intel_idle.max_cstate",
    "processor.max_cstate", "idle", "intel_pstate", "net.ifnames", "biosdevname", "swiotlb", "psi",
    "cgroup_enable", "systemd.unified_cgroup_hierarchy", "numa", "skew_tick", "tsc", "clocksource",
    "reboot", "loglevel", "nr_cpus", "maxcpus", "possible_cpus", "mem", "memmap", "vga", "LANG",
    "KEYMAP", "KEYTABLE", "rd.lvm.lv", "rd.luks.uuid", "rd.md", "rd.dm", "random.trust_cpu", "pci",
    "kpti", "spectre_v2", "spec_store_bypass_disable", "tsx", "pti", "zswap.enabled", "cgroup_disable",
})
_CMDLINE_HINT_RE = lazy_compile(r"cmdline", re.IGNORECASE)


def _tokens(line: str) -> list[str]:
    return _TOKEN_RE.findall(line)


def _split(token: str) -> tuple[str, str | None]:
    name, eq, value = token.partition("=")
    if not eq:
        return name, None
    if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
        value = value[1:-1]
    return name, value


def _canonical(name: str) -> str:
    return name if name == "BOOT_IMAGE" else name.replace("-", "_")


def _known(token: str) -> bool:
    name, value = _split(token)
    if value is None:
        return name in _KNOWN_FLAGS
    canonical = _canonical(name)
    return canonical in _KNOWN_KEYS or canonical.startswith(("systemd.", "rd.", "console", "nvme_core."))


def parse(text: str, ctx: ParseContext) -> ParseResult:
    warnings: list[ParseWarning] = []
    notes: list[str] = []
    lines = [(n, raw.rstrip("\r")) for n, raw in enumerate(text.split("\n"), 1) if raw.strip()]
    if not lines:
        raise ParseError("empty: no kernel command line")
    number, line = lines[0]
    tokens = _tokens(line)
    rows = []
    for position, token in enumerate(tokens):
        if token == "--":
            notes.append(f"{len(tokens) - position - 1} argument(s) after '--' are for init, not kept")
            break
        name, value = _split(token)
        if not _NAME_RE.match(name):
            warnings.append(ParseWarning(number, f"not a kernel parameter name; skipped: {token[:60]!r}"))
            continue
        rows.append(("cmdline", None, _canonical(name), value, None))
    for extra, raw in lines[1:]:
        warnings.append(ParseWarning(extra, f"/proc/cmdline has one line; extra line skipped: {raw[:60]!r}"))
    if not rows:
        raise ParseError(f"no kernel parameter on the line: {line[:80]!r}")
    return ParseResult(tables={TABLE: frame(rows, ctx.source)}, records=len(rows), warnings=cap_skipped_lines(warnings), notes=notes)


def detect(head: str, name: str) -> float:
    lines = [line for line in head.split("\n") if line.strip()]
    if len(lines) != 1 or len(lines[0]) > 4096:
        return 0.0
    tokens = _tokens(lines[0])
    if "--" in tokens:
        tokens = tokens[: tokens.index("--")]
    if not tokens or not all(_NAME_RE.match(_split(t)[0]) for t in tokens):
        return 0.0
    if tokens[0].startswith("BOOT_IMAGE="):
        return 0.95
    known = sum(_known(t) for t in tokens)
    hinted = bool(_CMDLINE_HINT_RE.search(name))
    if known >= 2 and known * 3 >= len(tokens):
        return 0.9 if hinted else 0.8
    if hinted and known >= 1:
        return 0.7
    return 0.0


SPEC = ParserSpec(
    kind="proc-cmdline",
    description="/proc/cmdline: kernel boot parameters (isolcpus, nohz_full, transparent_hugepage ...)",
    detect=detect,
    parse=parse,
)
