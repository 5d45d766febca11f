"""Pure decisions: observed state in, desired state / actions out. No I/O, no asyncio."""
