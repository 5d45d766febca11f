"""Runtime SDK extensions written in Python (issue 29): handlers as typed functions (`Extension`), the HTTPS server
(`serve`), its certificates (`ensure_certs`) and the ExtensionConfig that registers it (`extension_config`).
docs/runtime-sdk.md "Writing extensions in Python"; `capd-py extension serve|manifest` drive it from the CLI."""

from capd_py.runtime_extension.certs import ServingCerts, default_cert_dir, ensure_certs
from capd_py.runtime_extension.extension import Extension, ExtensionError, Registration
from capd_py.runtime_extension.manifest import extension_config, for_namespaces, namespace_selector, to_yaml
from capd_py.runtime_extension.server import DEFAULT_PORT, ExtensionServer, serve

__all__ = ["DEFAULT_PORT", "Extension", "ExtensionError", "ExtensionServer", "Registration", "ServingCerts",
           "default_cert_dir", "ensure_certs", "extension_config", "for_namespaces", "namespace_selector", "serve",
           "to_yaml"]
