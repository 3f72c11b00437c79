"""Kernel tunables: ``sysctl -a``, ``/etc/sysctl.conf`` / ``sysctl.d`` files and ``grep -r . /proc/sys``.

Raw input, any of (one member may mix them; ``sysctl:``, ``grep:`` and old procps ``error:``
lines are counted, not kept)::

    kernel.numa_balancing = 1                  sysctl -a (values keep their inner tabs)
    fs.file-nr = 218	0	2466177
    # comment / ; comment                      sysctl.conf: comments, key=value, "-" prefix
    vm.swappiness=10
    -net.ipv4.conf.all.rp_filter = 1
    kernel/domainname = example.com            slash-separated key (sysctl.d(5))
    /proc/sys/kernel/numa_balancing:1          grep -r . /proc/sys

Output table ``host_setting`` (one row per setting line, in file order)::

    category "sysctl", subject null, name the dotted key as ``sysctl -a`` prints it, value as
    printed (surrounding blanks removed), choices null, source

The ``/proc/sys`` path and slash-separated keys become the dotted name the way sysctl.d(5)
maps them: ``/`` and ``.`` swap, so ``/proc/sys/net/ipv4/conf/eth0.100/forwarding`` is
``net.ipv4.conf.eth0/100.forwarding``. A key may repeat (a multi-line ``/proc/sys`` file, or
a conf file setting it twice; sysctl applies them in order, the last wins). ``records`` is the
number of rows.

>>> from dbdiag.parsers.base import ParseContext
>>> text = "kernel.numa_balancing = 1\\nfs.file-nr = 218\\t0\\t2466177\\n/proc/sys/vm/swappiness:60\\n"
>>> parse(text, ParseContext(source="sysctl.txt")).tables["host_setting"].select("name", "value").rows()
[('kernel.numa_balancing', '1'), ('fs.file-nr', '218\\t0\\t2466177'), ('vm.swappiness', '60')]
"""

from __future__ import annotations

import re

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.host_setting import TABLE
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS
from dbdiag.patterns import lazy_compile
from dbdiag.tables import conform

# sysctl's top-level directories; a dotted key under one of them is what tells sysctl output
# from TOML/ini configs that also use "a.b = c".
_NAMESPACES = ("abi", "crypto", "debug", "dev", "fs", "kernel", "net", "sunrpc", "user", "vm")
_NAMESPACE_RE = "(?:" + "|".join(_NAMESPACES) + ")"
_PROC_SYS = r"^/proc/sys/([^:\s]+):(.*)$"
_ASSIGN = r"^[ \t]*(-?)[ \t]*([^\s=#;]+)[ \t]*=[ \t]*(.*?)[ \t]*$"
_SKIP = r"^[ \t]*(?:[#;].*)?$"
_ERROR = r"^(?:sysctl|grep|error): "
_KEY_OK = r"^[A-Za-z0-9_][A-Za-z0-9_.:@+/-]*[./][A-Za-z0-9_.:@+/-]+$"

_DETECT_ASSIGN_RE = lazy_compile(rf"^[ \t]*(?:-[ \t]*)?{_NAMESPACE_RE}[./][^\s=]+[ \t]*=", re.MULTILINE)
_DETECT_COMMENTED_RE = lazy_compile(rf"^[ \t]*[#;][ \t]*{_NAMESPACE_RE}\.[^\s=]+[ \t]*=", re.MULTILINE)
_DETECT_PROC_SYS_RE = lazy_compile(r"^/proc/sys/[a-z]+/[^:\s]*:", re.MULTILINE)
_DETECT_SKIP_RE = lazy_compile(_SKIP + "|" + _ERROR)


def _swap_separators(path: pl.Expr) -> pl.Expr:
    """``net/ipv4/conf/eth0.100/forwarding`` -> ``net.ipv4.conf.eth0/100.forwarding`` (sysctl.d(5))."""
    return (
        path.str.replace_all(".", "\x00", literal=True)
        .str.replace_all("/", ".", literal=True)
        .str.replace_all("\x00", "/", literal=True)
    )


def parse(text: str, ctx: ParseContext) -> ParseResult:
    lines = pl.DataFrame({"text": text.split("\n")}).with_row_index("line", offset=1).with_columns(
        pl.col("text").str.strip_suffix("\r")
    )
    proc = pl.col("text").str.extract_groups(_PROC_SYS)
    assign = pl.col("text").str.extract_groups(_ASSIGN)
    lines = lines.with_columns(
        proc.struct.field("1").alias("proc_path"),
        proc.struct.field("2").alias("proc_value"),
        assign.struct.field("2").alias("key"),
        assign.struct.field("3").alias("assign_value"),
        pl.col("text").str.contains(_SKIP).alias("skip"),
        pl.col("text").str.contains(_ERROR).alias("error"),
    )
    key = pl.col("key")
    slash_first = key.str.contains(r"^[^./]+/")
    lines = lines.with_columns(
        pl.when(pl.col("proc_path").is_not_null())
        .then(_swap_separators(pl.col("proc_path")))
        .when(key.is_not_null() & ~pl.col("error"))
        .then(pl.when(slash_first).then(_swap_separators(key)).otherwise(key))
        .alias("name"),
        pl.coalesce("proc_value", "assign_value").alias("value"),
    )
    lines = lines.with_columns(pl.col("name").str.contains(_KEY_OK).fill_null(False).alias("kept"))
    kept = lines.filter(pl.col("kept"))
    bad = lines.filter(~pl.col("kept") & ~pl.col("skip") & ~pl.col("error"))
    errors = int(lines["error"].sum())
    if kept.height == 0:
        if bad.height == 0 and errors:
            first = lines.filter(pl.col("error"))["text"][0]
            raise ParseError(f"only error lines, no sysctl setting: {first[:80]!r}")
        if bad.height or not _DETECT_COMMENTED_RE.search(text):
            raise ParseError("no sysctl settings (key = value or /proc/sys/...:value) found")

    warnings = [
        ParseWarning(line, f"not a sysctl setting; skipped: {raw[:60]!r}")
        for line, raw in bad.head(MAX_WARNINGS).select("line", "text").rows()
    ]
    if bad.height > MAX_WARNINGS:
        warnings.append(ParseWarning(None, f"{bad.height - MAX_WARNINGS} more lines skipped"))
    notes = []
    if errors:
        notes.append(f"{errors} key(s) could not be read when captured (sysctl:/grep: error lines)")
    if kept.height == 0:
        notes.append("no active settings: every key=value line is commented out")
    table = conform(
        TABLE,
        kept.select(pl.lit("sysctl").alias("category"), "name", "value", pl.lit(ctx.source).alias("source")),
    )
    return ParseResult(tables={TABLE: table}, records=table.height, warnings=warnings, notes=notes)


def detect(head: str, name: str) -> float:
    lines = head.split("\n")
    if len(lines) > 1:
        lines = lines[:-1]  # the head may end mid-line
    content = [line for line in lines if not _DETECT_SKIP_RE.match(line)]
    body = "\n".join(content)
    proc_sys = len(_DETECT_PROC_SYS_RE.findall(body))
    assigned = len(_DETECT_ASSIGN_RE.findall(body))
    hinted = "sysctl" in name.lower()
    if not content:
        commented = len(_DETECT_COMMENTED_RE.findall(head))
        return 0.6 if hinted and commented else 0.0
    share = (proc_sys + assigned) / len(content)
    if share < 0.6:
        return 0.0
    if proc_sys + assigned >= 3:
        return 0.95
    return 0.9 if hinted else 0.7


SPEC = ParserSpec(
    kind="sysctl",
    description="sysctl -a, sysctl.conf/sysctl.d files and grep -r . /proc/sys: kernel tunables",
    detect=detect,
    parse=parse,
)
