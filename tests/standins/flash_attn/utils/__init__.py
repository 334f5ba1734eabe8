"""Stand-in package `flash_attn.utils` (see `flash_attn/__init__.py` for why it exists)."""
