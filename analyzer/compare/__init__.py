"""``dbdiag compare BASELINE CAPTURE``: two captures (or two saved analyze JSON reports) side by side.

One job per module, in the order the data flows::

    load.py      a path -> its analyze report document (a saved JSON report, or a capture analyzed)
    fact.py      one compared value (area, key, value, unit, how it is judged, source)
    facts.py     a report document -> facts per (area, key), with units and sources
    host_facts.py  the host side of those facts: CPUs and nodes, interrupts, NUMA, vmstat, /proc/stat, perf
    differ.py    two sides' facts -> differences beyond noise (the noise thresholds live here)
    links.py     which differences cause which (settings, events, plans, findings -> effects)
    verdict.py   the slow side, the outcome gap, the causes ranked with their remediation
    document.py  the compare document (schema ``dbdiag/schema/compare.schema.json``)
    render.py    JSON, Markdown and HTML from that document
    run.py       both sides loaded and compared, and the exit code (what ``cli.py`` calls)

Everything after ``load.py`` reads report documents only, so comparing two captures and comparing
their two saved JSON reports give the same result.
"""
