#!/usr/bin/env python3
# Usage: python3 scripts/check-perfetto.py FILE.json  (needs `pip install chrometrace`)
"""Loads a trace-event JSON with chrometrace's TraceEvent.from_dict (a consumer from PyPI):
every event must map onto its fields and phase; prints counts per phase."""
import collections, json, sys
from chrometrace import TraceEvent, TraceEventType
doc = json.load(open(sys.argv[1]))
assert isinstance(doc["traceEvents"], list)
phases = collections.Counter()
for e in doc["traceEvents"]:
    ev = TraceEvent.from_dict(e)
    phases[TraceEventType(ev.event_type).name] += 1
    assert isinstance(ev.timestamp_us, (int, float)) and isinstance(ev.process_id, int)
    if e["ph"] == "X":
        assert ev.duration_us >= 0 and ev.timestamp_us >= 0
print(dict(phases), "omitted:", doc.get("metadata", {}).get("omitted"))
