"""capd-py's test extension (capd_py/testing/test_extension.py) packaged as clusterctl's RuntimeExtensionProvider
`test-extension`, the way upstream packages its own (test/extension/config/default): what upstream's RuntimeSDK
specs install with `clusterctl init --runtime-extension test-extension` and then register with an ExtensionConfig
naming the Service `test-extension-webhook-service` in `test-extension-system` and the CA of the Secret
`test-extension-webhook-service-cert` (`cert-manager.io/inject-ca-from-secret`).

Same names and shape as upstream's kustomized manifest: a Deployment serving the extension on 9443 with the
cert-manager certificate mounted at controller-runtime's default path, the Service on 443, a self-signed Issuer and
the Certificate for the Service's DNS names, the RBAC upstream's extension has (ConfigMaps: it records each hook's
answer in one). The Deployment runs capd-py's controllers image (`capd-py extension serve`), which is on the
management cluster's nodes already: nothing is pulled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from capd_py.api.labels import PROVIDER_NAME_LABEL
from capd_py.kube.components import dump, write_provider

NAME = "test-extension"
PROVIDER_TYPE = "RuntimeExtensionProvider"
LABEL = f"runtime-extension-{NAME}"  # clusterctl's provider label value and repository folder
FILE_NAME = "runtime-extension-components.yaml"
NAMESPACE = "test-extension-system"
SERVICE = "test-extension-webhook-service"
CERT_SECRET = f"{SERVICE}-cert"  # upstream's spec injects the CA from <namespace>/<service>-cert
CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"
PORT = 9443
TARGET = "capd_py.testing.test_extension:extension"
_APP = {"app": "test-extension-manager"}


def documents(image: str) -> list[dict[str, Any]]:
    """The provider's components, every object labelled with clusterctl's provider label."""
    sa, role = "test-extension-manager", "test-extension-manager-role"
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": NAMESPACE}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": role},
         "rules": [
             {"apiGroups": [""], "resources": ["configmaps"],
              "verbs": ["create", "get", "list", "patch", "update", "watch"]},
             {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
             {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "test-extension-manager-rolebinding"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
         "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}]},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": SERVICE, "namespace": NAMESPACE},
         "spec": {"ports": [{"port": 443, "targetPort": "webhook-server"}], "selector": dict(_APP)}},
        {"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
         "metadata": {"name": "test-extension-selfsigned-issuer", "namespace": NAMESPACE},
         "spec": {"selfSigned": {}}},
        {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
         "metadata": {"name": "test-extension-serving-cert", "namespace": NAMESPACE},
         "spec": {"dnsNames": [f"{SERVICE}.{NAMESPACE}.svc", f"{SERVICE}.{NAMESPACE}.svc.cluster.local", "localhost"],
                  "issuerRef": {"kind": "Issuer", "name": "test-extension-selfsigned-issuer"},
                  "secretName": CERT_SECRET, "subject": {"organizations": ["k8s-sig-cluster-lifecycle"]}}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "test-extension-controller-manager", "namespace": NAMESPACE, "labels": dict(_APP)},
         "spec": {"replicas": 1, "selector": {"matchLabels": dict(_APP)}, "template": {
             "metadata": {"labels": dict(_APP)},
             "spec": {
                 "serviceAccountName": sa,
                 "terminationGracePeriodSeconds": 10,
                 "tolerations": [{"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane"}],
                 "containers": [{
                     "name": "manager", "image": image, "imagePullPolicy": "IfNotPresent",
                     "args": ["extension", "serve", TARGET, "--port", str(PORT), "--cert-dir", CERT_DIR],
                     "env": [{"name": "CAPD_PY_PLAIN", "value": "1"}],
                     "ports": [{"containerPort": PORT, "name": "webhook-server", "protocol": "TCP"}],
                     "readinessProbe": {"tcpSocket": {"port": "webhook-server"}, "periodSeconds": 2},
                     "volumeMounts": [{"mountPath": CERT_DIR, "name": "cert", "readOnly": True}],
                     "terminationMessagePolicy": "FallbackToLogsOnError"}],
                 "volumes": [{"name": "cert", "secret": {"secretName": CERT_SECRET}}]}}}},
    ]
    for d in docs:
        d["metadata"].setdefault("labels", {})[PROVIDER_NAME_LABEL] = LABEL
    return docs


def write(repository: Path, version: str, image: str) -> dict[str, Any]:
    """Write the provider into `repository` (clusterctl's local layout); its `providers:` entry for a clusterctl
    config."""
    path = write_provider(repository.expanduser().resolve(), LABEL, version, FILE_NAME, dump(documents(image)))
    return {"name": NAME, "type": PROVIDER_TYPE, "url": path.as_posix()}
