"""The run directory: writing its files as a run goes (manifest, intervals.jsonl, .hlog,
summary) and reading a finished one back."""
