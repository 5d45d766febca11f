"""The Runtime SDK's decisions (pure): the registry of discovered extension handlers, what a discovery answer
means, how the answers of several handlers add up, and an ExtensionConfig's status (upstream's
internal/runtime/{registry,client} and the ExtensionConfig controller's decisions)."""
