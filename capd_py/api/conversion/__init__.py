"""v1beta1 <-> v1beta2 conversion of Cluster API objects (unstructured dicts, no I/O).

v1beta2 is the hub (the storage version of every capd-py CRD); v1beta1 is the spoke older manifests use
(ExtensionConfig's is v1alpha1, as upstream's runtime group: `spoke_version`).
`to_hub` / `from_hub` follow upstream Cluster API's conversion rules field by field (api/*/v1beta1/conversion.go
in cluster-api release-1.13); `convert` is what a ConversionReview answers. Down-conversion stores the hub
object in the `cluster.x-k8s.io/conversion-data` annotation, as upstream does, so v1beta2 -> v1beta1 -> v1beta2
gives the same object back (see preserve.py for how edits made through v1beta1 are kept).
"""

from capd_py.api.conversion.dispatch import (
    CONVERTIBLE_KINDS,
    HUB_VERSION,
    SPOKE_VERSION,
    ConversionError,
    convert,
    from_hub,
    spoke_version,
    to_hub,
)
from capd_py.api.conversion.preserve import DATA_ANNOTATION

__all__ = [
    "CONVERTIBLE_KINDS",
    "DATA_ANNOTATION",
    "HUB_VERSION",
    "SPOKE_VERSION",
    "ConversionError",
    "convert",
    "from_hub",
    "spoke_version",
    "to_hub",
]
