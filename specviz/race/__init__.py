"""The Race tab: target-only vs speculative decoding on the same models, replayed side by side."""
