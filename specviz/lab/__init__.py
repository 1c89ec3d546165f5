"""The Lab tab: the lab's stages A-D of the same prompt, each against target-only decoding."""
