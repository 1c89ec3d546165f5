"""The Explore tab: k x temperature sweeps and two runs side by side."""
