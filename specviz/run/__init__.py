"""The Run tab: its handlers (run, replay, scrub, upload, export) and views (figures, step detail, output)."""
