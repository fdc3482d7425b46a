"""The hot-cluster accelerator cache and the tiered engine over it."""
