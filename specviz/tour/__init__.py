"""The guided tour (issue #33): nine chapters over the recorded runs, needing no model. Each chapter sets the
page's view, outlines one element, says what it shows and asks one question (docs/architecture.md §8)."""
