"""The command line: `python -m engine run` and `python -m engine sweep`."""
